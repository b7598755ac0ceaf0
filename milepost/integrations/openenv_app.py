"""The ASGI app an OpenEnv manifest names (``app: milepost.integrations.openenv_app:app``), for ``uvicorn`` or
``openenv serve``: the environment from ``MILEPOST_ENV``, its tasks from ``MILEPOST_DATA`` (a dataset folder;
unset: seeds only), the bearer token from ``MILEPOST_OPENENV_KEY`` (unset: none). ``milepost openenv`` serves the
same app and also bounds WebSocket frames and slow request headers; prefer it where you choose the command."""

from __future__ import annotations

import os

from milepost.errors import InputError
from milepost.integrations.openenv import build_app

_env = os.environ.get("MILEPOST_ENV")
if not _env:
    raise InputError("set MILEPOST_ENV to sudoku, rushhour or webshop (and MILEPOST_DATA to a dataset folder)")
app = build_app(_env, os.environ.get("MILEPOST_DATA") or None, api_key=os.environ.get("MILEPOST_OPENENV_KEY") or None)
