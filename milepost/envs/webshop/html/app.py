"""The shop served as HTML (FastAPI with a Jinja2 template), driven by the same ``WebShopEnv`` as the text shop.

Every button posts the WebShop action it stands for (``click[Next >]``, ``click[B0...]``) and the search form posts
``search[...]``, so a person browsing the page, a browser test and an agent take the same steps with the same
rewards and subgoal events. ``/state.json`` reports the episode (for tests and scripts); with a recorded episode
``/replay/next`` applies its actions one at a time. This module needs the serve extra (fastapi, jinja2); the
text environment never imports it.

Who may drive it: each client (browser) gets its own episode, keyed by a random ``SameSite=Strict`` session
cookie; at most ``max_sessions`` are kept. A new client never takes another's episode in play: to make room it
drops the least recently used episode that has taken no step (nothing is lost: a new one is the same) or, failing
that, one idle for ``session_idle_s``; when every episode is in play it gets a 503, so requests without a cookie
cannot evict a user's episode. Every answer says ``X-Frame-Options: DENY`` and ``frame-ancestors 'none'``: no
other page may frame the shop and click its buttons for the user. A request is refused unless
its ``Host`` header names this server (a loopback name, the address the connection arrived on, or an
``allowed_hosts`` name) with the port it arrived on: a page served elsewhere cannot reach the shop through DNS
rebinding. A POST whose ``Origin`` is another site's (or ``null``) is refused, so a page the user visits
cannot drive or reset the shop. Bodies over ``max_body_bytes`` get a 413, actions over ``max_action_chars`` a
400, a body not received within ``read_timeout_s`` a 408 (``milepost.serve.limits``), and an episode keeps its
last ``max_history`` events.
"""

from __future__ import annotations

import re
import secrets
import time
import urllib.parse
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import jinja2
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.requests import ClientDisconnect

from milepost.envs.actions import action_segment
from milepost.envs.base import MAX_ACTION_CHARS
from milepost.envs.webshop.catalogue import Product
from milepost.envs.webshop.env import WebShopEnv
from milepost.envs.webshop.goal import Selection
from milepost.envs.webshop.html.template import PAGE
from milepost.envs.webshop.profile import get_profile
from milepost.envs.webshop.search import PAGE_SIZE
from milepost.envs.webshop.state import ITEM, RESULTS, TAB, ShopState
from milepost.serve.limits import READ_TIMEOUT_S, BodyDeadline
from milepost.types import StepInfo, Task

COOKIE = "milepost_shop"
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
MAX_BODY_BYTES = 64 * 1024  # a form of one action of MAX_ACTION_CHARS, percent-encoded, fits several times
MAX_SESSIONS = 64
SESSION_IDLE_S = 1800.0  # an episode untouched this long may make room for a new client
FRAME_HEADERS = {"x-frame-options": "DENY", "content-security-policy": "frame-ancestors 'none'"}  # clickjacking
MAX_HISTORY = 1000  # events kept per episode; the step budget ends an episode long before


Explain = Callable[[str], tuple[str, str]]  # an answer text -> (its action, its reasoning)


def literal_explain(answer: str) -> tuple[str, str]:
    """An answer's action (after its last ``ACTION:`` tag) and, as its reasoning, the text before that tag as
    written. ``milepost show --web`` passes the agent's own answer parser instead (the environment layer does
    not import the agent layer)."""
    segment = action_segment(answer)
    head = answer[: len(answer) - len(segment)] if segment != answer else ""
    return segment.strip(), head.removesuffix(head[-7:] if head[-7:].lower() == "action:" else "").strip()


def element_id(value: str) -> str:
    """The HTML id of the button for clickable ``value`` (``Next >`` -> ``click-next``)."""
    return "click-" + ("-".join(re.findall(r"[a-z0-9]+", value.lower())) or "x")


class ShopSession:
    """One episode of a task in the web shop: the env, its last step info and the events so far."""

    def __init__(
        self,
        task: Task,
        replay: Sequence[str] | None = None,
        max_history: int = MAX_HISTORY,
        explain: Explain = literal_explain,
        profile: str = "milepost",
    ) -> None:
        self.task = task
        self.explain = explain
        self.env = WebShopEnv(size=task.size, profile=profile)
        self.replay = list(replay) if replay is not None else None
        self.max_history = max_history
        self.used = time.monotonic()  # when its client last asked for it
        self.reset()

    @property
    def untouched(self) -> bool:
        """No step taken since the episode began: dropping it loses nothing."""
        return self.info["steps"] == 0 and self.replay_pos == 0

    def reset(self) -> None:
        _, self.info = self.env.reset(options={"task": self.task})
        self.total_reward = 0.0
        self.over = False
        self.events: list[dict[str, Any]] = []
        self.replay_pos = 0

    def act(self, action: str) -> StepInfo:
        """Take one action (ignored once the episode is over)."""
        if self.over:
            return self.info
        _, reward, terminated, truncated, info = self.env.step(action)
        self.total_reward += reward
        self.over = terminated or truncated
        self.info = info
        _, reasoning = self.explain(action)
        self.events.append({"action": action, "reward": reward, "new_subgoals": list(info["new_subgoals"]),
                            "error": info["error"], "applied": list(info["actions"]),
                            "reasoning": reasoning})  # fmt: skip
        del self.events[: -self.max_history]
        return info

    def replay_next(self) -> None:
        if self.replay is not None and self.replay_pos < len(self.replay):
            self.act(self.replay[self.replay_pos])
            self.replay_pos += 1

    def snapshot(self) -> dict[str, Any]:
        state = self.env.state
        products = state.order.shop.catalogue.products
        return {
            "task_id": self.task.task_id,
            "page": state.page,
            "steps": self.info["steps"],
            "total_reward": self.total_reward,
            "reward_terms": dict(self.info["reward_terms"]),
            "subgoals_completed": list(self.info["subgoals_completed"]),
            "solved": self.info["solved"],
            "termination_reason": self.info["termination_reason"],
            "purchased": None if state.purchased is None else [products[p].pid for p, _ in state.purchased],
            "events": self.events,
        }

    def context(self) -> dict[str, Any]:
        state: ShopState = self.env.state
        products = state.order.shop.catalogue.products
        done = set(self.info["subgoals_completed"])
        ctx: dict[str, Any] = {
            "page": state.page,
            "instruction": state.order.instruction(),
            "cart": [_line(products[p], sel) for p, sel in state.cart],
            "cart_total": _dollars(sum(products[p].price for p, _ in state.cart)),
            "feedback": self.info["error"],
            "ids": {v: element_id(v) for v in state.clickables()},
            "steps": self.info["steps"],
            "total_reward": self.total_reward,
            "done_subgoals": len(self.info["subgoals_completed"]),
            "num_subgoals": self.info["num_subgoals"],
            "remaining": self.info["remaining_distance"],
            "subgoals": [(g.description, g.index in done) for g in self.env.subgoals],
            "history": [
                {"n": n, "applied": ", ".join(e["applied"]) or "nothing", "answer": e["action"],
                 "reasoning": e["reasoning"], "error": e["error"], "reward": e["reward"]}
                for n, e in enumerate(self.events, self.info["steps"] - len(self.events) + 1)
            ],
            "over": self.over,
            "reason": self.info["termination_reason"],
            "replay_left": None if self.replay is None else len(self.replay) - self.replay_pos,
            "replay_next": None,
        }  # fmt: skip
        if self.replay is not None and self.replay_pos < len(self.replay) and not self.over:
            action, reasoning = self.explain(self.replay[self.replay_pos])
            ctx["replay_next"] = {"action": action, "reasoning": reasoning}
        if state.page == RESULTS:
            ctx.update(
                query=state.query, page_no=state.page_no, total=len(state.results), has_prev=state.page_no > 0,
                has_next=(state.page_no + 1) * PAGE_SIZE < len(state.results),
                results=[{"pid": products[i].pid, "title": products[i].title, "price": products[i].price_text()}
                         for i in state.page_results()],
            )  # fmt: skip
        elif state.page in (ITEM, TAB):
            p = state.open_product()
            ctx["product"] = {"title": p.title, "price": p.price_text(), "rating": f"{p.rating:.1f}"}
            ctx["options"] = [(dim, values, chosen) for (dim, values), chosen in zip(p.options, state.selection)]
            if state.page == TAB:
                ctx["tab"] = state.tab
                lines = {"Description": [p.description()], "Features": p.bullets(), "Reviews": p.reviews()}
                ctx["tab_lines"] = lines[state.tab]
        return ctx


def _dollars(cents: int) -> str:
    return f"${cents // 100}.{cents % 100:02d}"


def _line(product: Product, selection: Selection) -> dict[str, str]:
    """A cart line as a person reads it: the product's name and id, the options chosen, the price."""
    chosen = ", ".join(f"{d}: {v}" for d, v in zip(product.dims, selection) if v is not None)
    if not chosen:
        chosen = "no options selected" if product.options else "no options"
    return {"title": product.title, "pid": product.pid, "options": chosen, "price": product.price_text()}


def create_app(
    task: Task,
    replay: Sequence[str] | None = None,
    *,
    allowed_hosts: Sequence[str] = (),
    max_body_bytes: int = MAX_BODY_BYTES,
    max_action_chars: int = MAX_ACTION_CHARS,
    max_sessions: int = MAX_SESSIONS,
    max_history: int = MAX_HISTORY,
    explain: Explain = literal_explain,
    profile: str = "milepost",
    session_idle_s: float = SESSION_IDLE_S,
    read_timeout_s: float = READ_TIMEOUT_S,
) -> FastAPI:
    """The FastAPI app of one task's shop, one episode per client (see the module docstring for the checks).

    Args:
        task: the web-shop task every client's episode starts from.
        replay: a recorded episode's answer texts, for ``/replay/next`` (each client steps through its own copy).
        allowed_hosts: host names accepted in ``Host`` and ``Origin`` besides the loopback names and the address
            a connection arrived on (for a shop served under a DNS name).
        max_body_bytes: larger request bodies get a 413.
        max_action_chars: longer actions (or search queries) get a 400.
        max_sessions: episodes kept at once; a new client beyond them replaces the least recently used episode
            that has taken no step or has been idle ``session_idle_s`` seconds, and gets a 503 when there is none.
        max_history: events of an episode kept for ``/state.json``.
        explain: splits an answer into its action and the agent's reasoning, for the page's list of steps.
        profile: the shop's rules and reward, ``milepost`` (default) | ``webshop`` (``milepost.envs.webshop.profile``).
        session_idle_s: seconds after its last request an episode in play may be dropped for a new client.
        read_timeout_s: seconds a client has to send a request's body after its headers (else a 408).

    Raises:
        ValueError: when a limit is not positive.
        InputError: for an unknown profile.
    """
    get_profile(profile)
    for label, value in (
        ("max_body_bytes", max_body_bytes),
        ("max_action_chars", max_action_chars),
        ("max_sessions", max_sessions),
        ("max_history", max_history),
    ):
        if value < 1:
            raise ValueError(f"{label} must be >= 1, got {value}")
    for label, seconds in (("session_idle_s", session_idle_s), ("read_timeout_s", read_timeout_s)):
        if not seconds > 0:
            raise ValueError(f"{label} must be > 0, got {seconds}")
    template = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined).from_string(PAGE)
    names = LOOPBACK_NAMES | {h.lower().strip("[]") for h in allowed_hosts}
    sessions: OrderedDict[str, ShopSession] = OrderedDict()

    def ours(request: Request, authority: str) -> bool:
        """Whether ``host[:port]`` names this server: a known name, or the address the connection came to."""
        try:
            parts = urllib.parse.urlsplit("//" + authority)
            name, port = parts.hostname, parts.port or 80
        except ValueError:  # a port that is not a number, or out of range
            return False
        server = request.scope.get("server") or (None, None)
        return name is not None and name in names | {str(server[0]).lower()} and port == server[1]

    async def guard(request: Request) -> None:
        # Starlette's TrustedHostMiddleware compares the host name only; the port matters here (another local
        # service's pages are same-site), and the address a connection arrived on is known only per request.
        if not ours(request, request.headers.get("host", "")):
            raise HTTPException(400, "invalid Host header: this shop answers only to its own address")
        origin = request.headers.get("origin")
        if request.method == "POST" and origin is not None:
            parts = urllib.parse.urlsplit(origin)
            if parts.scheme != "http" or not ours(request, parts.netloc):
                raise HTTPException(403, f"cross-origin request from {origin} refused")
        # Fetch metadata (web.dev "resource isolation policy"): another site may link to the shop (a top-level
        # GET navigation) but not load it in the background, which would make sessions and evict the user's.
        if request.headers.get("sec-fetch-site") == "cross-site" and not (
            request.method == "GET" and request.headers.get("sec-fetch-mode") == "navigate"
        ):
            raise HTTPException(403, "cross-site request refused")

    app = FastAPI(title="milepost shop", docs_url=None, redoc_url=None, openapi_url=None, dependencies=[Depends(guard)])
    app.state.sessions = sessions
    app.add_middleware(
        BodyDeadline,
        timeout_s=read_timeout_s,
        # the forms' own limit is checked as they are read; this one only keeps a slow or huge body out
        max_bytes=max_body_bytes,
        refuse=lambda status, message: JSONResponse({"error": message}, status_code=status),
    )

    @app.middleware("http")
    async def _not_framed(request: Request, call_next: Callable[[Request], Any]) -> Response:
        response: Response = await call_next(request)
        response.headers.update(FRAME_HEADERS)
        return response

    def session_of(request: Request) -> tuple[ShopSession, str | None]:
        """The client's episode, and the new cookie to set when it had none (or one no longer kept)."""
        now = time.monotonic()
        key = request.cookies.get(COOKIE, "")
        if key in sessions:
            sessions.move_to_end(key)
            sessions[key].used = now
            return sessions[key], None
        if len(sessions) >= max_sessions:
            # Oldest first (the dict is in order of use): one that lost nothing, else one left idle.
            spare = next((k for k, s in sessions.items() if s.untouched), None) or next(
                (k for k, s in sessions.items() if now - s.used >= session_idle_s), None
            )
            if spare is None:
                raise HTTPException(
                    503,
                    f"the shop is full: all {max_sessions} episodes are in play; retry later",
                    headers={"Retry-After": "60"},
                )
            del sessions[spare]
        key = secrets.token_urlsafe(16)
        sessions[key] = ShopSession(task, replay, max_history, explain, profile)
        return sessions[key], key

    def answer(response: Response, new_key: str | None) -> Response:
        if new_key is not None:
            response.set_cookie(COOKIE, new_key, httponly=True, samesite="strict")
        return response

    def back(new_key: str | None) -> Response:
        return answer(RedirectResponse("/", status_code=303), new_key)

    async def field(request: Request, name: str) -> str:
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > max_body_bytes:
            raise HTTPException(413, f"request body over the {max_body_bytes}-byte limit")
        raw = bytearray()
        try:
            async for chunk in request.stream():  # counted as it arrives: a chunked body declares no length
                raw += chunk
                if len(raw) > max_body_bytes:
                    raise HTTPException(413, f"request body over the {max_body_bytes}-byte limit")
        except ClientDisconnect:  # the client left mid-body: nobody reads the answer, and nothing was done
            raise HTTPException(400, "the client closed the request before its body ended") from None
        # The forms are urlencoded; parsed here so the page needs no python-multipart.
        values = urllib.parse.parse_qs(raw.decode("utf-8", errors="replace"), keep_blank_values=True).get(name, [""])
        if len(values[0]) > max_action_chars:
            raise HTTPException(400, f"{name} longer than {max_action_chars} characters")
        return values[0]

    @app.exception_handler(HTTPException)
    async def _refused(_: Request, exc: HTTPException) -> JSONResponse:
        return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code, headers=exc.headers)

    @app.get("/", response_class=HTMLResponse)
    async def page(request: Request) -> Response:
        session, new_key = session_of(request)
        ctx = session.context()
        for key in ("query", "page_no", "total", "has_prev", "has_next", "results", "product", "options", "tab",
                    "tab_lines"):  # fmt: skip
            ctx.setdefault(key, None)
        ctx["max_query"] = max_action_chars - len("search[]")
        return answer(HTMLResponse(template.render(**ctx)), new_key)

    @app.post("/act")
    async def act(request: Request) -> Response:
        action = await field(request, "action")
        session, new_key = session_of(request)
        session.act(action)
        return back(new_key)

    @app.post("/search")
    async def search(request: Request) -> Response:
        query = await field(request, "query")
        session, new_key = session_of(request)
        session.act(f"search[{query}]")
        return back(new_key)

    @app.post("/reset")
    async def reset(request: Request) -> Response:
        session, new_key = session_of(request)
        session.reset()
        return back(new_key)

    @app.post("/replay/next")
    async def replay_next(request: Request) -> Response:
        session, new_key = session_of(request)
        session.replay_next()
        return back(new_key)

    @app.get("/state.json")
    async def state(request: Request) -> Response:
        session, new_key = session_of(request)
        return answer(JSONResponse(session.snapshot()), new_key)

    return app
