"""One small registry, used for environments, backends, advantage estimators and reward terms.

Classes (or factories) are registered explicitly, never as import strings, so a failed import fails loudly
where it happens instead of being swallowed at lookup time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from milepost.errors import InputError

T = TypeVar("T")


class Registry(Generic[T]):
    """A named mapping from short names to registered objects."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str, obj: T) -> T:
        """Register ``obj`` under ``name``; registering a name twice is an error."""
        if not name or not name.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"{self.kind} name {name!r} must be non-empty and alphanumeric (- and _ allowed)")
        if name in self._items:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._items[name] = obj
        return obj

    def decorator(self, name: str) -> Callable[[T], T]:
        """``@registry.decorator("name")`` form of :meth:`register`."""

        def wrap(obj: T) -> T:
            return self.register(name, obj)

        return wrap

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            known = ", ".join(sorted(self._items)) or "none"
            raise InputError(f"unknown {self.kind} {name!r} (known: {known})") from None

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._items))

    def __len__(self) -> int:
        return len(self._items)
