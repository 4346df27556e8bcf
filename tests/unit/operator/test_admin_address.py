"""Where the operator's admin clients reach a cluster: its own annotation, else its own bootstrap
Service from the status, never an operator-wide address."""

from flotilla_operator.admin_address import OPERATOR_BOOTSTRAP, admin_address


def kc(annotations=None, status=None):
    return {"kind": "KafkaCluster", "metadata": {"name": "demo", "namespace": "ns", "annotations": annotations or {}},
            "status": status or {}}


READY = {"bootstrapServers": "demo-bootstrap.ns.svc:9092",
         "conditions": [{"type": "Ready", "status": "True", "reason": "Ready"}]}
PROGRESSING = {"bootstrapServers": "demo-bootstrap.ns.svc:9092",
               "conditions": [{"type": "Ready", "status": "False", "reason": "Progressing"}]}


def test_the_bootstrap_service_from_the_status():
    assert admin_address(kc(status=READY), "demo", require_ready=True) == ("demo-bootstrap.ns.svc:9092", "")
    assert admin_address(kc(status=PROGRESSING), "demo", require_ready=False) == ("demo-bootstrap.ns.svc:9092", "")


def test_a_cluster_that_is_missing_not_ready_or_without_address_gives_the_reason():
    assert admin_address(None, "demo", require_ready=False) == (
        None, "spec.clusterRef.name: KafkaCluster demo does not exist")
    address, why = admin_address(kc(status=PROGRESSING), "demo", require_ready=True)
    assert address is None and why == "KafkaCluster demo is not Ready (Progressing)"
    assert admin_address(kc(), "demo", require_ready=False) == (None, "KafkaCluster demo has no bootstrap address yet")


def test_the_annotation_wins_for_that_cluster_only_and_needs_no_ready_status():
    annotated = kc({OPERATOR_BOOTSTRAP: " 127.0.0.1:19092 , [::1]:19093 "}, PROGRESSING)
    assert admin_address(annotated, "demo", require_ready=True) == ("127.0.0.1:19092,[::1]:19093", "")
    assert admin_address(kc(status=READY), "demo", require_ready=True)[0] == "demo-bootstrap.ns.svc:9092"


def test_a_malformed_annotation_is_reported_naming_it():
    for bad in ("localhost", "host:99999", "a:1,,b", "http://x:1"):
        address, why = admin_address(kc({OPERATOR_BOOTSTRAP: bad}, READY), "demo", require_ready=False)
        assert address is None and OPERATOR_BOOTSTRAP in why and repr(bad) in why, bad
