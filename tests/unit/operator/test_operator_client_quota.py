"""Pure ClientQuota builders: the entity, the keys to set and remove, who owns a contested entity."""

from flotilla_operator.builders import client_quota as cq


def body(name, created, client_id=None, default=None, cluster="demo", ns="kafka", deleting=False, **rates):
    entity = {"clientId": client_id} if client_id is not None else {"default": True}
    meta = {"name": name, "namespace": ns, "creationTimestamp": created}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": {"clusterRef": {"name": cluster}, "entity": entity, **rates}}


def test_entity_and_ops():
    assert cq.entity_of({"entity": {"clientId": "app"}}) == {"client-id": "app"}
    assert cq.entity_of({"entity": {"default": True}}) == {"client-id": None}
    assert cq.entity_of({"entity": {"clientId": ""}}) == {"client-id": ""}
    # keys the spec leaves out are removed: editing one away takes it off the cluster
    assert cq.desired_ops({"producerByteRate": 1024}) == {
        "producer_byte_rate": 1024.0, "consumer_byte_rate": None, "request_percentage": None}
    assert cq.desired_ops({"requestPercentage": 12.5})["request_percentage"] == 12.5
    assert cq.removal_ops() == {"producer_byte_rate": None, "consumer_byte_rate": None, "request_percentage": None}


def test_user_entities_as_kafka_names_them():
    """Kafka's entity types `user` and `client-id`; None is a type's default entity."""
    assert cq.entity_of({"entity": {"user": "alice"}}) == {"user": "alice"}
    assert cq.entity_of({"entity": {"defaultUser": True}}) == {"user": None}
    assert cq.entity_of({"entity": {"user": "alice", "clientId": "app"}}) == {"user": "alice", "client-id": "app"}
    assert cq.entity_of({"entity": {"user": "alice", "default": True}}) == {"user": "alice", "client-id": None}
    assert cq.entity_of({"entity": {"defaultUser": True, "default": True}}) == {"user": None, "client-id": None}
    assert cq.entity_of({"entity": {"defaultUser": False, "clientId": "app"}}) == {"client-id": "app"}
    # (user alice) and (user alice, client-id app) are different entities: no conflict between them
    a = {"metadata": {"name": "a", "namespace": "kafka", "creationTimestamp": "1"},
         "spec": {"clusterRef": {"name": "demo"}, "entity": {"user": "alice"}}}
    b = {"metadata": {"name": "b", "namespace": "kafka", "creationTimestamp": "0"},
         "spec": {"clusterRef": {"name": "demo"}, "entity": {"user": "alice", "clientId": "app"}}}
    c = {"metadata": {"name": "c", "namespace": "kafka", "creationTimestamp": "0"},
         "spec": {"clusterRef": {"name": "demo"}, "entity": {"clientId": "app"}}}
    assert cq.owner_of(a, [a, b, c])[1] == "a"
    assert cq.owner_of(c, [a, b, c])[1] == "c"


def test_oldest_resource_owns_a_contested_entity():
    a = body("a", "2026-01-01T00:00:01Z", "app", producerByteRate=1)
    b = body("b", "2026-01-01T00:00:00Z", "app", producerByteRate=2)
    c = body("c", "2026-01-01T00:00:00Z", "other", producerByteRate=3)
    d = body("d", "2025-01-01T00:00:00Z", "app", cluster="elsewhere", producerByteRate=4)
    peers = [a, b, c, d]
    assert cq.owner_of(a, peers)[1] == "b"
    assert cq.owner_of(b, peers)[1] == "b"
    assert cq.owner_of(c, peers)[1] == "c"
    assert cq.owner_of(d, peers)[1] == "d"
    # ties on creation time: by name, so every run decides the same
    e = body("e", "2026-01-01T00:00:00Z", "app")
    assert cq.owner_of(e, [b, e])[1] == "b"
    # a resource being deleted no longer owns anything; the next oldest takes over
    b_going = body("b", "2026-01-01T00:00:00Z", "app", deleting=True)
    assert cq.owner_of(a, [a, b_going])[1] == "a"
    # while it is deleted itself, it still decides whether it was the owner
    assert cq.owner_of(b_going, [a, b_going])[1] == "b"


def _user(name, created, quotas=None, cluster="demo", ns="kafka", deleting=False):
    meta = {"name": name, "namespace": ns, "creationTimestamp": created}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec = {"clusterRef": {"name": cluster}, **({"quotas": quotas} if quotas is not None else {})}
    return {"metadata": meta, "spec": spec}


def _user_quota(name, created, user, client_id=None, cluster="demo"):
    entity = {"user": user, **({"clientId": client_id} if client_id else {})}
    return {"metadata": {"name": name, "namespace": "kafka", "creationTimestamp": created},
            "spec": {"clusterRef": {"name": cluster}, "entity": entity, "producerByteRate": 1}}


def test_a_kafka_user_with_quotas_competes_for_its_user_entity():
    older_user = _user("alice", "2026-01-01T00:00:00Z", quotas={"producerByteRate": 5})
    newer_quota = _user_quota("alice-quota", "2026-01-02T00:00:00Z", "alice")
    assert cq.owner_of(newer_quota, [newer_quota], [older_user]) == ("KafkaUser", "alice")
    assert cq.owner_of(older_user, [newer_quota], [], kind="KafkaUser") == ("KafkaUser", "alice")
    # the older ClientQuota wins over a newer KafkaUser
    older_quota = _user_quota("bob-quota", "2026-01-01T00:00:00Z", "bob")
    newer_user = _user("bob", "2026-01-02T00:00:00Z", quotas={})
    assert cq.owner_of(newer_user, [older_quota], [], kind="KafkaUser") == ("ClientQuota", "bob-quota")
    assert cq.owner_of(older_quota, [older_quota], [newer_user]) == ("ClientQuota", "bob-quota")
    # same creation time: by kind, ClientQuota before KafkaUser
    tie = _user_quota("carol-quota", "2026-01-01T00:00:00Z", "carol")
    carol = _user("carol", "2026-01-01T00:00:00Z", quotas={})
    assert cq.owner_of(carol, [tie], [], kind="KafkaUser") == ("ClientQuota", "carol-quota")
    # no conflict: a KafkaUser without spec.quotas, another user, a user with a client id, another cluster
    plain = _user("alice", "2025-01-01T00:00:00Z")
    assert cq.owner_of(newer_quota, [newer_quota], [plain]) == ("ClientQuota", "alice-quota")
    assert cq.owner_of(plain, [_user_quota("q", "2024-01-01T00:00:00Z", "alice")], [], kind="KafkaUser") == (
        "KafkaUser", "alice")
    with_client = _user_quota("alice-app", "2025-01-01T00:00:00Z", "alice", client_id="app")
    elsewhere = _user_quota("alice-far", "2025-01-01T00:00:00Z", "alice", cluster="other")
    assert cq.owner_of(newer_user, [with_client, elsewhere], [], kind="KafkaUser") == ("KafkaUser", "bob")
    assert cq.owner_of(older_user, [with_client, elsewhere], [], kind="KafkaUser") == ("KafkaUser", "alice")
    # a KafkaUser being deleted owns nothing for the others; deleted itself, it still asks
    going = _user("alice", "2026-01-01T00:00:00Z", quotas={}, deleting=True)
    assert cq.owner_of(newer_quota, [newer_quota], [going]) == ("ClientQuota", "alice-quota")
    assert cq.owner_of(going, [newer_quota], [], kind="KafkaUser") == ("KafkaUser", "alice")


def test_applied_matches_and_broker_rows():
    desired = {"producer_byte_rate": 1024.0, "consumer_byte_rate": None}
    assert cq.applied_matches(desired, {"producer_byte_rate": 1024.0})
    assert not cq.applied_matches(desired, {"producer_byte_rate": 1024.0, "consumer_byte_rate": 5.0})
    assert not cq.applied_matches(desired, {})
    assert cq.broker_status(2, {"producer_byte_rate": 1024.0}, None) == {"nodeId": 2, "producerByteRate": 1024}
    assert cq.broker_status(3, None, "cannot connect") == {"nodeId": 3, "lastError": "cannot connect"}
    held = {"producer_byte_rate": 1024.0, "request_percentage": 12.5}
    assert cq.broker_status(4, held, None) == {"nodeId": 4, "producerByteRate": 1024, "requestPercentage": 12.5}
    assert cq.applied_matches({"producer_byte_rate": 1024.0, "consumer_byte_rate": None, "request_percentage": 12.5},
                              held)
