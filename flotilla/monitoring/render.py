"""Write the shipped dashboards and the chart's copies of monitoring/.

    python -m flotilla.monitoring.render           # writes monitoring/dashboards/*.json and the chart's copies
    python -m flotilla.monitoring.render --check   # exit 1 if anything is stale; write nothing

The dashboards are built in dashboards.py; monitoring/prometheus-rules.yaml is edited by hand.
Helm reads files only inside the chart, so charts/flotilla/files/ holds copies of both, which
this script keeps identical (a unit test checks).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .dashboards import DASHBOARDS

REPO_ROOT = Path(__file__).resolve().parents[2]
MONITORING = REPO_ROOT / "monitoring"
RULES = MONITORING / "prometheus-rules.yaml"
CHART_FILES = REPO_ROOT / "charts" / "flotilla" / "files"


def dashboard_text(name: str) -> str:
    return json.dumps(DASHBOARDS[name](), indent=2) + "\n"


def wanted() -> dict[Path, str]:
    """Every generated or copied file and the text it must have."""
    out: dict[Path, str] = {}
    for name in DASHBOARDS:
        text = dashboard_text(name)
        out[MONITORING / "dashboards" / name] = text
        out[CHART_FILES / "dashboards" / name] = text
    out[CHART_FILES / RULES.name] = RULES.read_text()
    return out


def stale() -> list[Path]:
    return [p for p, text in wanted().items() if not p.is_file() or p.read_text() != text]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a file is stale; write nothing")
    args = parser.parse_args(argv)
    if args.check:
        old = stale()
        for p in old:
            print(f"stale: {p.relative_to(REPO_ROOT)} (run `python -m flotilla.monitoring.render`)", file=sys.stderr)
        return 1 if old else 0
    for path, text in wanted().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
            print(f"wrote {path.relative_to(REPO_ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
