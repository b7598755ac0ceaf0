"""The paper's advantage as a verl advantage estimator, ``algorithm.adv_estimator=milepost``.

verl calls a registered estimator with ``token_level_rewards`` and ``response_mask`` ``(B, L)``, ``index`` (the
prompt uid of each row: rows of one task share it) and ``config`` (the ``algorithm`` section), and expects
``(advantages, returns)``, both ``(B, L)``. The rewards carry the per-turn layout of
:mod:`milepost.integrations.verl.turns`, which :class:`~milepost.integrations.verl.agent_loop.MilepostAgentLoop`
writes. Settings: ``algorithm.gamma`` (the paper's 0.995; verl's default is 1.0) and, optionally,
``+algorithm.milepost.alpha`` (0.2), ``.normalisation`` (batch | group | none) and ``.std_floor`` (0).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from verl.trainer.ppo.core_algos import register_adv_est

from milepost.integrations.verl.turns import token_advantages

ESTIMATOR = "milepost"


def _setting(config: Any, key: str, default: Any) -> Any:
    if config is None:
        return default
    value = config.get(key, default) if isinstance(config, Mapping) or hasattr(config, "get") else default
    return default if value is None else value


@register_adv_est(ESTIMATOR)
def compute_milepost_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray | None = None,
    config: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A_t = r_hat(G)_t + alpha * r_hat(r_step)_t over every turn of the batch, on each turn's model tokens.

    Returns:
        ``(advantages, returns)``, both ``(B, L)``; the returns are the advantages (no critic, as verl's GRPO).
    """
    options = _setting(config, "milepost", {}) or {}
    normalisation = str(_setting(options, "normalisation", "batch"))
    groups = None
    if normalisation == "group":
        if index is None:
            raise ValueError("milepost.normalisation group: verl passed no uid index")
        uids = [str(u) for u in np.asarray(index, dtype=object).tolist()]
        order = sorted(set(uids))
        groups = [order.index(u) for u in uids]
    adv = token_advantages(
        token_level_rewards.detach().float().cpu(),
        response_mask.detach().cpu(),
        gamma=float(_setting(config, "gamma", 0.995)),
        alpha=float(_setting(options, "alpha", 0.2)),
        normalisation=normalisation,
        groups=groups,
        std_floor=float(_setting(options, "std_floor", 0.0)),
    ).to(token_level_rewards.device)
    return adv, adv
