"""A fake node whose Lease lapses comes back, and so do its pods (kwok issue 1464).

Its own control plane (one fake node, a 20 s node-monitor grace period instead of the suite's 2
minutes), because the test stops kwok on purpose: the node controller marks the node Unknown and
its pods NotReady, as it does when kwok is starved on a loaded machine. Once kwok runs again the
node is Ready, and the pods must be Ready too (flotilla/testenv/kwok_stages.py), or an OrderedReady
StatefulSet never makes its next pod: the stuck operator roll this once caused.
"""

from __future__ import annotations

import json
import os

import pytest

from flotilla.testenv import build, nodes, versions
from flotilla.testenv.control_plane import ControlPlane
from flotilla.testenv.waiting import wait_for

pytestmark = pytest.mark.kube

GRACE_S = 20
NODE = nodes.node_names(1)[0]
IMAGE = "flotilla:never-pulled"


@pytest.fixture(scope="module")
def lapsing_plane(tmp_path_factory):
    if os.environ.get("FLOTILLA_KUBECONFIG"):
        pytest.skip("stops kwok of its own control plane; an external cluster has real kubelets")
    missing = build.missing(versions.bin_dir())
    if missing:
        pytest.fail(f"test control plane binaries missing: {', '.join(missing)}; run `flotilla testenv build`")
    cp = ControlPlane(directory=tmp_path_factory.mktemp("lapse"), bin_dir=versions.bin_dir(), node_count=1,
                      node_monitor_grace_period=f"{GRACE_S}s")
    cp.up()
    try:
        yield cp
    finally:
        cp.resume("kwok")
        cp.down()


def get(cp: ControlPlane, *args: str) -> dict:
    return json.loads(cp.kubectl("get", *args, "-o", "json").stdout)


def pod_ready(cp: ControlPlane, name: str) -> str | None:
    """The pod's Ready condition status ("True", "False"), None while it has none."""
    pod = get(cp, "pod", name, "-n", "lapse")
    return next((c["status"] for c in pod.get("status", {}).get("conditions", []) if c["type"] == "Ready"), None)


def statefulset(replicas: int) -> dict:
    labels = {"app": "ordered"}
    return {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "ordered", "namespace": "lapse"},
        "spec": {
            "serviceName": "ordered", "replicas": replicas, "podManagementPolicy": "OrderedReady",
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels},
                         "spec": {"containers": [{"name": "broker", "image": IMAGE}]}},
        },
    }


# Waits: 60 + (GRACE_S + 5 s monitor period + 60) + 30 + 90 + 90 + 90 s, inside the timeout.
@pytest.mark.timeout(600)
def test_pods_of_a_lapsed_node_are_ready_again_and_an_ordered_statefulset_goes_on(lapsing_plane):
    cp = lapsing_plane
    cp.kubectl("create", "namespace", "lapse")
    cp.kubectl("apply", "-f", "-", input=json.dumps(statefulset(1)))
    wait_for("ordered-0 Ready", lambda: pod_ready(cp, "ordered-0"), until=lambda r: r == "True", timeout=60)
    first_uid = get(cp, "pod", "ordered-0", "-n", "lapse")["metadata"]["uid"]

    cp.pause("kwok")  # no Lease renewals, no node status: the node lapses
    try:
        wait_for(f"the node controller to mark ordered-0 NotReady (grace period {GRACE_S}s)",
                 lambda: pod_ready(cp, "ordered-0"), until=lambda r: r == "False", timeout=GRACE_S + 5 + 60)
        assert list(nodes.not_ready(cp, 1)) == [NODE]
        # What each test of the suite checks first (kube_nodes_ready) names the node.
        with pytest.raises(nodes.NodesNotReady, match=f"{NODE}.*Ready=Unknown"):
            nodes.wait_ready(cp, 1, timeout=1)
        # OrderedReady: a second pod waits for the first to be Ready again.
        cp.kubectl("scale", "statefulset", "ordered", "-n", "lapse", "--replicas=2")
        wait_for("the StatefulSet controller to see the scale",
                 lambda: get(cp, "statefulset", "ordered", "-n", "lapse").get("status", {}),
                 until=lambda st: st.get("observedGeneration") == 2, timeout=30)
        assert cp.kubectl("get", "pod", "ordered-1", "-n", "lapse", check=False).returncode != 0
    finally:
        cp.resume("kwok")

    wait_for(f"{NODE} Ready again", lambda: nodes.not_ready(cp, 1), until=lambda missing: not missing, timeout=90)
    wait_for("ordered-0 Ready again", lambda: pod_ready(cp, "ordered-0"), until=lambda r: r == "True", timeout=90)
    # The same pod (not evicted and replaced), and the StatefulSet goes on to its second pod.
    assert get(cp, "pod", "ordered-0", "-n", "lapse")["metadata"]["uid"] == first_uid
    wait_for("2 ready replicas", lambda: get(cp, "statefulset", "ordered", "-n", "lapse").get("status", {}),
             until=lambda st: st.get("readyReplicas") == 2, timeout=90)
