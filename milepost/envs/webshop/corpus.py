"""Shop text for fitting a tiny model's tokenizer: the pages, goals and answers of oracle episodes.

The backends' default corpus holds each environment's first page only. The shop's words (brands, product types,
attributes, option values, page labels) appear on result and product pages, and without them a title costs about
one token per character, so a result page would not fit a small context. Training on the shop therefore adds
these texts, drawn from the environment being trained on (same items per order, renderer and level).
"""

from __future__ import annotations

from collections.abc import Callable

from milepost.envs.webshop.env import WebShopEnv
from milepost.envs.webshop.moves import oracle


def corpus_texts(make: Callable[[], WebShopEnv], episodes: int = 24, seed: int = 10_000) -> list[str]:
    """Goals, every observation and the oracle's answers (``REASON: ... ACTION: ...``) of ``episodes``
    generated tasks played by the oracle, seeds from ``seed`` (apart from the usual dataset seeds)."""
    out: list[str] = []
    for i in range(episodes):
        env = make()
        obs, _ = env.reset(seed=seed + i)
        out += [env.goal_text(), obs]
        while True:
            step = oracle(env.rules)  # type: ignore[arg-type]
            if step is None:
                break
            action, reason = step
            out.append(f"REASON: {reason} ACTION: {action}")
            obs, _, terminated, truncated, _ = env.step(f"REASON: {reason} ACTION: {action}")
            out.append(obs)
            if terminated or truncated:
                break
    return out
