"""Build and run the Java interop client (tests/java/client-check, kafka-clients from Maven Central).

The jar and its dependency jars are cached under ~/.cache/flotilla/java/client-check-<hash>/, the
hash covering the pom and every source file, so a build happens once per change.
`scripts/setup.d/10-clients.sh` builds it ahead of the tests (`python -m tests.support.java_client build`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from flotilla.testenv.brokers.broker_process import REPO_ROOT

PROJECT = REPO_ROOT / "tests" / "java" / "client-check"
CACHE_ROOT = Path(os.environ.get("FLOTILLA_CACHE", Path.home() / ".cache" / "flotilla")) / "java"
STALE_BUILD_SECONDS = 24 * 3600
SETUP_HINT = "run `bash scripts/setup.d/10-clients.sh` (needs Java 17 and Maven)"
JVM_OPTS = [
    "-Xmx256m",
    "-XX:TieredStopAtLevel=1",
    "-XX:+UseSerialGC",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
]


class JavaClientMissing(RuntimeError):
    pass


def project_hash() -> str:
    h = hashlib.sha256()
    files = [PROJECT / "pom.xml", *sorted((PROJECT / "src").rglob("*"))]
    for f in files:
        if f.is_file():
            h.update(str(f.relative_to(PROJECT)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def cache_dir() -> Path:
    return CACHE_ROOT / f"client-check-{project_hash()}"


def is_built() -> bool:
    d = cache_dir()
    return (d / "client-check.jar").exists() and (d / ".complete").exists()


def build(verbose: bool = False) -> Path:
    """Build the jar into the cache (if not there yet) and return the cache directory."""
    d = cache_dir()
    if is_built():
        return d
    for tool in ("mvn", "javac", "java"):
        if not shutil.which(tool):
            raise JavaClientMissing(f"{tool} not found; {SETUP_HINT}")
    with tempfile.TemporaryDirectory(prefix="client-check-build-") as tmp:
        src = Path(tmp) / "client-check"
        shutil.copytree(PROJECT, src, ignore=shutil.ignore_patterns("target"))
        cmd = ["nice", "mvn", "-B", "-ntp", *([] if verbose else ["-q"]), "package", "-DskipTests"]
        proc = subprocess.run(cmd, cwd=src, capture_output=not verbose, text=True, timeout=1800)
        if proc.returncode != 0:
            raise JavaClientMissing(
                f"building the Java client failed ({SETUP_HINT}):\n{(proc.stdout or '')[-4000:]}\n{(proc.stderr or '')[-4000:]}"
            )
        staging = d.with_name(d.name + ".tmp")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        shutil.copy2(src / "target" / "client-check.jar", staging / "client-check.jar")
        shutil.copytree(src / "target" / "lib", staging / "lib")
        (staging / ".complete").touch()
        shutil.rmtree(d, ignore_errors=True)
        staging.rename(d)
    # Builds of other sources, once a day old: worktrees with different sources share this cache,
    # and removing a build another one's JVMs are running from breaks their tests (a lost jar).
    stale = time.time() - STALE_BUILD_SECONDS
    for old in CACHE_ROOT.glob("client-check-*"):
        if old != d and not old.name.endswith(".tmp") and old.stat().st_mtime < stale:
            shutil.rmtree(old, ignore_errors=True)
    return d


def require() -> Path:
    """The built client, or a failure that names the setup script (never a skip)."""
    if not shutil.which("java"):
        raise JavaClientMissing(f"java not found; {SETUP_HINT}")
    if not is_built():
        if os.environ.get("CI"):
            # In CI the setup script must have built it; building here would hide a broken setup.
            raise JavaClientMissing(f"Java client not built (no {cache_dir()}); {SETUP_HINT}")
        return build()
    return cache_dir()


def command(subcommand: str, *args: str) -> list[str]:
    d = require()
    classpath = f"{d / 'client-check.jar'}:{d / 'lib'}/*"
    return ["java", *JVM_OPTS, "-cp", classpath, "dev.flotilla.clientcheck.Main", subcommand, *args]


def run(subcommand: str, *args: str, input: str | None = None, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        command(subcommand, *args), input=input, capture_output=True, text=True, timeout=timeout
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"java client-check {subcommand} exited {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
        )
    return proc


if __name__ == "__main__":
    if sys.argv[1:] == ["build"]:
        print(f"Java client: {build(verbose=True)}")
    elif sys.argv[1:] == ["path"]:
        print(cache_dir())
    else:
        print("usage: python -m tests.support.java_client build|path")
        raise SystemExit(2)


def collect_records(proc: subprocess.Popen) -> tuple[list[str], "threading.Thread"]:
    """The values of the `record` events a running `consume` prints, appended to a list by a daemon
    thread as they arrive (the list and the thread; the caller ends the process)."""
    import json
    import threading

    got: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("{"):
                event = json.loads(line)
                if event.get("event") == "record":
                    got.append(event["value"])

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return got, reader
