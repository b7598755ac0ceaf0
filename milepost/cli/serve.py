"""``milepost serve MODEL_DIR``: expose a local model over an OpenAI-compatible HTTP API.

Binds 127.0.0.1 unless told otherwise. With ``--api-key-env VAR`` every request needs
``Authorization: Bearer $VAR``; serving on a non-loopback address without a key prints a warning.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys

from milepost.errors import InputError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve a model over an OpenAI-compatible HTTP API", description=__doc__)
    p.add_argument("model_dir", metavar="MODEL_DIR", help="Hugging Face model directory (or hub name)")
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="TCP port (default 8000)")
    p.add_argument(
        "--api-key-env",
        default=None,
        metavar="VAR",
        help="environment variable holding the bearer token clients must send",
    )
    p.add_argument("--max-tokens-limit", type=int, default=4096, help="largest max_tokens a request may ask")
    p.add_argument("--max-request-bytes", type=int, default=1 << 20, help="largest request body (bytes)")
    p.add_argument("--max-batch-size", type=int, default=64, help="requests decoded together at most")
    p.add_argument("--max-context", type=int, default=None, help="context window (default: the model's)")
    p.add_argument("--model-name", default=None, help="model id to serve under (default: directory name)")
    p.add_argument("--device", default=None, help="cpu | cuda | cuda:N (default: CUDA when present)")
    p.add_argument("--dtype", default="auto", help="auto | float32 | bfloat16 | float16")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from milepost.backends.hf import HFBackend
    from milepost.serve.app import create_app

    api_key = None
    if args.api_key_env:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            raise InputError(f"--api-key-env {args.api_key_env}: that environment variable is not set")
    if args.max_tokens_limit < 1 or args.max_request_bytes < 1:
        raise InputError("--max-tokens-limit and --max-request-bytes must be positive")
    if api_key is None and not _is_loopback(args.host):
        print(f"milepost: warning: serving on {args.host} without an API key", file=sys.stderr)
    backend = HFBackend(
        args.model_dir,
        device=args.device,
        dtype=args.dtype,
        max_context=args.max_context,
        max_batch_size=args.max_batch_size,
    )
    app = create_app(
        backend,
        api_key=api_key,
        max_tokens_limit=args.max_tokens_limit,
        max_request_bytes=args.max_request_bytes,
        model_name=args.model_name,
    )
    print(f"serving {backend.name} on http://{args.host}:{args.port}/v1", file=sys.stderr)
    uvicorn.run(app, host=args.host, port=args.port, log_level="info")
    return 0


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
