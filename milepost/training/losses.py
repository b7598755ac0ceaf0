"""Policy-gradient losses with the paper's importance weights (seed paper appendix C.3, Table 3).

For turn t with response y_t of |y_t| tokens, behaviour log-probs log mu and current log-probs log pi:

    rho_seq,t = prod_i pi(y_t,i | .) / mu(y_t,i | .)          rho_geo,t = rho_seq,t ^ (1 / |y_t|)
    w_t = 1[C_low <= rho_geo,t <= C_high] * min(rho_seq,t, C)         (Seq-TIS + Geo-MIS; no gradient)
    loss = - mean_t  w_t * A_t * sum_i log pi(y_t,i | x_t, y_t,<i)

Paper values: C = 3, C_low = 0.995, C_high = 1.01.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class ISConfig:
    """Importance-weight settings; each part can be switched off for ablations."""

    cap: float = 3.0
    """C: truncation of the sequence ratio (Seq-TIS)"""
    low: float = 0.995
    """C_low: turns whose geometric-mean ratio falls below are masked (Geo-MIS)"""
    high: float = 1.01
    """C_high: turns whose geometric-mean ratio rises above are masked"""
    truncate: bool = True
    mask: bool = True

    def __post_init__(self) -> None:
        if self.cap <= 0:
            raise ValueError(f"is.cap (C) must be > 0, got {self.cap}")
        if not 0 < self.low <= 1.0 <= self.high:
            raise ValueError(f"is.low / is.high must satisfy 0 < C_low <= 1 <= C_high, got {self.low}, {self.high}")


def log_ratios(
    logp_new: torch.Tensor, logp_old: torch.Tensor, token_mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-turn ``(log rho_seq, log rho_geo)``, shape ``(B,)`` each, without gradient.

    Args:
        logp_new: ``(B, L)`` log pi_theta of each response token.
        logp_old: ``(B, L)`` behaviour log-probs log mu.
        token_mask: ``(B, L)`` 1 on response tokens, 0 on padding.
    """
    mask = token_mask.float()
    with torch.no_grad():
        log_seq = ((logp_new.detach() - logp_old) * mask).sum(-1)  # (B,)
        return log_seq, log_seq / mask.sum(-1).clamp(min=1.0)


def importance_weights(
    logp_new: torch.Tensor, logp_old: torch.Tensor, token_mask: torch.Tensor, cfg: ISConfig
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-turn weights w_t and the Geo-MIS keep mask.

    Args:
        logp_new: ``(B, L)`` log pi_theta of each response token.
        logp_old: ``(B, L)`` behaviour log-probs log mu.
        token_mask: ``(B, L)`` 1 on response tokens, 0 on padding.
        cfg: thresholds and switches.

    Returns:
        ``(weights (B,), kept (B,) bool)``; weights are detached.
    """
    log_ratio, log_geo = log_ratios(logp_new, logp_old, token_mask)  # (B,) each
    with torch.no_grad():
        kept = torch.ones_like(log_ratio, dtype=torch.bool)
        if cfg.mask:
            kept = (log_geo >= math.log(cfg.low)) & (log_geo <= math.log(cfg.high))
        capped = torch.clamp(log_ratio, max=math.log(cfg.cap)) if cfg.truncate else log_ratio
        weights = torch.exp(capped) * kept.float()
    return weights, kept


def reinforce_loss(
    logp_new: torch.Tensor, token_mask: torch.Tensor, advantages: torch.Tensor, weights: torch.Tensor
) -> torch.Tensor:
    """- mean_t w_t * A_t * sum_i log pi(y_t,i): the REINFORCE surrogate over a minibatch of turns.

    Args:
        logp_new: ``(B, L)`` log pi_theta per response token (with gradient).
        token_mask: ``(B, L)`` response-token mask.
        advantages: ``(B,)`` A_t.
        weights: ``(B,)`` importance weights w_t (constants).
    """
    seq_logp = (logp_new * token_mask.float()).sum(-1)  # (B,)
    return -(weights.detach() * advantages.detach() * seq_logp).mean()


def sft_loss(logp: torch.Tensor, token_mask: torch.Tensor) -> torch.Tensor:
    """Mean negative log-likelihood per response token (prompt tokens are masked out)."""
    mask = token_mask.float()
    return -(logp * mask).sum() / mask.sum().clamp(min=1.0)


def mse_policy_loss(
    logp_new: torch.Tensor, logp_ref: torch.Tensor, token_mask: torch.Tensor, advantages: torch.Tensor, beta: float
) -> torch.Tensor:
    """MSE policy regression (MiRA, after WebRL): mean_t (beta * log(pi_theta(y_t) / pi_ref(y_t)) - A_t)^2.

    The sequence log-ratio sums over the response tokens. At pi_theta = pi_ref its gradient is
    -2 beta A_t grad log pi_theta, a REINFORCE step; it stops pushing once the log-ratio has moved by A_t / beta,
    which bounds how far one phase can take the policy from the reference.

    Args:
        logp_new: ``(B, L)`` log pi_theta per response token (with gradient).
        logp_ref: ``(B, L)`` log pi_ref per response token (the previous phase's policy; constants).
        token_mask: ``(B, L)`` response-token mask.
        advantages: ``(B,)`` A_t.
        beta: scale of the log-ratio (> 0).
    """
    mask = token_mask.float()
    log_ratio = ((logp_new - logp_ref.detach()) * mask).sum(-1)  # (B,)
    return ((beta * log_ratio - advantages.detach()) ** 2).mean()


def kl_penalty(logp_new: torch.Tensor, logp_ref: torch.Tensor, token_mask: torch.Tensor) -> torch.Tensor:
    """Mean per-token k3 estimate of KL(pi_theta || pi_ref) on sampled tokens: exp(d) - d - 1, d = log ref - log new.

    Non-negative for every sample, unbiased for the KL when the tokens come from pi_theta (Schulman, 2020).
    """
    mask = token_mask.float()
    d = logp_ref.detach() - logp_new
    per_token = torch.exp(d) - d - 1.0
    return (per_token * mask).sum() / mask.sum().clamp(min=1.0)
