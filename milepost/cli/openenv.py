"""``milepost openenv --env ENV --data DIR``: serve one environment over OpenEnv's HTTP and WebSocket API.

The app is OpenEnv's own (``create_app``; ``milepost.integrations.openenv``): ``/ws`` is one episode per
WebSocket session (OpenEnv's ``EnvClient``), ``/reset`` ``/step`` ``/state`` ``/schema`` ``/metadata``
``/health`` and the task routes ``/ENV/splits`` ``/ENV/tasks`` answer over HTTP. ``reset`` takes ``task_id``
(a task of DIR's splits), ``split`` and ``index``, or ``seed``. Binds 127.0.0.1 unless told otherwise; with
``--api-key-env VAR`` every route but /health needs ``Authorization: Bearer $VAR`` (HTTP 401, WebSocket
handshake refused); serving on a non-loopback address without a key prints a warning. Bad input is a 4xx (or
an error frame on the WebSocket) and one log line.
"""

from __future__ import annotations

import argparse
import sys

from milepost.cli.registry_help import env_names
from milepost.envs import ENVS
from milepost.errors import InputError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("openenv", help="serve an environment over OpenEnv's HTTP/WebSocket API", description=__doc__)
    p.add_argument("--env", required=True, choices=list(ENVS.names()), help=f"environment to serve: {env_names()}")
    p.add_argument("--data", default=None, metavar="DIR", help="dataset folder whose tasks reset(task_id=...) plays")
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="TCP port (default 8000; 0 picks a free one)")
    p.add_argument(
        "--api-key-env",
        default=None,
        metavar="VAR",
        help="environment variable holding the bearer token clients must send",
    )
    p.add_argument("--max-sessions", type=int, default=64, help="concurrent WebSocket sessions at most (default 64)")
    p.add_argument("--max-steps", type=int, default=None, help="turn budget of an episode (default: the env's)")
    p.add_argument("--render", default=None, help="observation rendering (default: the env's)")
    p.add_argument("--action-mode", default=None, help="atomic | macro | ... (default: the env's)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        from milepost.integrations.openenv import build_app, serve
    except ImportError as exc:  # the openenv extra is not installed
        raise InputError(f"milepost openenv needs OpenEnv: pip install 'milepost[openenv]' ({exc})") from None
    from milepost.cli.serve import api_key_from_env
    from milepost.serve.runner import bind_socket, is_loopback

    api_key = api_key_from_env(args.api_key_env)
    if args.max_sessions < 1:
        raise InputError(f"--max-sessions must be positive, got {args.max_sessions}")
    env_kwargs = {
        key: getattr(args, key) for key in ("max_steps", "render", "action_mode") if getattr(args, key) is not None
    }
    app = build_app(args.env, args.data, env_kwargs=env_kwargs, api_key=api_key, max_sessions=args.max_sessions)
    if api_key is None and not is_loopback(args.host):
        print(f"milepost: warning: serving on {args.host} without an API key", file=sys.stderr)
    sock = bind_socket(args.host, args.port)
    try:
        host = f"[{args.host}]" if ":" in args.host else args.host
        print(f"serving milepost {args.env} (OpenEnv) on http://{host}:{sock.getsockname()[1]}", file=sys.stderr)
        sys.stderr.flush()
        serve(app, sock)
    finally:
        sock.close()
    return 0
