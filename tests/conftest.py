"""Test-wide set-up: the repo root on sys.path (for `tests.support`), and the shared plugins."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

pytest_plugins = [
    "tests.support.pytest_plugin",
    "tests.support.parallel",
    "flotilla.testenv.pytest_plugin",
]
