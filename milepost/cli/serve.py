"""``milepost serve MODEL_DIR``: expose a local model over an OpenAI-compatible HTTP API.

Binds 127.0.0.1 unless told otherwise. With ``--api-key-env VAR`` every /v1 route needs
``Authorization: Bearer $VAR`` (else 401), /health stays open for load balancers, and /docs, /redoc and
/openapi.json are switched off; without a key every route is open, and serving on a non-loopback address
prints a warning. Bad request bodies get an OpenAI-shaped 400, bodies over --max-request-bytes a 413,
requests beyond --max-queue waiting ones a 429; a client gets --read-timeout seconds for a request's headers
and again for its body (else the connection is closed, after a 408 for a body). Chat requests without
max_tokens get --default-max-tokens.
"""

from __future__ import annotations

import argparse
import os
import sys

from milepost.errors import InputError

READ_TIMEOUT_S = 30.0  # milepost.serve.limits.READ_TIMEOUT_S; literal so that `milepost --help` imports no uvicorn


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve a model over an OpenAI-compatible HTTP API", description=__doc__)
    p.add_argument("model_dir", metavar="MODEL_DIR", help="Hugging Face model directory (or hub name)")
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="TCP port (default 8000; 0 picks a free one)")
    p.add_argument(
        "--api-key-env",
        default=None,
        metavar="VAR",
        help="environment variable holding the bearer token clients must send",
    )
    p.add_argument("--max-tokens-limit", type=int, default=4096, help="largest max_tokens a request may ask")
    p.add_argument("--max-request-bytes", type=int, default=1 << 20, help="largest request body (bytes)")
    p.add_argument(
        "--read-timeout",
        type=float,
        default=READ_TIMEOUT_S,
        metavar="S",
        help=f"seconds for a request's headers, and again for its body (default {READ_TIMEOUT_S:g})",
    )
    p.add_argument("--max-batch-size", type=int, default=64, help="requests decoded together at most")
    p.add_argument(
        "--max-queue", type=int, default=256, help="requests that may wait for the model; more get a 429 (default 256)"
    )
    p.add_argument(
        "--default-max-tokens",
        type=int,
        default=256,
        help="new tokens at most for a chat request without max_tokens (default 256)",
    )
    p.add_argument("--max-context", type=int, default=None, help="context window (default: the model's)")
    p.add_argument("--model-name", default=None, help="model id to serve under (default: directory name)")
    p.add_argument("--device", default=None, help="cpu | cuda | cuda:N (default: CUDA when present)")
    p.add_argument("--dtype", default="auto", help="auto | float32 | bfloat16 | float16")
    p.set_defaults(func=run)


def api_key_from_env(var: str | None) -> str | None:
    """The bearer token held by the environment variable ``var`` (``--api-key-env``), None without one; an unset
    or empty variable is a one-line error (an empty key would lock every client out, or let every client in)."""
    if not var:
        return None
    api_key = os.environ.get(var)
    if api_key is None:
        raise InputError(f"--api-key-env {var}: that environment variable is not set")
    if not api_key.strip():
        raise InputError(f"--api-key-env {var}: that environment variable is empty; set it to the key")
    return api_key


def run(args: argparse.Namespace) -> int:
    from milepost.backends.hf import HFBackend
    from milepost.serve.app import create_app
    from milepost.serve.runner import bind_socket, is_loopback, serve_forever

    api_key = api_key_from_env(args.api_key_env)
    for flag in ("max_tokens_limit", "max_request_bytes", "max_queue", "default_max_tokens"):
        if getattr(args, flag) < 1:
            raise InputError(f"--{flag.replace('_', '-')} must be positive, got {getattr(args, flag)}")
    if not args.read_timeout > 0:  # also refuses nan
        raise InputError(f"--read-timeout must be positive, got {args.read_timeout:g}")
    if not 0 <= args.port <= 65535:
        raise InputError(f"--port {args.port}: a TCP port is 0..65535")
    if api_key is None and not is_loopback(args.host):
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
        max_queue=args.max_queue,
        default_max_tokens=args.default_max_tokens,
        read_timeout_s=args.read_timeout,
    )
    sock = bind_socket(args.host, args.port)  # "serving on" only once the port is ours
    try:
        host = f"[{args.host}]" if ":" in args.host else args.host
        print(f"serving {backend.name} on http://{host}:{sock.getsockname()[1]}/v1", file=sys.stderr)
        serve_forever(app, sock, header_timeout_s=args.read_timeout)
    finally:
        sock.close()
    return 0
