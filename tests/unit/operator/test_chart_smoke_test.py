"""The chart's `helm test` hook (templates/tests/smoke.yaml), rendered with `helm template`: a Pod
in the chart's image that runs `python -m flotilla.smoke` against the bootstrap Service of the
KafkaCluster the values name, and that stays out of install/flotilla.yaml."""

from __future__ import annotations

import importlib
import subprocess
from pathlib import Path

import pytest
import yaml

from flotilla import install_render

CHART = Path(__file__).resolve().parents[3] / "charts" / "flotilla"


@pytest.fixture(scope="module")
def helm():
    try:
        return install_render.helm_binary()
    except install_render.HelmMissing as exc:
        pytest.skip(str(exc))


def render(helm, *sets: str, check: bool = True) -> subprocess.CompletedProcess:
    args = [helm, "template", "rel", str(CHART), "--namespace", "kafka", "--kube-version", install_render.KUBE_VERSION]
    for s in sets:
        args += ["--set", s]
    return subprocess.run(args, capture_output=True, text=True, check=check)


def hook_pods(text: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(text) if d and d["kind"] == "Pod"
            and (d["metadata"].get("annotations") or {}).get("helm.sh/hook") == "test"]


def test_the_test_pod_round_trips_through_the_named_bootstrap_service(helm):
    (pod,) = hook_pods(render(helm, "test.cluster=orders", "image.tag=1.2.3").stdout)
    assert pod["metadata"]["namespace"] == "kafka"
    assert "hook-succeeded" in pod["metadata"]["annotations"]["helm.sh/hook-delete-policy"]
    assert pod["spec"]["restartPolicy"] == "Never"
    (container,) = pod["spec"]["containers"]
    assert container["image"] == "flotilla:1.2.3"  # the operator's image: it has the client
    assert container["command"] == ["python", "-m", "flotilla.smoke"]
    assert "--bootstrap-server=orders-bootstrap.kafka.svc:9092" in container["args"]
    # The module the Pod runs exists and parses those arguments.
    smoke = importlib.import_module("flotilla.smoke")
    with pytest.raises(SystemExit) as exc:
        smoke.main(["--help"])
    assert exc.value.code == 0


def test_values_pick_the_cluster_or_an_explicit_address(helm):
    (pod,) = hook_pods(render(helm, "test.namespace=data", "test.port=9093").stdout)
    assert "--bootstrap-server=demo-bootstrap.data.svc:9093" in pod["spec"]["containers"][0]["args"]
    (pod,) = hook_pods(render(helm, "test.bootstrapServers=kafka.example:9092", "imagePullSecrets[0].name=regcred").stdout)
    assert "--bootstrap-server=kafka.example:9092" in pod["spec"]["containers"][0]["args"]
    assert pod["spec"]["imagePullSecrets"] == [{"name": "regcred"}]
    assert hook_pods(render(helm, "test.enabled=false").stdout) == []
    bad = render(helm, "test.port=0", check=False)
    assert bad.returncode != 0 and "port" in bad.stderr


def test_the_one_manifest_install_leaves_the_test_pod_out():
    text = install_render.MANIFEST.read_text() if hasattr(install_render, "MANIFEST") else (
        CHART.parents[1] / "install" / "flotilla.yaml").read_text()
    assert hook_pods(text) == [] and "flotilla.smoke" not in text
