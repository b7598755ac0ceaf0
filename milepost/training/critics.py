"""MiRA's critics: a potential critic P(s, g) and a goal-conditioned value critic V(s, g).

A state is the prompt the policy answered in (its exact token ids): it holds the goal g, the observation and
whatever memory the agent shows, so one input serves both critics. Both output a number in [0, 1]:

- P(s, g): progress, regressed with MSE onto the progress labels (``milepost.rewards.shaping``);
- V(s, g): the probability that the episode succeeds from s, trained with binary cross-entropy on the outcome.

Two encoders (``mira.critic``):

- ``trunk``: a small MLP head on the policy's last hidden state at the prompt's final token. The features are
  computed without gradient, so only the policy loss moves the trunk; cheap, and the head sees what the
  policy sees.
- ``separate``: a small sequence-classification transformer of its own (``transformers``'
  ``AutoModelForSequenceClassification`` over a tiny config with the policy's vocabulary), trained end to end.

Each critic has its own optimizer and learning rate and learns from a bounded replay buffer of recent states,
so one batch does not make it forget the previous ones.
"""

from __future__ import annotations

import math
import random
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from milepost.backends.logprobs import text_decoder
from milepost.backends.tiny import tiny_config


def _pad_batch(prompts: list[list[int]], pad_id: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, : len(p)] = torch.tensor(p, dtype=torch.long)
        mask[i, : len(p)] = 1
    return ids.to(device), mask.to(device)


@torch.no_grad()
def trunk_features(model: Any, prompts: list[list[int]], pad_id: int, batch_size: int = 16) -> torch.Tensor:
    """The policy's last-layer hidden state at each prompt's final token, ``(N, H)``, without gradient.

    Only the decoder trunk runs (transformers' ``PreTrainedModel.get_decoder``; under a PEFT wrapper, its base
    model's): its ``last_hidden_state`` is the final-norm output that ``hidden_states[-1]`` of the full model
    holds. Calling the full model instead makes the output head turn every prompt position into
    full-vocabulary logits and keeps every layer's hidden states: at SmolLM2's 49,152-token vocabulary, 64
    prompts of ~600 tokens are 7.5 GB of fp32 logits, and a MiRA run on 2-item web-shop orders was killed for
    memory at 12.5 GB. A model without ``get_decoder`` falls back to the full forward.
    """
    device = next(model.parameters()).device
    decoder = text_decoder(model)
    was_training = model.training
    model.eval()
    out = []
    for i in range(0, len(prompts), batch_size):
        chunk = prompts[i : i + batch_size]
        ids, mask = _pad_batch(chunk, pad_id, device)
        if decoder is not None:
            hidden = decoder(input_ids=ids, attention_mask=mask).last_hidden_state
        else:
            hidden = model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states[-1]
        last = mask.sum(-1) - 1  # (B,) right padding: index of the final real token
        out.append(hidden[torch.arange(len(chunk), device=device), last].float().cpu())
    model.train(was_training)
    return torch.cat(out) if out else torch.zeros(0, model.config.hidden_size)


class TrunkHead(nn.Module):
    """Two-layer MLP from trunk features to one logit."""

    def __init__(self, hidden: int, width: int = 64) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.LayerNorm(hidden), nn.Linear(hidden, width), nn.Tanh(), nn.Linear(width, 1))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.net(features).squeeze(-1)


class SeparateEncoder(nn.Module):
    """A tiny transformer with a scalar head reading the final non-pad token (``transformers`` pooling)."""

    def __init__(self, vocab_size: int, pad_id: int, eos_id: int, size: str, seed: int) -> None:
        super().__init__()
        from transformers import AutoModelForSequenceClassification

        config = tiny_config("qwen3", size, vocab_size, pad_id, eos_id)
        config.num_labels = 1
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.model = AutoModelForSequenceClassification.from_config(config)
        self.pad_id = pad_id

    def forward(self, prompts: list[list[int]]) -> torch.Tensor:
        device = next(self.parameters()).device
        ids, mask = _pad_batch(prompts, self.pad_id, device)
        return self.model(input_ids=ids, attention_mask=mask).logits.squeeze(-1).float()


@dataclass
class CriticSample:
    """One state in the replay buffer: its prompt, trunk features (trunk critics) and targets."""

    prompt: list[int]
    features: torch.Tensor | None
    progress: float
    outcome: float


class Critic:
    """One scalar critic in [0, 1] (``loss`` mse: potential; bce: value) with its own optimizer."""

    def __init__(
        self,
        kind: str,
        loss: str,
        *,
        hidden: int,
        vocab_size: int,
        pad_id: int,
        eos_id: int,
        size: str,
        lr: float,
        seed: int,
    ) -> None:
        if kind not in ("trunk", "separate"):
            raise ValueError(f"mira.critic: {kind!r} is not one of trunk, separate")
        if loss not in ("mse", "bce"):
            raise ValueError(f"critic loss {loss!r} is not one of mse, bce")
        self.kind, self.loss = kind, loss
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.net: nn.Module = (
                TrunkHead(hidden) if kind == "trunk" else SeparateEncoder(vocab_size, pad_id, eos_id, size, seed)
            )
        self.optimizer = torch.optim.AdamW(self.net.parameters(), lr=lr, weight_decay=0.0)

    def logits(self, samples: list[CriticSample]) -> torch.Tensor:
        if self.kind == "trunk":
            feats = torch.stack([s.features for s in samples if s.features is not None])
            return self.net(feats)
        return self.net([s.prompt for s in samples])

    @torch.no_grad()
    def predict(self, samples: list[CriticSample], batch_size: int = 64) -> torch.Tensor:
        """Predictions in [0, 1], ``(N,)``."""
        self.net.eval()
        outs = [torch.sigmoid(self.logits(samples[i : i + batch_size])) for i in range(0, len(samples), batch_size)]
        return torch.cat(outs) if outs else torch.zeros(0)

    def step(self, samples: list[CriticSample]) -> float:
        """One optimizer step on ``samples``; returns the loss."""
        self.net.train()
        logits = self.logits(samples)
        if self.loss == "mse":
            target = torch.tensor([s.progress for s in samples])
            loss = nn.functional.mse_loss(torch.sigmoid(logits), target)
        else:
            target = torch.tensor([s.outcome for s in samples])
            loss = nn.functional.binary_cross_entropy_with_logits(logits, target)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.net.parameters(), 1.0)
        self.optimizer.step()
        return loss.item()

    def state_dict(self) -> dict[str, Any]:
        return {"net": self.net.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.net.load_state_dict(state["net"])
        self.optimizer.load_state_dict(state["optimizer"])


class ReplayBuffer:
    """The most recent ``capacity`` critic samples."""

    def __init__(self, capacity: int) -> None:
        self.items: deque[CriticSample] = deque(maxlen=capacity)

    def add(self, samples: list[CriticSample]) -> None:
        self.items.extend(samples)

    def __len__(self) -> int:
        return len(self.items)

    def batches(self, batch_size: int, epochs: float, rng: random.Random) -> list[list[CriticSample]]:
        """Shuffled minibatches covering the buffer ``epochs`` times (a fraction covers part of it)."""
        items = list(self.items)
        n = round(len(items) * epochs)
        order: list[int] = []
        while len(order) < n:
            perm = list(range(len(items)))
            rng.shuffle(perm)
            order += perm
        order = order[:n]
        return [[items[i] for i in order[j : j + batch_size]] for j in range(0, n, batch_size)]

    def state_dict(self) -> list[dict[str, Any]]:
        # Plain dicts, not the dataclass: a checkpoint holds only tensors and JSON values (nothing to unpickle).
        return [vars(sample).copy() for sample in self.items]

    def load_state_dict(self, items: list[dict[str, Any]]) -> None:
        self.items.clear()
        self.items.extend(CriticSample(**item) for item in items)


def auroc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """Area under the ROC curve: P(score of a positive > score of a negative), ties counting half.

    Written here (Mann-Whitney U on average ranks) because it is ten lines and the project does not otherwise
    need scipy or scikit-learn. NaN when one class is absent.
    """
    pos = labels.bool()
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    order = torch.argsort(scores.double(), stable=True)
    sorted_scores = scores.double()[order]
    ranks = torch.empty(len(scores), dtype=torch.float64)
    i = 0
    while i < len(scores):  # average ranks over ties
        j = i
        while j + 1 < len(scores) and sorted_scores[j + 1] == sorted_scores[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    u = float(ranks[pos].sum()) - n_pos * (n_pos + 1) / 2.0
    return u / (n_pos * n_neg)


def kendall_tau_b(x: torch.Tensor | Any, y: torch.Tensor | Any, block: int = 1024) -> float:
    """Kendall's tau-b (ties corrected) between two equally long vectors; NaN if either is constant.

    All pairs, in row blocks so memory stays O(block * n) (the credit audit scores thousands of turns);
    equal infinities count as a tie. Hand-written for the same reason as :func:`auroc`.
    """
    xs = np.asarray(x.double() if isinstance(x, torch.Tensor) else x, dtype=np.float64)
    ys = np.asarray(y.double() if isinstance(y, torch.Tensor) else y, dtype=np.float64)
    n = len(xs)
    s = tx = ty = 0.0
    for lo in range(0, n, block):
        hi = min(n, lo + block)
        with np.errstate(invalid="ignore"):  # inf - inf is nan: a tie (sign 0)
            dx = np.nan_to_num(np.sign(xs[lo:hi, None] - xs[None, :]), nan=0.0)  # (b, n)
            dy = np.nan_to_num(np.sign(ys[lo:hi, None] - ys[None, :]), nan=0.0)
        upper = np.arange(lo, hi)[:, None] < np.arange(n)[None, :]
        s += float((dx * dy)[upper].sum())
        tx += float((dx != 0)[upper].sum())
        ty += float((dy != 0)[upper].sum())
    if tx == 0 or ty == 0:
        return float("nan")
    return s / math.sqrt(tx * ty)
