"""The fleet's cluster.id outlives its KafkaCluster (issue 18, item 9a): chosen from spec, the
record, status, or a new fleet's uid, in that order; a spec id other than the record is refused."""

from __future__ import annotations

import dataclasses

from flotilla_operator.builders import build_all
from flotilla_operator.builders.cluster_id import (
    DATA_KEY,
    build_record,
    choose_cluster_id,
    id_from_uid,
    record_name,
)
from flotilla_operator.builders.configmap import server_properties

PINNED = "MkU3OEVBNTcwNTJENDM2Qg"


def _props(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def test_a_new_fleet_takes_its_id_from_the_uid(owner):
    choice = choose_cluster_id(owner, spec_id=None, record=None, status_id=None)
    assert (choice.cluster_id, choice.source, choice.error) == (id_from_uid(owner), "uid", None)
    assert len(choice.cluster_id) == 22 and choice.needs_record


def test_a_recreated_cluster_renders_the_recorded_id_not_its_new_uid(owner, spec):
    first = choose_cluster_id(owner, spec_id=None, record=None, status_id=None)
    record = build_record(owner, first.cluster_id)
    recreated = dataclasses.replace(owner, uid="0d3c2b1a-0000-4000-8000-000000000001", generation=1)
    again = choose_cluster_id(recreated, spec_id=None, record=record, status_id=None)
    assert again.cluster_id == first.cluster_id != id_from_uid(recreated)
    assert again.source == "record" and not again.needs_record
    props = _props(server_properties(recreated, spec, again.cluster_id))
    assert props["cluster.id"] == first.cluster_id
    assert _props(build_all(recreated, spec, image="i", cluster_id=again.cluster_id).server_properties)["cluster.id"] \
        == first.cluster_id


def test_the_record_is_not_owned_and_immutable(owner):
    record = build_record(owner, PINNED)
    assert record["kind"] == "ConfigMap" and record["metadata"]["name"] == record_name(owner) == "demo-cluster-id"
    assert "ownerReferences" not in record["metadata"]  # garbage collection must leave it
    assert record["immutable"] is True and record["data"] == {DATA_KEY: PINNED}
    assert record["metadata"]["labels"]["app.kubernetes.io/instance"] == "demo"


def test_spec_pins_the_id_for_a_restore(owner):
    choice = choose_cluster_id(owner, spec_id=PINNED, record=None, status_id="ignored-status-id-xxxx")
    assert (choice.cluster_id, choice.source, choice.error) == (PINNED, "spec", None) and choice.needs_record
    same = choose_cluster_id(owner, spec_id=PINNED, record=build_record(owner, PINNED), status_id=None)
    assert (same.cluster_id, same.error, same.needs_record) == (PINNED, None, False)


def test_a_spec_id_other_than_the_record_is_refused(owner):
    held = id_from_uid(owner)
    choice = choose_cluster_id(owner, spec_id=PINNED, record=build_record(owner, held), status_id=None)
    assert choice.cluster_id == held and choice.error
    assert PINNED in choice.error and held in choice.error and "demo-cluster-id" in choice.error


def test_status_keeps_the_id_when_the_record_was_deleted_under_a_running_fleet(owner):
    choice = choose_cluster_id(owner, spec_id=None, record=None, status_id=PINNED)
    assert (choice.cluster_id, choice.source) == (PINNED, "status") and choice.needs_record
