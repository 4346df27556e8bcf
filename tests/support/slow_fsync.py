"""A Flotilla broker whose segment-data fsyncs are slow, so a test can see what the broker answers
while one runs. The broker has no such switch: this module starts `flotilla` in its own process
after replacing broker.log.durable.fsync_data (and every module's imported copy of it) with one
that sleeps first and keeps a flag file in a directory for as long as it runs.

    python -m tests.support.slow_fsync <flag dir> <seconds> broker --override ...
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from pathlib import Path

from flotilla.testenv.brokers.broker_process import REPO_ROOT, FlotillaBroker


class SlowFsyncBroker(FlotillaBroker):
    """`flotilla broker` under this module: every segment fsync takes `seconds`, with a file in
    `flags` while it runs."""

    def __init__(self, workdir: Path, *, flags: Path, seconds: float, **kw: object) -> None:
        super().__init__(workdir, **kw)  # type: ignore[arg-type]
        self.flags, self.seconds = flags, seconds

    def command(self) -> list[str]:
        broker_args = super().command()[1:]  # after the `flotilla` executable
        return [sys.executable, "-m", "tests.support.slow_fsync", str(self.flags), str(self.seconds), *broker_args]

    def env(self) -> dict[str, str]:
        env = super().env()
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
        return env


def slow_down_fsync(flags: Path, seconds: float) -> None:
    import broker.log.segment  # noqa: F401 - loaded so that its imported copy is replaced too
    from broker.log import durable

    real = durable.fsync_data

    def slow_fsync_data(fd: int) -> None:
        flag = flags / f"fsync-in-progress-{uuid.uuid4().hex}"
        flag.touch()
        try:
            time.sleep(seconds)
            real(fd)
        finally:
            flag.unlink()

    for module in list(sys.modules.values()):
        if getattr(module, "fsync_data", None) is real:
            module.fsync_data = slow_fsync_data


def main(argv: list[str]) -> int:
    flags, seconds, *flotilla_args = argv
    slow_down_fsync(Path(flags), float(seconds))
    from flotilla.cli import main as flotilla_main

    return flotilla_main(flotilla_args)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
