"""promtool (Prometheus' rule checker), built from its Go module and cached beside the test
control plane's binaries, as they are (flotilla/testenv/build.py): no release binary is downloaded.

    python -m flotilla.monitoring.promtool build    # build if missing; prints its path
    python -m flotilla.monitoring.promtool check    # promtool check rules monitoring/prometheus-rules.yaml

Prometheus 3.x publishes its Go module as v0.3XX.Y for release v3.XX.Y.
"""

from __future__ import annotations

import argparse
import fcntl
import subprocess
import sys
import time
from pathlib import Path

from flotilla.testenv import build, versions

MODULE_VERSION = "v0.316.0"  # Prometheus v3.16.0
PACKAGE = "github.com/prometheus/prometheus/cmd/promtool"
BINARY = versions.Binary("promtool", f"github.com/prometheus/prometheus@{MODULE_VERSION}")
RULES = Path(__file__).resolve().parents[2] / "monitoring" / "prometheus-rules.yaml"


def release_version(module_version: str = MODULE_VERSION) -> str:
    """v0.316.0 -> 3.16.0 (what `promtool --version` reports)."""
    minor_patch = module_version.lstrip("v").split(".", 1)[1]
    series, patch = minor_patch.split(".")
    return f"{int(series) // 100}.{int(series) % 100}.{patch}"


def path(root: Path | None = None) -> Path | None:
    """The cached promtool at the pinned version, or None."""
    bin_dir = versions.bin_dir(root)
    return bin_dir / BINARY.name if build.is_built(bin_dir, BINARY) else None


def ensure_built(root: Path | None = None) -> Path:
    """Build promtool if it is not cached (minutes, once; CPU heavy); its path. Concurrent callers
    take turns on a lock file, the second then finds it built."""
    found = path(root)
    if found:
        return found
    lock_path = versions.version_dir(root) / "promtool.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = path(root)
        if found:
            return found
        builder = build.Builder(root)
        started = time.monotonic()
        build.log(f"building promtool {release_version()} ({PACKAGE}@{MODULE_VERSION}) ...")
        ldflags = f"-s -w -X github.com/prometheus/common/version.Version={release_version()}"
        builder._go_install(BINARY, PACKAGE, MODULE_VERSION, ldflags)
        build.log(f"built promtool in {time.monotonic() - started:.0f}s")
    found = path(root)
    assert found is not None
    return found


def check_rules(promtool: Path, *files: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(promtool), "check", "rules", *map(str, files)], capture_output=True, text=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["build", "check"])
    args = parser.parse_args(argv)
    try:
        exe = ensure_built()
    except build.BuildError as exc:
        print(f"promtool: {exc}", file=sys.stderr)
        return 1
    if args.action == "build":
        print(exe)
        return 0
    proc = check_rules(exe, RULES)
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
