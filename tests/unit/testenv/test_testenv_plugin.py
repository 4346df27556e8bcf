"""The kube_env fixture fails (does not skip) when the binaries are missing."""

import os
import re
import subprocess
import sys


def test_missing_binaries_fail_with_the_build_command(tmp_path):
    (tmp_path / "test_needs_kube.py").write_text("def test_it(kube_env):\n    pass\n")
    env = {**os.environ, "FLOTILLA_TESTENV_CACHE": str(tmp_path / "empty-cache")}
    env.pop("FLOTILLA_KUBECONFIG", None)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "flotilla.testenv.pytest_plugin", "-p", "no:cacheprovider",
         "-q", "--rootdir", str(tmp_path), "-c", os.devnull, str(tmp_path / "test_needs_kube.py")],
        capture_output=True, text=True, env=env, timeout=120,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert re.search(r"^1 error\b", proc.stdout, re.MULTILINE), proc.stdout
    assert "skipped" not in proc.stdout
    assert "flotilla testenv build" in proc.stdout


def test_an_external_kubeconfig_that_does_not_exist_fails(tmp_path):
    (tmp_path / "test_needs_kube.py").write_text("def test_it(kube_env):\n    pass\n")
    env = {**os.environ, "FLOTILLA_KUBECONFIG": str(tmp_path / "nope")}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "flotilla.testenv.pytest_plugin", "-p", "no:cacheprovider",
         "-q", "--rootdir", str(tmp_path), "-c", os.devnull, str(tmp_path / "test_needs_kube.py")],
        capture_output=True, text=True, env=env, timeout=120,
    )
    assert proc.returncode == 1
    assert "FLOTILLA_KUBECONFIG" in proc.stdout
