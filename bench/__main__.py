import sys
from pathlib import Path

# The repository root on sys.path, so that `python bench` (the directory) finds the package too.
_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from bench.cli import main  # noqa: E402

raise SystemExit(main(sys.argv[1:]))
