"""API-key checks of ``milepost serve``, in process (no server): which Authorization headers pass, which get a
401, what stays open. `test_serve_app.py` checks the same over a real socket."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from milepost.backends.hf import HFBackend
from milepost.serve.app import create_app

KEY = "s3cret-key-42"


@pytest.fixture(scope="module")
def backend(tiny_model_dir: Path) -> HFBackend:
    return HFBackend(tiny_model_dir, device="cpu")


REFUSED = {
    "no header": None,
    "empty key": "Bearer",
    "prefix of the key": f"Bearer {KEY[:-1]}",
    "first character": f"Bearer {KEY[0]}",
    "key plus a suffix": f"Bearer {KEY}x",
    "another key": "Bearer another-key-42",
    "wrong scheme": f"Basic {KEY}",
    "scheme glued to the key": f"Bearer{KEY}",
    "no scheme": KEY,
}


def test_only_the_exact_key_passes(backend: HFBackend) -> None:
    app = create_app(backend, api_key=KEY, model_name="tiny")
    with TestClient(app) as client:
        for case, header in REFUSED.items():
            headers = {} if header is None else {"Authorization": header}
            for method, path in (("GET", "/v1/models"), ("POST", "/v1/completions")):
                r = client.request(method, path, headers=headers, json={"model": "tiny", "prompt": "x"})
                assert r.status_code == 401, (case, path)
                assert r.json()["error"]["code"] == "invalid_api_key", case
        for header in (f"Bearer {KEY}", f"bearer {KEY}", f"BEARER {KEY}"):
            r = client.get("/v1/models", headers={"Authorization": header})
            assert r.status_code == 200 and r.json()["data"][0]["id"] == "tiny"
        assert client.get("/health").status_code == 200  # the health check stays open
        for path in ("/docs", "/redoc", "/openapi.json"):  # no API description behind a key
            assert client.get(path).status_code == 404, path


def test_without_a_key_nothing_is_asked(backend: HFBackend) -> None:
    app = create_app(backend, model_name="tiny")
    with TestClient(app) as client:
        assert client.get("/v1/models").status_code == 200
        assert client.get("/v1/models", headers={"Authorization": "Bearer anything"}).status_code == 200
        assert client.get("/docs").status_code == 200 and client.get("/openapi.json").status_code == 200


@pytest.mark.parametrize("key", ["", "  "])
def test_an_empty_key_is_refused_when_the_app_is_built(backend: HFBackend, key: str) -> None:
    # With an empty key, a bare "Authorization: Bearer" would compare equal and pass.
    message = r"^api_key must not be empty \(an empty key would let a bare 'Bearer' header through\)$"
    with pytest.raises(ValueError, match=message):
        create_app(backend, api_key=key, model_name="tiny")
