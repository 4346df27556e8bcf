"""The operator in-process for a test (kopf's KopfRunner), stopped when the block ends, with what
explains a stop that hangs.

KopfRunner raises a bare "The operator didn't stop, still running." when the operator's thread
outlives its timeout (CI saw it once at a teardown, on a loaded machine). That says nothing of why;
here the error carries every thread's stack at that moment and the operator's last output, so the
next run shows where it hung.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import traceback
from typing import Any, Iterator

import pytest

STOP_TIMEOUT_S = 120.0  # a clean stop takes seconds; this bounds a slow one on a busy machine
ARGS = ["run", "--all-namespaces", "--standalone", "-m", "flotilla_operator.handlers"]


def thread_stacks() -> str:
    frames = sys._current_frames()
    out = []
    for thread in threading.enumerate():
        frame = frames.get(thread.ident or -1)
        if frame is not None:
            out.append(f"--- thread {thread.name}:\n" + "".join(traceback.format_stack(frame)[-12:]))
    return "\n".join(out)


@contextlib.contextmanager
def in_process_operator(env: dict[str, str], args: list[str] | None = None) -> Iterator[Any]:
    """Run the operator with `env` set (KUBECONFIG and the operator's settings) until the block
    ends; then it must have stopped within STOP_TIMEOUT_S and raised nothing."""
    from kopf.testing import KopfRunner

    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        runner = KopfRunner(args or ARGS, timeout=STOP_TIMEOUT_S)
        try:
            with runner:
                yield runner
        except Exception as e:
            if "didn't stop" not in str(e):
                raise
            raise AssertionError(f"the operator did not stop within {STOP_TIMEOUT_S:.0f}s; threads:\n"
                                 f"{thread_stacks()}\noperator output (tail):\n{runner.output[-4000:]}") from e
    assert runner.exception is None, runner.output[-4000:]
