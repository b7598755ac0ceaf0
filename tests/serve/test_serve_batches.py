"""``milepost serve`` decodes concurrent requests in one batch; one bad request must not fail the others."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from milepost.backends.hf import HFBackend
from milepost.serve.app import create_app
from milepost.serve.runner import BackgroundServer

POISON = "poison"


class PoisonedBackend(HFBackend):
    """The tiny model, whose decoding loop breaks for any batch that holds the poison prompt (a stand-in for a
    request that passes every check and still fails inside the batch), recording each batch's size."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.batches: list[int] = []

    def _decode_batch(self, rows: list[Any]) -> None:
        self.batches.append(len(rows))
        if any(POISON in self.tokenizer.decode(row.prompt_ids) for row in rows):
            raise ValueError("Overflow when unpacking long long")
        super()._decode_batch(rows)


def _concurrently(url: str, bodies: dict[str, dict[str, Any]]) -> dict[str, httpx.Response]:
    answers: dict[str, httpx.Response] = {}
    barrier = threading.Barrier(len(bodies))

    def send(tag: str) -> None:
        barrier.wait()
        answers[tag] = httpx.post(url, json=bodies[tag], timeout=120)

    threads = [threading.Thread(target=send, args=(tag,)) for tag in bodies]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return answers


@pytest.fixture(scope="module")
def poisoned(tiny_model_dir: Path) -> PoisonedBackend:
    return PoisonedBackend(tiny_model_dir, max_context=256)


def test_a_request_failing_its_batch_fails_alone(poisoned: PoisonedBackend) -> None:
    poisoned.batches.clear()
    # A long batching window so that the four requests are decoded together.
    with BackgroundServer(create_app(poisoned, max_tokens_limit=8, batch_window_s=1.0)) as server:
        bodies = {tag: {"prompt": tag, "max_tokens": 2, "temperature": 0} for tag in ("one", "two", "three")}
        bodies["bad"] = {"prompt": POISON, "max_tokens": 2, "temperature": 0}
        answers = _concurrently(f"{server.base_url}/completions", bodies)
    assert poisoned.batches[0] == 4  # they did share a batch
    assert {tag: r.status_code for tag, r in answers.items()} == {"one": 200, "two": 200, "three": 200, "bad": 500}
    assert "Overflow" in answers["bad"].json()["error"]["message"]
    assert all(len(answers[tag].json()["choices"][0]["token_ids"]) == 2 for tag in ("one", "two", "three"))


def test_an_out_of_range_top_k_is_refused_before_it_reaches_a_batch(poisoned: PoisonedBackend) -> None:
    with BackgroundServer(create_app(poisoned, max_tokens_limit=8, batch_window_s=1.0)) as server:
        bodies = {tag: {"prompt": tag, "max_tokens": 2} for tag in ("one", "two", "three")}
        bodies["bad"] = {"prompt": "four", "max_tokens": 2, "top_k": 2**63}
        answers = _concurrently(f"{server.base_url}/completions", bodies)
    assert {tag: r.status_code for tag, r in answers.items()} == {"one": 200, "two": 200, "three": 200, "bad": 400}
    error = answers["bad"].json()["error"]
    assert error["param"] == "top_k" and error["message"].startswith("top_k:"), error
