"""follower_identity: who a leader believes a follower's fetch from (KIP-903 broker epochs)."""

from __future__ import annotations

from broker.metadata.store import BrokerRegistration, Endpoint, MetadataImage
from broker.replica.follower_identity import NO_EPOCH, broker_epoch, own_broker_epoch, refusal


def reg(node_id: int, incarnation: str) -> BrokerRegistration:
    return BrokerRegistration(node_id, incarnation, (Endpoint("REPLICATION", "h", 1), Endpoint("CLIENT", "h", 2)))


IMAGE = MetadataImage.build("c", {1: reg(1, "inc-a"), 2: reg(2, "inc-b")}, 1, {})


def test_broker_epoch_is_a_non_negative_int64_of_the_incarnation_alone():
    e = broker_epoch(reg(1, "inc-a"))
    assert 0 <= e < 2**63
    assert e == broker_epoch(reg(7, "inc-a"))  # deterministic: every broker derives the same
    assert e != broker_epoch(reg(1, "inc-a2"))  # a restart (new incarnation) changes it
    assert own_broker_epoch(IMAGE, 2) == broker_epoch(reg(2, "inc-b"))
    assert own_broker_epoch(IMAGE, 3) == NO_EPOCH  # not registered yet


def test_only_a_live_registration_in_its_current_incarnation_on_the_inter_broker_listener():
    good = broker_epoch(reg(2, "inc-b"))
    assert refusal(IMAGE, 2, good, "REPLICATION", "REPLICATION") is None
    assert refusal(IMAGE, 2, good, None, "REPLICATION") is None  # listener unknown: not checked
    assert "inter-broker listener" in refusal(IMAGE, 2, good, "CLIENT", "REPLICATION")
    assert "no live registration" in refusal(IMAGE, 3, good, "REPLICATION", "REPLICATION")
    assert "no broker epoch" in refusal(IMAGE, 2, NO_EPOCH, "REPLICATION", "REPLICATION")
    assert "not that of broker 2" in refusal(IMAGE, 2, broker_epoch(reg(2, "inc-old")), "REPLICATION", "REPLICATION")
    assert "not that of broker 2" in refusal(IMAGE, 2, broker_epoch(reg(1, "inc-a")), "REPLICATION", "REPLICATION")
