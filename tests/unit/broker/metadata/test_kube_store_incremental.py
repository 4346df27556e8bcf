"""The Kubernetes store publishes what an event changed, not a rebuilt image (issue 18 item 8):
a KafkaTopic event yields an image made by `with_topics` from the previous one (subscribers such
as the controller look at that topic alone), and a Lease renewal that changes no registration
publishes nothing. Objects are fed to the store's watch handler as the watch would;
tests/e2e/test_metadata_kube.py counts the controller's planning on a real API server."""

import time

from broker.metadata import kube_objects as ko
from broker.metadata.kube_store import KubernetesMetadataStore
from broker.metadata.store import BrokerRegistration, Endpoint, new_topic


def current_store() -> tuple[KubernetesMetadataStore, list]:
    """A store whose view counts as current (both watches up, the API server just answered), and
    the (old, new) images it published."""
    s = KubernetesMetadataStore(cluster_id="c", cluster_name="fleet", namespace="ns")
    s._connected = {"leases": True, "topics": True}
    s._contact_at = time.monotonic()
    published: list = []
    s.subscribe(lambda old, new: published.append((old, new)))
    return s, published


def topic_obj(rec, rv: int) -> dict:
    obj = ko.topic_object("fleet", rec)
    obj["metadata"].update(resourceVersion=str(rv), uid="uid-" + rec.name, creationTimestamp="2026-01-01T00:00:00Z")
    return obj


def lease_obj(node: int, rv: int, base: dict | None = None, shutting_down: bool = False) -> dict:
    reg = BrokerRegistration(node, f"incarnation-{node}", (Endpoint("PLAINTEXT", "localhost", 9092 + node),),
                             shutting_down=shutting_down)
    obj = ko.broker_lease("fleet", "c", reg, 15, base=base)
    obj["metadata"]["resourceVersion"] = str(rv)
    time.sleep(0.000002)  # renewTime has microseconds: the next renewal differs
    return obj


def event(s: KubernetesMetadataStore, kind: str, obj: dict, type_: str = "MODIFIED") -> None:
    if s._apply(kind, type_, obj):
        s._publish_now()


def test_a_topic_event_publishes_that_topic_alone_on_the_previous_image():
    s, published = current_store()
    topics = [new_topic(f"t{i}", 1) for i in range(50)]
    for i, rec in enumerate(topics):
        s._apply("topics", "ADDED", topic_obj(rec, 10 + i))
    s._publish_now()
    before = s.image
    assert len(before.topics) == 50

    event(s, "topics", topic_obj(new_topic("t50", 2), 100))
    after = s.image
    assert after.changed_since(before) == frozenset({"t50"})
    assert all(after.topics[n] is before.topics[n] for n in before.topics)  # carried over, not rebuilt
    assert after.topic_by_id(after.topics["t50"].topic_id).name == "t50"

    event(s, "topics", {"metadata": {"name": ko.topic_object_name("fleet", "t3"), "resourceVersion": "101"}},
          "DELETED")
    assert s.image.changed_since(after) == frozenset({"t3"})
    assert "t3" not in s.image.topics and s.image.topic_by_id(topics[3].topic_id) is None
    assert s.image.partition_count() == 49 + 2
    assert len(published) == 3


def test_lease_renewals_that_change_nothing_publish_no_image():
    s, published = current_store()
    first = lease_obj(1, 1)
    event(s, "leases", first)
    event(s, "leases", lease_obj(2, 2))
    assert set(s.image.brokers) == {1, 2}
    image, count = s.image, len(published)

    lease = first
    for rv in range(3, 13):  # ten renewals of broker 1's Lease: a new renewTime each
        lease = lease_obj(1, rv, base=lease)
        event(s, "leases", lease)
    assert s.image is image and len(published) == count

    # A change of membership is published, and subscribers look at everything (changed_since None).
    event(s, "leases", lease_obj(1, 20, base=lease, shutting_down=True))
    assert s.image.brokers[1].shutting_down and s.image.changed_since(image) is None
    event(s, "leases", {"metadata": {"name": ko.broker_lease_name("fleet", 2), "resourceVersion": "21"}}, "DELETED")
    assert set(s.image.brokers) == {1}
    assert len(published) == count + 2
