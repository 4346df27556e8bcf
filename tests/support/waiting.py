"""Bounded polling for end-to-end tests: wait for a condition, fail naming what never happened."""

from __future__ import annotations

import time
from typing import Any, Callable

import pytest


def wait_for(what: str, check: Callable[[], Any], timeout: float = 90.0, interval: float = 0.5) -> Any:
    """Poll check() until it returns something truthy; fail naming `what` and the last value."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}")
