"""The shop served as HTML (FastAPI with a Jinja2 template), driven by the same ``WebShopEnv`` as the text shop.

Every button posts the WebShop action it stands for (``click[Next >]``, ``click[B0...]``) and the search form posts
``search[...]``, so a person browsing the page, a browser test and an agent take the same steps with the same
rewards and subgoal events. ``/state.json`` reports the episode (for tests and scripts); with a recorded episode
``/replay/next`` applies its actions one at a time. This module needs the serve extra (fastapi, jinja2); the
text environment never imports it.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Sequence
from typing import Any

import jinja2
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse

from milepost.envs.webshop.env import WebShopEnv
from milepost.envs.webshop.html.template import PAGE
from milepost.envs.webshop.search import PAGE_SIZE
from milepost.envs.webshop.state import ITEM, RESULTS, TAB, ShopState
from milepost.types import StepInfo, Task


def element_id(value: str) -> str:
    """The HTML id of the button for clickable ``value`` (``Next >`` -> ``click-next``)."""
    return "click-" + ("-".join(re.findall(r"[a-z0-9]+", value.lower())) or "x")


class ShopSession:
    """One episode of a task in the web shop: the env, its last step info and the events so far."""

    def __init__(self, task: Task, replay: Sequence[str] | None = None) -> None:
        self.task = task
        self.env = WebShopEnv(size=task.size)
        self.replay = list(replay) if replay is not None else None
        self.reset()

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
        self.events.append({"action": action, "reward": reward, "new_subgoals": list(info["new_subgoals"]),
                            "error": info["error"]})  # fmt: skip
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
        ctx: dict[str, Any] = {
            "page": state.page,
            "instruction": state.order.instruction(),
            "cart": [products[p].pid for p, _ in state.cart],
            "feedback": self.info["error"],
            "ids": {v: element_id(v) for v in state.clickables()},
            "steps": self.info["steps"],
            "total_reward": self.total_reward,
            "done_subgoals": len(self.info["subgoals_completed"]),
            "num_subgoals": self.info["num_subgoals"],
            "remaining": self.info["remaining_distance"],
            "over": self.over,
            "reason": self.info["termination_reason"],
            "replay_left": None if self.replay is None else len(self.replay) - self.replay_pos,
        }
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


def create_app(task: Task, replay: Sequence[str] | None = None) -> FastAPI:
    """The FastAPI app of one task's shop (``replay``: a recorded episode's actions, for ``/replay/next``)."""
    template = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined).from_string(PAGE)
    session = ShopSession(task, replay)
    app = FastAPI(title="milepost shop", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.session = session

    def back() -> RedirectResponse:
        return RedirectResponse("/", status_code=303)

    async def field(request: Request, name: str) -> str:
        # The forms are urlencoded; parsed here so the page needs no python-multipart.
        body = (await request.body()).decode("utf-8", errors="replace")
        values = urllib.parse.parse_qs(body, keep_blank_values=True).get(name, [""])
        return values[0]

    @app.get("/", response_class=HTMLResponse)
    def page() -> str:
        ctx = session.context()
        for key in ("query", "page_no", "total", "has_prev", "has_next", "results", "product", "options", "tab",
                    "tab_lines"):  # fmt: skip
            ctx.setdefault(key, None)
        return template.render(**ctx)

    @app.post("/act")
    async def act(request: Request) -> RedirectResponse:
        session.act(await field(request, "action"))
        return back()

    @app.post("/search")
    async def search(request: Request) -> RedirectResponse:
        session.act(f"search[{await field(request, 'query')}]")
        return back()

    @app.post("/reset")
    def reset() -> RedirectResponse:
        session.reset()
        return back()

    @app.post("/replay/next")
    def replay_next() -> RedirectResponse:
        session.replay_next()
        return back()

    @app.get("/state.json")
    def state() -> JSONResponse:
        return JSONResponse(session.snapshot())

    return app
