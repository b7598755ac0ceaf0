"""The paper's advantage as a verl advantage estimator, ``algorithm.adv_estimator=milepost``.

verl calls a registered estimator with ``token_level_rewards`` and ``response_mask`` ``(B, L)``, ``index`` (the
prompt uid of each row: rows of one task share it) and ``config`` (the ``algorithm`` section), and expects
``(advantages, returns)``, both ``(B, L)``. The rewards carry the per-turn layout of
:mod:`milepost.integrations.verl.turns`, which :class:`~milepost.integrations.verl.agent_loop.MilepostAgentLoop`
writes. Settings: ``algorithm.gamma`` (the paper's 0.995; verl's default is 1.0) and, optionally,
``+algorithm.milepost.alpha`` (0.2), ``.normalisation`` (batch | group | none) and ``.std_floor`` (0.1, as
``rl.std_floor``).

This module only registers the estimator with verl; the arithmetic is
:func:`milepost.integrations.verl.estimator.milepost_advantage`, which imports without verl.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from verl.trainer.ppo.core_algos import register_adv_est

from milepost.integrations.verl.estimator import milepost_advantage

ESTIMATOR = "milepost"


@register_adv_est(ESTIMATOR)
def compute_milepost_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray | None = None,
    config: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """verl's entry point: :func:`~milepost.integrations.verl.estimator.milepost_advantage` (verl's other
    keyword arguments, e.g. ``epsilon``, are not used)."""
    return milepost_advantage(token_level_rewards, response_mask, index=index, config=config)
