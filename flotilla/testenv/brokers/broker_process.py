"""Run a Kafka-protocol broker as a child process, for end-to-end tests and the benchmarks alike.

`ServerProcess` holds everything that does not depend on which broker runs: free loopback ports,
a data directory, a log file that collects stdout and stderr across restarts, a bounded readiness
wait (the listener answers a Metadata request that names at least one broker, and the HTTP
metrics endpoint answers when there is one), SIGTERM stop, kill -9, restart on the same ports
and data. `FlotillaBroker` runs `flotilla broker`; `apache_kafka.ApacheKafka` runs Apache Kafka
from Maven Central jars, so the same tests can be checked against it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from flotilla.testenv.ports import free_port  # noqa: F401  (re-exported: one port source for every test process)

REPO_ROOT = Path(__file__).resolve().parents[3]
START_TIMEOUT = float(os.environ.get("FLOTILLA_TEST_START_TIMEOUT", "60"))
# A graceful stop may wait up to the broker's controlled-shutdown bound (30 s by default:
# server/controlled_shutdown.py) for its leaderships to move, then close: the harness must wait
# longer than that, or a hand-over that times out (a controller change under way) reads as a hang.
STOP_TIMEOUT = 60.0


class BrokerStartError(RuntimeError):
    """The broker did not become ready; the message carries the tail of its log."""


def tail(path: Path, lines: int = 60) -> str:
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return "(no log file)"
    return "\n".join(text.splitlines()[-lines:])


class ServerProcess:
    """A broker child process with fixed ports and data directory, restartable."""

    #: which implementation this is: "flotilla" or "apache"
    kind = "?"
    #: whether the process serves Prometheus metrics over HTTP
    metrics_url: str | None = None
    #: exit codes that mean "stopped cleanly on SIGTERM"
    clean_exit_codes: frozenset[int] = frozenset({0})

    def __init__(
        self,
        workdir: Path,
        *,
        port: int | None = None,
        advertised_port: int | None = None,
        overrides: dict[str, str] | None = None,
        start_timeout: float = START_TIMEOUT,
    ) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.data_dir = self.workdir / "data"
        self.data_dir.mkdir(exist_ok=True)
        self.log_path = self.workdir / "broker.log"
        self.host = "127.0.0.1"
        self.port = port or free_port()
        # Clients connect where metadata says; a test proxy may stand in front of the listener.
        self.advertised_port = advertised_port or self.port
        self.overrides = dict(overrides or {})
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        # Put before the command line (a partition test's nemesis runs it in a cgroup of its own).
        self.launch_prefix: list[str] = []
        self.extra_env: dict[str, str] = {}  # added to the process's environment

    # -- what subclasses provide -------------------------------------------------------------

    def command(self) -> list[str]:
        raise NotImplementedError

    def prepare(self) -> None:
        """Called before each start (write config files, format storage, ...)."""

    # -- public surface -------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_dirs(self) -> Path:
        """The directory holding `<topic>-<partition>/` folders (Kafka's `log.dirs`)."""
        return self.data_dir

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> "ServerProcess":
        self.launch()
        try:
            self.wait_ready()
        except BaseException:
            self.kill9()
            raise
        return self

    def launch(self) -> "ServerProcess":
        """Start the process without waiting for it to answer (a fleet launches every broker,
        then waits for each: their start-ups overlap)."""
        if self.is_running():
            raise RuntimeError("broker already running")
        self.prepare()
        cmd = self.launch_prefix + self.command()
        with open(self.log_path, "ab") as log:
            log.write(f"\n==== start #{self.starts + 1}: {' '.join(cmd)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.workdir,
                env=self.env(),
                start_new_session=True,
            )
        self.starts += 1
        return self

    def env(self) -> dict[str, str]:
        return {**os.environ, **self.extra_env}

    def wait_ready(self, timeout: float | None = None) -> None:
        from flotilla.testenv import kafka_wire

        deadline = time.monotonic() + (timeout or self.start_timeout)
        last_error: object = "never tried"
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise BrokerStartError(
                    f"{self.kind} broker exited with code {self.proc.returncode} during start-up;"
                    f" log tail ({self.log_path}):\n{tail(self.log_path)}"
                )
            try:
                with kafka_wire.connect(self.bootstrap, timeout=2.0) as conn:
                    brokers = conn.metadata(topics=[]).brokers
                if not brokers:
                    raise RuntimeError("metadata lists no brokers yet")
                if self.metrics_url:
                    with urllib.request.urlopen(self.metrics_url, timeout=2.0) as resp:
                        if resp.status != 200:
                            raise RuntimeError(f"metrics answered HTTP {resp.status}")
                return
            except Exception as e:  # not up yet, or answering garbage: keep trying until the deadline
                last_error = e
                time.sleep(0.2)
        raise BrokerStartError(
            f"{self.kind} broker at {self.bootstrap} not ready after"
            f" {timeout or self.start_timeout:.0f}s (last error: {last_error!r});"
            f" log tail ({self.log_path}):\n{tail(self.log_path)}"
        )

    def stop(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """SIGTERM and wait for a graceful exit; kill -9 if it takes longer than `timeout`.

        Returns the exit code (None if it was not running). Raises if SIGTERM was not enough.
        """
        if self.proc is None:
            return None
        proc, self.proc = self.proc, None
        if proc.poll() is not None:
            return proc.returncode
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._kill_group(proc)
            proc.wait(10)
            raise RuntimeError(
                f"{self.kind} broker did not exit within {timeout}s of SIGTERM;"
                f" log tail:\n{tail(self.log_path)}"
            ) from None

    def kill9(self) -> None:
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            self._kill_group(proc)
            proc.wait(10)

    @staticmethod
    def _kill_group(proc: subprocess.Popen[bytes]) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def restart(self) -> "ServerProcess":
        self.stop()
        return self.start()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, lines: int = 60) -> str:
        return tail(self.log_path, lines)

    def close(self) -> None:
        """Stop for good (used by fixtures); never raises for a process already gone."""
        try:
            self.stop()
        except Exception:
            self.kill9()

    def __enter__(self) -> "ServerProcess":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.bootstrap} data={self.data_dir}>"


def flotilla_executable() -> str:
    venv = REPO_ROOT / ".venv" / "bin" / "flotilla"
    if venv.exists():
        return str(venv)
    found = shutil.which("flotilla")
    if found:
        return found
    return ""


class FlotillaBroker(ServerProcess):
    """`flotilla broker --override key=value ...` on free loopback ports."""

    kind = "flotilla"

    def __init__(self, workdir: Path, *, metrics_port: int | None = None, **kw: object) -> None:
        super().__init__(workdir, **kw)  # type: ignore[arg-type]
        self.metrics_port = metrics_port or free_port()
        self.metrics_url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        self.healthz_url = f"http://127.0.0.1:{self.metrics_port}/healthz"

    def settings(self) -> dict[str, str]:
        s = {
            "node.id": "1",
            "listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.advertised_port}",
            "log.dirs": str(self.data_dir),
            "num.partitions": "1",
            "auto.create.topics.enable": "true",
            "flotilla.metrics.listener": f"127.0.0.1:{self.metrics_port}",
        }
        s.update(self.overrides)
        return s

    def command(self) -> list[str]:
        exe = flotilla_executable()
        base = [exe] if exe else [sys.executable, "-m", "flotilla.cli"]
        cmd = base + ["broker"]
        for key, value in self.settings().items():
            cmd += ["--override", f"{key}={value}"]
        return cmd

    def env(self) -> dict[str, str]:
        env = super().env()
        env["PYTHONUNBUFFERED"] = "1"
        return env
