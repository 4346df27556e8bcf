"""Bounded polling for end-to-end tests: wait for a condition, fail naming what never happened.

A check that raises is an observation too (an API server that answered 500, a kubectl that timed
out, a KeyError on a status not written yet): it is recorded as the last thing seen and retried, so
a wait never ends early on a transient error, and when it times out it says what it saw last
(`last: None` only if the check itself returned None).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable

import pytest


_NOTHING = object()  # what see() answers when the check raised


class _Observations:
    """The last value (or exception) a check gave, and how many times it was asked."""

    def __init__(self) -> None:
        self.last: Any = None
        self.tries = 0

    def see(self, check: Callable[[], Any]) -> Any:
        self.tries += 1
        try:
            self.last = check()
        except (AssertionError, pytest.fail.Exception):
            raise  # a check that asserts means it, as a failing test
        except Exception as exc:  # noqa: BLE001 - recorded, reported on timeout, retried
            self.last = exc
            return _NOTHING
        return self.last

    def done(self, value: Any, until: Callable[[Any], bool] | None) -> bool:
        if value is _NOTHING:
            return False
        return bool(until(value)) if until is not None else bool(value)

    def describe(self) -> str:
        if isinstance(self.last, BaseException):
            return f"{type(self.last).__name__}: {self.last}"
        return repr(self.last)

    def fail(self, what: str, timeout: float) -> None:
        pytest.fail(f"timed out after {timeout:.0f}s ({self.tries} tries) waiting for {what}; "
                    f"last: {self.describe()}")


def wait_for(what: str, check: Callable[[], Any], timeout: float = 90.0, interval: float = 0.5,
             until: Callable[[Any], bool] | None = None) -> Any:
    """Poll check() until it returns something truthy (or, with `until`, something until() accepts:
    then check() can return the state itself, which a timeout shows), and return that; fail naming
    `what` and the last value (or exception) check() gave."""
    seen = _Observations()
    deadline = time.monotonic() + timeout
    while True:
        result = seen.see(check)
        if seen.done(result, until):
            return result
        if time.monotonic() >= deadline:
            seen.fail(what, timeout)
        time.sleep(interval)


async def wait_for_async(what: str, check: Callable[[], Any | Awaitable[Any]], timeout: float = 90.0,
                         interval: float = 0.2, until: Callable[[Any], bool] | None = None) -> Any:
    """wait_for inside a running event loop: check() may be a coroutine function, and the loop keeps
    running between tries (so the test's own tasks, e.g. Lease renewals, are not starved)."""
    seen = _Observations()
    deadline = time.monotonic() + timeout
    while True:
        result = seen.see(check)
        if asyncio.iscoroutine(result):
            try:
                result = seen.last = await result
            except AssertionError:
                raise
            except Exception as exc:  # noqa: BLE001 - as in _Observations.see
                result, seen.last = _NOTHING, exc
        if seen.done(result, until):
            return result
        if time.monotonic() >= deadline:
            seen.fail(what, timeout)
        await asyncio.sleep(interval)
