"""In CI, a skipped test is a test that did not run what it claims: with the CI variable set, the
session fails for every skip that tests/ci_allowed_skips.toml does not list, naming each one.
The hooks that feed it live in tests/support/pytest_plugin.py."""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ALLOW_LIST = Path(__file__).resolve().parents[1] / "ci_allowed_skips.toml"


def in_ci(env: dict[str, str] | None = None) -> bool:
    """CI=1 (.ci/run) or CI=true (what CI services set)."""
    return (env if env is not None else os.environ).get("CI", "").strip().lower() not in ("", "0", "false", "no")


@dataclass(frozen=True)
class Allowed:
    why: str
    test: str | None = None  # a node id or a prefix of node ids (a module, a class)
    reason: str | None = None  # the start of the skip reason

    def matches(self, nodeid: str, reason: str) -> bool:
        if self.test is not None:
            t = self.test
            if not (nodeid == t or nodeid.startswith((t + "::", t + "["))):
                return False
        return self.reason is None or reason.startswith(self.reason)


def load(path: Path = ALLOW_LIST) -> list[Allowed]:
    entries = tomllib.loads(path.read_text()).get("skip", [])
    out = []
    for i, e in enumerate(entries):
        if not e.get("why") or not (e.get("test") or e.get("reason")) or set(e) - {"why", "test", "reason"}:
            raise ValueError(f"{path}: entry {i + 1} needs `why` and `test` or `reason` (and nothing else): {e}")
        out.append(Allowed(why=e["why"], test=e.get("test"), reason=e.get("reason")))
    return out


@dataclass
class SkipLedger:
    """The session's skips, as (node id, reason)."""

    seen: list[tuple[str, str]] = field(default_factory=list)

    def record(self, report) -> None:
        if not report.skipped or hasattr(report, "wasxfail"):
            return
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
        self.seen.append((report.nodeid, reason.removeprefix("Skipped: ")))

    def unexpected(self, allowed: list[Allowed]) -> list[tuple[str, str]]:
        return [(n, r) for n, r in self.seen if not any(a.matches(n, r) for a in allowed)]


def message(unexpected: list[tuple[str, str]]) -> str:
    lines = [f"CI: {len(unexpected)} test(s) skipped that tests/ci_allowed_skips.toml does not allow "
             "(CI has every tool scripts/setup.d installs, so these did not run what they claim):"]
    lines += [f"  {nodeid}: {reason}" for nodeid, reason in unexpected]
    lines.append("Make them run here, or add an entry saying why they cannot.")
    return "\n".join(lines)
