"""One object per event loop: the state a relay process keeps for the loop it runs in."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class PerLoop(Generic[T]):
    """One object per event loop, made at first use in it (a daphne process has one loop; a
    test gets a fresh one each time), and gone with its loop."""

    def __init__(self, make: Callable[[], T]) -> None:
        self._make = make
        self._made: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, T] = (
            weakref.WeakKeyDictionary()
        )
        self._last: tuple[weakref.ref, T] | None = None
        """The loop last asked for and its object: a process asks from one loop."""

    def get(self) -> T:
        current = self.peek()
        if current is None:
            loop = asyncio.get_running_loop()
            current = self._made[loop] = self._make()
            self._last = (weakref.ref(loop), current)
        return current

    def peek(self) -> T | None:
        """The running loop's object if it was made, else None."""
        loop = asyncio.get_running_loop()
        last = self._last
        if last is not None and last[0]() is loop:
            return last[1]
        current = self._made.get(loop)
        if current is not None:
            self._last = (weakref.ref(loop), current)
        return current
