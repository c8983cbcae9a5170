"""A memo bounded by the memory its values hold, not by how many it holds.

``functools.lru_cache(maxsize=N)`` bounds a count: where a value's size is the input's choice
(a score table's JSON files, which an upload writes), N values can be N times the largest a
parse allows, kept for the life of the server. ``weighed`` keeps the most recently used values
whose memory, measured when each is made (``retained_bytes``), stays within a budget: a value
heavier than ``largest`` is returned but never kept, and older values are let go until a new
one fits. What is let go is computed again when next asked, so a forgotten value costs time,
never a wrong answer.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, ParamSpec, TypeVar

from .importers._zip import retained_bytes

P = ParamSpec("P")
R = TypeVar("R")


class WeighedMemo(Generic[P, R]):
    """``function`` memoised by its (hashable) arguments within ``budget`` bytes of values."""

    def __init__(self, function: Callable[P, R], budget: int, largest: int, ttl: float | None) -> None:
        if not 0 < largest <= budget:
            raise ValueError(f"largest ({largest}) must be positive and within the budget ({budget})")
        self.function, self.budget, self.largest, self.ttl = function, budget, largest, ttl
        self._values: OrderedDict[Hashable, tuple[Any, int, float]] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()
        functools.update_wrapper(self, function)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        key = (args, tuple(sorted(kwargs.items())))
        now = time.monotonic()
        with self._lock:
            kept = self._values.get(key)
            if kept is not None and (self.ttl is None or now - kept[2] < self.ttl):
                self._values.move_to_end(key)
                return kept[0]
        value = self.function(*args, **kwargs)  # outside the lock: a slow read blocks no other
        weight = retained_bytes(value, limit=self.largest)
        if weight > self.largest:
            return value
        with self._lock:
            if (old := self._values.pop(key, None)) is not None:
                self._held -= old[1]
            while self._values and self._held + weight > self.budget:
                self._held -= self._values.popitem(last=False)[1][1]
            self._values[key] = (value, weight, now)
            self._held += weight
        return value

    @property
    def held(self) -> int:
        """Bytes the kept values hold, as measured when each was made."""
        return self._held

    def __len__(self) -> int:
        return len(self._values)

    def cache_clear(self) -> None:
        with self._lock:
            self._values.clear()
            self._held = 0


def weighed(*, budget: int, largest: int, ttl: float | None = None) -> Callable[[Callable[P, R]], WeighedMemo[P, R]]:
    """Decorator: memoise a function within ``budget`` bytes of values, none over ``largest``;
    ``ttl``: seconds a value is kept at most (a file that may change under it)."""
    return lambda function: WeighedMemo(function, budget, largest, ttl)
