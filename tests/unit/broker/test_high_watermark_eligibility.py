"""A follower outside the ISR counts for the high watermark only while its broker may join the ISR
(Kafka's isReplicaIsrEligible: registered, not shutting down). Found with DeleteRecords' fleet test
(issue 20): a follower stopped gracefully fetched once more after the controller had taken it out
of the ISR, so it looked caught up, and acks=all writes waited replica.lag.time.max.ms for it."""

from __future__ import annotations

from broker.metadata.store import PartitionState
from tests.unit.broker.test_replica_roles import ImageStore, batch, manager, topic


def test_a_follower_whose_broker_left_does_not_hold_the_high_watermark(tmp_path):
    store = ImageStore(topic(PartitionState(1, 0, (1, 2, 3), (1, 2, 3))))
    rm = manager(tmp_path, store, lag_ms=60_000)
    rm.apply_image(store.image, chunked=False)
    part = rm.get("t", 0)
    rm.append(part, *batch())
    for follower in (2, 3):
        rm.follower_fetched(part, follower, 1, 0, 0)
    assert part.log.high_watermark == 1
    # broker 2 stops: the controller takes it out of the ISR as its registration goes ...
    store.set(topic(PartitionState(1, 0, (1, 2, 3), (1, 3)), version=1), live=(1, 3))
    rm.apply_image(store.image, chunked=False)
    rm.follower_fetched(part, 2, 1, 0, 0)  # ... and its last fetch, at the log end, arrives after
    rm.append(part, *batch())
    rm.follower_fetched(part, 3, 2, 0, 0)
    assert part.log.high_watermark == 2  # broker 3, the only other in-sync replica, has it

