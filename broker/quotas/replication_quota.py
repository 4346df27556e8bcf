"""KIP-73 replication throttles, as Kafka's ReplicationQuotaManager: one quota for what this broker
sends as a leader and one for what it fetches as a follower, each a byte rate over Kafka's sampled
windows (11 of 1 s, `replication.quota.window.*` defaults; measured as Kafka's SimpleRate, so a new
move is held to the rate after one window) and a set of throttled partitions.

- The rate is the dynamic broker config `leader.replication.throttled.rate` /
  `follower.replication.throttled.rate` (this broker's own value, else the cluster default; unset:
  unlimited), from the BrokerConfigStore.
- A partition is throttled on this broker when its topic's `leader.replication.throttled.replicas`
  / `follower.replication.throttled.replicas` is `*` or lists `partition:<this broker id>`.
- Bytes of throttled partitions are recorded whether or not the replica is in sync; but only a
  replica out of the ISR is held back once the rate is over the bound (Kafka's
  shouldLeaderThrottle / shouldFollowerThrottle: throttling an in-sync replica would thrash the ISR).
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from broker.metadata import broker_configs
from broker.metadata.store import MetadataImage
from broker.quotas.quota_stats import RateConfig, SimpleRate
from broker.topic_config import ALL, parse_replicas  # noqa: F401 (the throttled-replicas syntax is the topic config's)

LEADER, FOLLOWER = "leader", "follower"
REPLICAS_KEY = {LEADER: "leader.replication.throttled.replicas", FOLLOWER: "follower.replication.throttled.replicas"}
RATE_KEY = {LEADER: broker_configs.LEADER_RATE, FOLLOWER: broker_configs.FOLLOWER_RATE}


def throttled_partitions(image: MetadataImage, key: str, broker_id: int) -> frozenset[tuple[str, int]]:
    """The partitions the topic config `key` throttles on broker `broker_id`."""
    out: set[tuple[str, int]] = set()
    for name, rec in image.topics.items():
        value = rec.configs.get(key)
        if not value:
            continue
        try:
            parsed = parse_replicas(value)
        except ValueError:
            continue  # refused when set (topic_config); an older value that does not parse throttles nothing
        if parsed == ALL:
            out.update((name, p) for p in range(rec.partitions))
        else:
            out.update((name, p) for p, b in parsed if b == broker_id)
    return frozenset(out)


class ReplicationQuota:
    """One side's quota: the bound (None: unlimited), the throttled partitions and the measured rate."""

    def __init__(self, side: str, config: RateConfig = RateConfig()) -> None:
        self.side = side
        self.bound: float | None = None
        self.partitions: frozenset[tuple[str, int]] = frozenset()
        self.rate = SimpleRate(config)
        self.throttled_bytes = 0  # bytes of throttled partitions moved (metrics)
        self.held_back = 0  # partition reads left out because the quota was exceeded (metrics)

    @staticmethod
    def _now_ms() -> int:
        return int(time.monotonic() * 1000)

    def is_throttled(self, tp: tuple[str, int]) -> bool:
        return tp in self.partitions

    def is_exceeded(self, now_ms: int | None = None) -> bool:
        if self.bound is None:
            return False
        return self.rate.measure(self._now_ms() if now_ms is None else now_ms) > self.bound

    def should_throttle(self, tp: tuple[str, int], in_sync: bool) -> bool:
        """Kafka's rule: a throttled partition of a replica out of the ISR, while over the bound."""
        if in_sync or tp not in self.partitions or not self.is_exceeded():
            return False
        self.held_back += 1
        return True

    def record(self, size: int, now_ms: int | None = None) -> None:
        if size > 0:
            self.rate.record(size, self._now_ms() if now_ms is None else now_ms)
            self.throttled_bytes += size

    def measured(self) -> float:
        return self.rate.measure(self._now_ms())


class ReplicationQuotas:
    """Both sides for one broker, kept current from the dynamic broker configs and the topics' configs."""

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.leader = ReplicationQuota(LEADER)
        self.follower = ReplicationQuota(FOLLOWER)

    def sides(self) -> tuple[ReplicationQuota, ReplicationQuota]:
        return self.leader, self.follower

    def update_rates(self, configs: Mapping[str, Mapping[str, str]]) -> None:
        for q in self.sides():
            found = broker_configs.effective(configs, self.broker_id, RATE_KEY[q.side])
            q.bound = float(found[0]) if found is not None else None

    def on_image(self, _old: MetadataImage, new: MetadataImage) -> None:
        """MetadataStore subscriber: topic configs may have changed."""
        self.update_topics(new)

    def update_topics(self, image: MetadataImage) -> None:
        for q in self.sides():
            q.partitions = throttled_partitions(image, REPLICAS_KEY[q.side], self.broker_id)
