"""wait_for and wait_for_async: a timeout names what was last seen, exceptions included, and a
check that raises now and then is retried rather than ending the wait."""

from __future__ import annotations

import asyncio

import pytest

from flotilla.testenv.waiting import wait_for, wait_for_async


def test_returns_the_first_truthy_value():
    values = iter([0, [], {"ready": 2}])
    assert wait_for("a value", lambda: next(values), timeout=5, interval=0) == {"ready": 2}


def test_a_timeout_names_the_last_value_seen():
    seen = iter(range(1000))
    with pytest.raises(pytest.fail.Exception) as failed:
        wait_for("three pods", lambda: [] if next(seen) < 999 else ["pod-0"], timeout=0.05, interval=0.01)
    assert "waiting for three pods" in str(failed.value)
    assert "last: []" in str(failed.value)


def test_an_exception_is_recorded_as_the_last_observation_and_retried():
    calls = []

    def check():
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionResetError("API server went away")
        return "answered"

    assert wait_for("an answer", check, timeout=5, interval=0) == "answered"
    assert len(calls) == 3


def test_a_timeout_after_exceptions_names_the_exception_not_none():
    def check():
        raise KeyError("readyReplicas")

    with pytest.raises(pytest.fail.Exception) as failed:
        wait_for("readyReplicas", check, timeout=0.05, interval=0.01)
    message = str(failed.value)
    assert "last: KeyError: 'readyReplicas'" in message, message
    assert "None" not in message


def test_an_assertion_inside_the_check_fails_at_once():
    calls = []

    def check():
        calls.append(1)
        raise AssertionError("the roll replaced two brokers at once")

    with pytest.raises(AssertionError, match="two brokers"):
        wait_for("the roll", check, timeout=5, interval=0)
    assert len(calls) == 1


async def test_the_async_wait_keeps_the_loop_running_and_awaits_coroutine_checks():
    ticks = []

    async def ticker():
        while True:
            ticks.append(1)
            await asyncio.sleep(0.01)

    task = asyncio.create_task(ticker())
    try:
        async def check():
            return len(ticks) >= 5 and len(ticks)

        assert await wait_for_async("five ticks", check, timeout=5, interval=0.01) >= 5
    finally:
        task.cancel()


async def test_the_async_wait_reports_the_last_exception():
    async def check():
        raise TimeoutError("kubectl get took too long")

    with pytest.raises(pytest.fail.Exception, match="last: TimeoutError: kubectl get took too long"):
        await wait_for_async("the status", check, timeout=0.05, interval=0.01)


def test_until_returns_the_state_and_a_timeout_shows_it():
    states = iter(["Pending", "Running"])
    assert wait_for("Running", lambda: next(states), until=lambda s: s == "Running", timeout=5, interval=0) == "Running"
    with pytest.raises(pytest.fail.Exception, match="last: \\{'readyReplicas': 1\\}"):
        wait_for("2 ready", lambda: {"readyReplicas": 1}, until=lambda st: st.get("readyReplicas") == 2,
                 timeout=0.05, interval=0.01)


async def test_until_in_the_async_wait():
    async def check():
        return 0

    assert await wait_for_async("zero", check, until=lambda v: v == 0, timeout=1) == 0
