"""The suite's time budget: tests/budget.toml gives each test module its expected seconds and caps
their sum, so that a module that grows, or a new one, shows its cost where it lands.

CI has 90 minutes for `.ci/run`; at today's cost per feature the suite would pass that within a few
issues. So at the end of every pytest session (tests/support/parallel.py) each module's measured
time, its own tests' setup, call and teardown, merged over the xdist workers, is held against its
entry: more than max(MARGIN_SECONDS, MARGIN_FRACTION of the entry) over it, or no entry at all,
fails the session in CI (CI=1, as .ci/run sets; elsewhere it is reported). The margin absorbs what
a module does not control: a session fixture (the API server, the real node) is paid by the first
module on its worker and its teardown by the last, and the two shared cores are busier in some runs
than in others. It is wide (a module may take half as long again, or a minute more) because a run
that fails on noise lands nothing: it catches a module that doubles, not one that wobbles.

    python -m tests.support.budget slowest [N]   the last run's N slowest modules beside their budget
    python -m tests.support.budget adopt         write the last run's times into tests/budget.toml
"""

from __future__ import annotations

import json
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUDGET = ROOT / "tests" / "budget.toml"
MEASURED = ROOT / "tests" / ".work" / "module-durations.json"
MARGIN_SECONDS = 60.0
MARGIN_FRACTION = 0.5
MODULES_TABLE = "[modules]"


@dataclass(frozen=True)
class Budget:
    total_seconds: float  # the cap on the sum of the modules' entries: serial seconds
    modules: dict[str, float]  # test module path (as pytest names it) -> expected seconds


def load(path: Path = BUDGET) -> Budget:
    doc = tomllib.loads(path.read_text())
    return Budget(float(doc["total_seconds"]), {k: float(v) for k, v in doc["modules"].items()})


def suite_modules(root: Path = ROOT) -> set[str]:
    """Every test module of the suite, named as pytest names it (tests/.work holds scratch files)."""
    return {str(p.relative_to(root)) for p in (root / "tests").rglob("test_*.py") if ".work" not in p.parts}


def load_measured(path: Path = MEASURED) -> dict[str, float]:
    """A run's seconds per module, as tests/support/parallel.py wrote them ({} before any run)."""
    try:
        return {k: float(v) for k, v in json.loads(path.read_text()).items()}
    except FileNotFoundError:
        return {}


def allowed(expected: float) -> float:
    """The most a module with this entry may take before it counts as over its budget."""
    return expected + max(MARGIN_SECONDS, MARGIN_FRACTION * expected)


def overruns(measured: dict[str, float], budget: Budget) -> list[str]:
    """One line per module that took longer than its entry allows or has no entry, slowest first."""
    problems = []
    for module, took in sorted(measured.items(), key=lambda kv: -kv[1]):
        expected = budget.modules.get(module)
        if expected is None:
            problems.append(f"{module} took {took:.1f} s and has no entry in tests/budget.toml "
                            f'(add "{module}" = {took:.1f}, in the commit that adds the module)')
        elif took > allowed(expected):
            problems.append(f"{module} took {took:.1f} s, over its budget of {expected:.1f} s by more than the "
                            f"margin (at most {allowed(expected):.1f} s): make it faster, or raise its entry "
                            "in tests/budget.toml in a commit that says why")
    return problems


def over_total(budget: Budget) -> str | None:
    """Why the entries do not fit the total, or None if they do."""
    total = sum(budget.modules.values())
    if total <= budget.total_seconds:
        return None
    return (f"tests/budget.toml: the modules' entries add up to {total:.0f} s, over the total of "
            f"{budget.total_seconds:.0f} s: a slower module pays by making another faster, or the "
            "total grows in a commit that says why")


def slowest(measured: dict[str, float], budget: Budget | None, n: int = 10) -> list[str]:
    """The n slowest modules of a run, each beside its entry (if the run has a budget)."""
    lines = []
    for module, took in sorted(measured.items(), key=lambda kv: -kv[1])[:n]:
        expected = None if budget is None else budget.modules.get(module)
        entry = "" if budget is None else "  (no entry)" if expected is None else f"  (budget {expected:6.1f} s)"
        lines.append(f"{took:8.1f} s{entry}  {module}")
    return lines


def with_times(text: str, times: dict[str, float], modules: set[str]) -> str:
    """The budget file's text with `times` written into its modules table and the entries of
    anything but `modules` dropped; the header and the other entries (their comments too) kept."""
    head, table = re.split(rf"^{re.escape(MODULES_TABLE)}$", text, maxsplit=1, flags=re.MULTILINE)
    lines = {line[1:].split('"', 1)[0]: line for line in table.splitlines() if line.startswith('"')}
    lines.update({m: f'"{m}" = {s:.1f}' for m, s in times.items()})
    return head + MODULES_TABLE + "\n" + "\n".join(lines[m] for m in sorted(lines) if m in modules) + "\n"


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "slowest"
    budget, measured = load(), load_measured()
    if command == "slowest":  # slowest [N] [FILE]: another run's file (the Kafka-reference run's) has no budget
        path = Path(argv[2]) if len(argv) > 2 else MEASURED
        lines = slowest(load_measured(path), budget if path.resolve() == MEASURED else None, int(argv[1]) if len(argv) > 1 else 10)
        print("\n".join(lines) or f"(no module times in {path})")
        return 0
    if command == "adopt":
        BUDGET.write_text(with_times(BUDGET.read_text(), measured, suite_modules()))
        print(f"tests/budget.toml: {len(measured)} module(s) from {MEASURED.relative_to(ROOT)}; "
              f"sum {sum(load().modules.values()):.0f} s of {budget.total_seconds:.0f} s")
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
