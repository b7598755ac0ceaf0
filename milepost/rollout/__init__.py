"""Rollout sources for ``milepost train``: where episodes are generated and how the generator gets the
trainer's weights (``milepost.rollout.source``; the vLLM worker extension in ``milepost.rollout.vllm_worker``)."""

from __future__ import annotations

from milepost.rollout.source import (
    DiskReload,
    Generator,
    RolloutSource,
    ServerReload,
    SharedWeights,
    WeightSync,
    make_rollout_source,
    merged_state_dict,
    special_ids,
    write_weights,
)

__all__ = [
    "DiskReload",
    "Generator",
    "RolloutSource",
    "ServerReload",
    "SharedWeights",
    "WeightSync",
    "make_rollout_source",
    "merged_state_dict",
    "special_ids",
    "write_weights",
]
