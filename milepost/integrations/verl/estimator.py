"""The arithmetic of the ``milepost`` verl advantage estimator, importable without verl.

verl calls a registered estimator with ``token_level_rewards`` and ``response_mask`` ``(B, L)``, ``index`` (the
prompt uid of each row: rows of one task share it) and ``config`` (the ``algorithm`` section), and expects
``(advantages, returns)``, both ``(B, L)``. :func:`milepost_advantage` is that computation in plain torch; the
registration with verl (:mod:`milepost.integrations.verl.advantage`) only calls it, so the default test suite
checks it whether or not verl is installed. Settings read from the config: ``gamma`` (the paper's 0.995 when
absent; verl's own default is 1.0) and, under ``milepost``, ``alpha`` (0.2), ``normalisation`` (batch | group |
none) and ``std_floor`` (0.1, as ``rl.std_floor``). A setting given as None (an OmegaConf null) takes its default.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from milepost.integrations.verl.turns import token_advantages

GAMMA, ALPHA, NORMALISATION, STD_FLOOR = 0.995, 0.2, "batch", 0.1  # rl.std_floor's default (issue 59 item 14)
"""The defaults of the settings: the paper's gamma and alpha, batch normalisation, no floor on the std."""


def setting(config: Any, key: str, default: Any) -> Any:
    """``config[key]`` of a dict or an OmegaConf ``DictConfig`` (anything with ``get``); ``default`` when the
    config is None, has no ``get``, lacks the key or holds None there."""
    if config is None:
        return default
    value = config.get(key, default) if isinstance(config, Mapping) or hasattr(config, "get") else default
    return default if value is None else value


def uid_groups(index: Any) -> list[int]:
    """Each row's group number: rows with the same uid share one, numbered by the uids' sorted order."""
    uids = [str(u) for u in np.asarray(index, dtype=object).tolist()]
    order = sorted(set(uids))
    return [order.index(u) for u in uids]


def milepost_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any = None,
    config: Any = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A_t = r_hat(G)_t + alpha * r_hat(r_step)_t over every turn of the batch, on each turn's model tokens.

    Returns:
        ``(advantages, returns)``, both ``(B, L)`` on the rewards' device; the returns are the advantages (no
        critic, as verl's GRPO).

    Raises:
        ValueError: group normalisation without an ``index``, or rewards and mask of different shapes.
    """
    options = setting(config, "milepost", {}) or {}
    normalisation = str(setting(options, "normalisation", NORMALISATION))
    groups = None
    if normalisation == "group":
        if index is None:
            raise ValueError("milepost.normalisation group: verl passed no uid index")
        groups = uid_groups(index)
    adv = token_advantages(
        token_level_rewards.detach().float().cpu(),
        response_mask.detach().cpu(),
        gamma=float(setting(config, "gamma", GAMMA)),
        alpha=float(setting(options, "alpha", ALPHA)),
        normalisation=normalisation,
        groups=groups,
        std_floor=float(setting(options, "std_floor", STD_FLOOR)),
    ).to(token_level_rewards.device)
    return adv, adv
