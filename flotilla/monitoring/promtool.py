"""promtool (Prometheus' rule checker) from Debian's `prometheus` package, unpacked into
~/.cache/flotilla/promtool/<package version>/ without installing the package (no service, no
postinst): seconds, where compiling it from its Go module costs about ten minutes of CPU.

    python -m flotilla.monitoring.promtool install  # fetch and unpack if missing; prints its path
    python -m flotilla.monitoring.promtool check    # promtool check rules monitoring/prometheus-rules.yaml

Debian 12 ships Prometheus 2.42; the shipped rules use nothing newer (the unit tests run them).
"""

from __future__ import annotations

import argparse
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PACKAGE = "prometheus"
RULES = Path(__file__).resolve().parents[2] / "monitoring" / "prometheus-rules.yaml"


class InstallError(RuntimeError):
    """promtool could not be fetched; the message says what apt said."""


def cache_dir() -> Path:
    """~/.cache/flotilla/promtool, honouring XDG_CACHE_HOME."""
    base = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
    return Path(base).expanduser() / "flotilla" / "promtool"


def path(root: Path | None = None) -> Path | None:
    """The unpacked promtool (the newest package version cached), or None."""
    found = sorted((root or cache_dir()).glob("*/usr/bin/promtool"))
    return found[-1] if found else None


def _run(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})


def ensure_installed(root: Path | None = None) -> Path:
    """Fetch Debian's package and unpack promtool if none is cached; its path. Concurrent callers
    take turns on a lock file, the second then finds it unpacked."""
    root = root or cache_dir()
    found = path(root)
    if found:
        return found
    if not shutil.which("apt-get") or not shutil.which("dpkg-deb"):
        raise InstallError("apt-get and dpkg-deb are needed to fetch Debian's prometheus package")
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = path(root)
        if found:
            return found
        with tempfile.TemporaryDirectory(dir=root) as tmp:
            work = Path(tmp)
            os.chmod(work, 0o755)  # apt's download sandbox user must be able to write here
            got = _run("apt-get", "download", PACKAGE, cwd=work)
            if got.returncode != 0:  # a fresh machine may have no package lists yet
                _run("apt-get", "-o", "DPkg::Lock::Timeout=600", "update", "-qq")
                got = _run("apt-get", "download", PACKAGE, cwd=work)
            debs = sorted(work.glob(f"{PACKAGE}_*.deb"))
            if got.returncode != 0 or not debs:
                raise InstallError(f"apt-get download {PACKAGE} failed: {got.stderr.strip() or got.stdout.strip()}")
            version = _run("dpkg-deb", "-f", str(debs[0]), "Version").stdout.strip() or "unknown"
            unpacked = work / "unpacked"
            out = _run("dpkg-deb", "-x", str(debs[0]), str(unpacked))
            if out.returncode != 0:
                raise InstallError(f"dpkg-deb -x failed: {out.stderr.strip()}")
            target = root / version.replace("/", "_")
            target.mkdir(parents=True, exist_ok=True)
            (target / "usr" / "bin").mkdir(parents=True, exist_ok=True)
            shutil.copy2(unpacked / "usr" / "bin" / "promtool", target / "usr" / "bin" / "promtool")
    found = path(root)
    assert found is not None
    return found


def check_rules(promtool: Path, *files: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(promtool), "check", "rules", *map(str, files)], capture_output=True, text=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["install", "check"])
    args = parser.parse_args(argv)
    try:
        exe = ensure_installed()
    except InstallError as exc:
        print(f"promtool: {exc}", file=sys.stderr)
        return 1
    if args.action == "install":
        print(exe)
        return 0
    proc = check_rules(exe, RULES)
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
