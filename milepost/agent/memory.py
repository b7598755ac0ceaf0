"""Sliding-window memory m_t: the last K turns (observation, REASON, ACTION), never the think block."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class MemoryItem:
    observation: str
    reason: str
    action: str
    feedback: str | None = None  # why the environment rejected the answer, if it did


class SlidingWindowMemory:
    """Keeps the most recent ``k`` turns; ``k = 0`` keeps none (a memoryless agent)."""

    def __init__(self, k: int = 2) -> None:
        if k < 0:
            raise ValueError(f"memory size K must be >= 0, got {k}")
        self.k = k
        self._items: deque[MemoryItem] = deque(maxlen=k) if k else deque(maxlen=0)

    def add(self, item: MemoryItem) -> None:
        if self.k:
            self._items.append(item)

    def items(self) -> list[MemoryItem]:
        return list(self._items)

    def __len__(self) -> int:
        return len(self._items)
