"""With CI set, a skip that tests/ci_allowed_skips.toml does not allow fails the session, naming
the test and its reason; allowed skips, and any skip outside CI, do not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support import ci_skips

REPO = Path(__file__).resolve().parents[3]

TESTS = '''
import pytest

def test_runs():
    pass

def test_skips_for_no_reason():
    pytest.skip("no widget here")

@pytest.mark.skip(reason="Flotilla-only: a reference-run skip")
def test_allowed():
    pass
'''


def run_pytest(tmp_path: Path, ci: str | None, source: str = TESTS) -> subprocess.CompletedProcess:
    (tmp_path / "test_sample.py").write_text(source)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.support.pytest_plugin",
                           "test_sample.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_an_unexpected_skip_fails_a_ci_run_naming_it(tmp_path):
    for ci in ("1", "true"):
        proc = run_pytest(tmp_path, ci)
        assert proc.returncode == 1, proc.stdout
        assert "1 test(s) skipped that tests/ci_allowed_skips.toml does not allow" in proc.stdout, proc.stdout
        assert "test_sample.py::test_skips_for_no_reason: no widget here" in proc.stdout, proc.stdout
        assert "test_allowed" not in proc.stdout.split("unexpected skips")[1], proc.stdout


def test_outside_ci_skips_pass(tmp_path):
    for ci in (None, "", "0", "false"):
        proc = run_pytest(tmp_path, ci)
        assert proc.returncode == 0, proc.stdout
        assert "unexpected skips" not in proc.stdout


def test_a_module_skipped_as_a_whole_counts(tmp_path):
    source = 'import pytest\npytest.skip("module gone", allow_module_level=True)\n\ndef test_x():\n    pass\n'
    proc = run_pytest(tmp_path, "1", source)
    assert proc.returncode == 1 and "test_sample.py: module gone" in proc.stdout, proc.stdout


def test_only_allowed_skips_pass_in_ci(tmp_path):
    source = 'import pytest\n\n@pytest.mark.skip(reason="Flotilla-only: x")\ndef test_allowed():\n    pass\n'
    proc = run_pytest(tmp_path, "1", source)
    assert proc.returncode == 0, proc.stdout


def test_allow_list_entries_match_by_node_id_prefix_or_reason():
    by_module = ci_skips.Allowed(why="w", test="tests/e2e/test_a.py")
    assert by_module.matches("tests/e2e/test_a.py::test_x[p1]", "anything")
    assert by_module.matches("tests/e2e/test_a.py", "module skip")
    assert not by_module.matches("tests/e2e/test_ab.py::test_x", "anything")
    both = ci_skips.Allowed(why="w", test="tests/e2e/test_a.py::test_x", reason="needs ")
    assert both.matches("tests/e2e/test_a.py::test_x[1]", "needs root") and not both.matches("tests/e2e/test_a.py::test_x", "boom")
    # the project's list loads, every entry says why
    assert all(a.why for a in ci_skips.load())
