"""How a benchmark's client process answers the harness (bench/harness/runner.py reads it): the result as
one JSON line on stdout and exit 0, or the error on stderr and exit 1, which the harness records."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable


def answer(run: Callable[[argparse.Namespace], dict[str, Any]], args: argparse.Namespace) -> int:
    try:
        result = run(args)
    except Exception as e:  # reported to the harness, which records it
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(json.dumps(result))
    return 0
