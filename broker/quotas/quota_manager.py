"""KIP-13 client quotas: who a request counts against, how fast they go, how long they wait.

As Kafka's ClientQuotaManager: each request is recorded against the quota entity that governs
its (user, client-id); if the recorded rate is over the bound, the answer carries a throttle time
(the KIP's delay formula, `quota_stats.throttle_time_ms`) and the connection is muted for that
long *after* the response is sent (KIP-219), so the client learns the delay at once and backs off.

Three managers, one per quota type: produce bytes (request size), fetch bytes (response size),
and request time as a percentage of one event loop (KIP-124; Kafka: of one I/O thread).

Which entity governs a client is Kafka's precedence (DefaultQuotaCallback), first match wins,
independently per quota type:

    1. user=<u>, client-id=<c>          5. user=<default>, client-id=<default>
    2. user=<u>, client-id=<default>    6. user=<default>
    3. user=<u>                         7. client-id=<c>
    4. user=<default>, client-id=<c>    8. client-id=<default>

The match also decides what is shared: a client-id default (8) gives every client-id its own
rate with the default's bound; a user quota (3, 6) is shared by all client-ids of that user; with
no quota at all every client shares one unlimited sensor. The user is the connection's principal
name (apis/dispatcher.py puts it in each RequestContext): the SASL user, the mapped certificate subject
on an mTLS listener, or `ANONYMOUS` (Kafka's unauthenticated principal).
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Mapping

from broker.metadata.client_quotas import (CLIENT_ID, CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE,
                                           USER, QuotaEntity, QuotaMap)
from broker.quotas.quota_stats import Rate, RateConfig, bounded_throttle_time_ms, throttle_time_ms

if TYPE_CHECKING:
    from broker.config import BrokerConfig

ANONYMOUS = "ANONYMOUS"  # Kafka's KafkaPrincipal.ANONYMOUS name: the user of every unauthenticated connection
INACTIVE_SENSOR_EXPIRY_MS = 3600 * 1000  # Kafka drops a client's quota sensors after an idle hour
_EXPIRY_CHECK_MS = 60 * 1000
NANOS_TO_PERCENTAGE_PER_SECOND = 100.0 / 1e9  # ClientRequestQuotaManager.NanosToPercentagePerSecond


class QuotaType(enum.Enum):
    PRODUCE = PRODUCER_BYTE_RATE
    FETCH = CONSUMER_BYTE_RATE
    REQUEST = REQUEST_PERCENTAGE

    @property
    def label(self) -> str:
        return {"producer_byte_rate": "produce", "consumer_byte_rate": "fetch", "request_percentage": "request"}[self.value]


@dataclass(frozen=True)
class QuotaConfig:
    """Kafka's ClientQuotaManagerConfig plus Flotilla's static defaults (Kafka 3 removed its
    quota.producer.default / quota.consumer.default; these play the client-id <default> entity
    when no dynamic quota names that entity)."""

    num_samples: int = 11            # quota.window.num
    window_size_s: int = 1           # quota.window.size.seconds
    producer_default: float | None = None   # flotilla.quota.producer.byte.rate.default
    consumer_default: float | None = None   # flotilla.quota.consumer.byte.rate.default
    request_default: float | None = None    # flotilla.quota.request.percentage.default
    metrics_max_client_ids: int = 100        # flotilla.quota.metrics.max.client.ids

    @classmethod
    def from_broker_config(cls, config: "BrokerConfig") -> "QuotaConfig":
        return cls(num_samples=config["quota.window.num"], window_size_s=config["quota.window.size.seconds"],
                   producer_default=config["flotilla.quota.producer.byte.rate.default"],
                   consumer_default=config["flotilla.quota.consumer.byte.rate.default"],
                   request_default=config["flotilla.quota.request.percentage.default"],
                   metrics_max_client_ids=config["flotilla.quota.metrics.max.client.ids"])

    @property
    def rate_config(self) -> RateConfig:
        return RateConfig(samples=self.num_samples, window_ms=self.window_size_s * 1000)

    def static_quotas(self) -> dict[QuotaEntity, dict[str, float]]:
        values = {k: v for k, v in ((PRODUCER_BYTE_RATE, self.producer_default),
                                    (CONSUMER_BYTE_RATE, self.consumer_default),
                                    (REQUEST_PERCENTAGE, self.request_default)) if v is not None}
        return {QuotaEntity.user_client(client_id=None): values} if values else {}


def precedence(user: str, client_id: str) -> list[tuple[QuotaEntity, tuple[str, str]]]:
    """The eight candidate entities in Kafka's order, each with the metric tags (user, client-id)
    its sensor is keyed by when it matches."""
    u, c = user, client_id
    E = QuotaEntity.user_client
    return [
        (E(u, c), (u, c)),
        (E(u, None), (u, c)),
        (E(u), (u, "")),
        (E(None, c), (u, c)),
        (E(None, None), (u, c)),
        (E(None), (u, "")),
        (E(client_id=c), ("", c)),
        (E(client_id=None), ("", c)),
    ]


def resolve(quotas: QuotaMap, key: str, user: str, client_id: str) -> tuple[QuotaEntity | None, tuple[str, str], float | None]:
    """(matching entity, metric tags, bound) of a client for one quota key; no match: (None, ("", ""), None)."""
    for entity, tags in precedence(user, client_id):
        values = quotas.get(entity)
        if values is not None and key in values:
            return entity, tags, values[key]
    return None, ("", ""), None


@dataclass
class QuotaSensor:
    """The rate of one metric-tag group, its bound, and what it was throttled (Kafka's quota,
    throttle-time and throttled-request sensors of one (user, client-id))."""

    tags: tuple[str, str]
    rate: Rate
    bound: float | None
    label: tuple[str, str]  # (user, client_id) as Prometheus sees them: bounded, see metrics_label
    last_record_ms: int = 0
    throttle_ms_total: int = 0
    throttled_requests: int = 0


def wall_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class ClientQuotaManager:
    """Rates and throttle times of one quota type (Kafka's ClientQuotaManager)."""

    def __init__(self, quota_type: QuotaType, config: QuotaConfig, clock: Callable[[], int] = wall_ms,
                 on_throttle: Callable[[QuotaSensor, int], None] | None = None) -> None:
        self.quota_type = quota_type
        self.config = config
        self.clock = clock
        self.on_throttle = on_throttle
        self._quotas: QuotaMap = config.static_quotas()
        self.sensors: dict[tuple[str, str], QuotaSensor] = {}
        self._resolved: dict[tuple[str, str], QuotaSensor] = {}
        self._last_expiry_ms = 0
        self.enabled = self._any_quota()

    # -- quotas ----------------------------------------------------------------------------------

    def _any_quota(self) -> bool:
        return any(self.quota_type.value in v for v in self._quotas.values())

    def update_quotas(self, dynamic: QuotaMap) -> None:
        """Apply the cluster's dynamic quotas over the static defaults; rebinds existing sensors
        (a client keeps its recorded rate when its bound changes, as Kafka's updateQuotaMetricConfigs)."""
        merged = {e: dict(v) for e, v in self.config.static_quotas().items()}
        for entity, values in dynamic.items():
            merged.setdefault(entity, {}).update(values)
        self._quotas = merged
        self._resolved.clear()
        for sensor in self.sensors.values():
            sensor.bound = self._bound_of_tags(sensor.tags)
            sensor.label = self._label(sensor.tags)
        self.enabled = self._any_quota()

    def _bound_of_tags(self, tags: tuple[str, str]) -> float | None:
        """Kafka's quotaLimit(metricTags): the bound for a tag group, found from the tags alone."""
        user, client_id = tags
        key = self.quota_type.value
        if user and client_id:
            candidates = [QuotaEntity.user_client(user, client_id), QuotaEntity.user_client(user, None),
                          QuotaEntity.user_client(None, client_id), QuotaEntity.user_client(None, None)]
        elif user:
            candidates = [QuotaEntity.user_client(user), QuotaEntity.user_client(None)]
        elif client_id:
            candidates = [QuotaEntity.user_client(client_id=client_id), QuotaEntity.user_client(client_id=None)]
        else:
            return None
        for e in candidates:
            v = self._quotas.get(e)
            if v is not None and key in v:
                return v[key]
        return None

    def quota_limit(self, user: str, client_id: str) -> float | None:
        return resolve(self._quotas, self.quota_type.value, user, client_id)[2]

    def max_value_in_quota_window(self, user: str, client_id: str) -> float | None:
        """Kafka's getMaxValueInQuotaWindow: a fetch never asks for more than bound * (samples - 1)
        windows of bytes, so one response cannot earn a throttle longer than the window set."""
        if not self.enabled:
            return None
        bound = self.quota_limit(user, client_id)
        if bound is None:
            return None
        return bound * (self.config.num_samples - 1) * self.config.window_size_s

    # -- metric labels (bounded cardinality) -----------------------------------------------------

    def _label(self, tags: tuple[str, str]) -> tuple[str, str]:
        """A client-id (or user) gets its own Prometheus label only if a quota entity names it,
        and only for the first `metrics_max_client_ids` such names; every other client is counted
        under "<default>" (governed by a default quota), "<none>" (unlimited) or "<other>" (over the cap)."""
        user, client_id = tags
        if not user and not client_id:
            return ("", "<none>")
        named = any((USER, user) in e.parts or (CLIENT_ID, client_id) in e.parts
                    for e in self._quotas if self.quota_type.value in self._quotas[e])
        if not named:
            return ("<default>" if user else "", "<default>" if client_id else "")
        distinct = {s.label for s in self.sensors.values() if s.label[1] not in ("<default>", "<none>", "<other>")}
        if len(distinct) >= self.config.metrics_max_client_ids and (user, client_id) not in distinct:
            return ("", "<other>")
        return (user, client_id)

    # -- recording -------------------------------------------------------------------------------

    def sensor(self, user: str, client_id: str, now_ms: int) -> QuotaSensor:
        s = self._resolved.get((user, client_id))
        if s is None:
            _, tags, bound = resolve(self._quotas, self.quota_type.value, user, client_id)
            s = self.sensors.get(tags)
            if s is None:
                s = QuotaSensor(tags, Rate(self.config.rate_config), bound, ("", ""))
                s.label = self._label(tags)
                self.sensors[tags] = s
            self._resolved[(user, client_id)] = s
        s.last_record_ms = now_ms
        return s

    def throttle_time(self, observed: float, bound: float, now_ms: int, sensor: QuotaSensor) -> int:
        return throttle_time_ms(observed, bound, sensor.rate.window_size_ms(now_ms))

    def record_and_get_throttle_ms(self, user: str, client_id: str, value: float, now_ms: int | None = None) -> int:
        """Record `value` and return how long the client must wait (0: within its quota).
        As Kafka's Sensor.record(checkQuotas=true): record first, then compare the new rate."""
        if not self.enabled:  # no quota of this type anywhere: nothing to measure against
            return 0
        now = self.clock() if now_ms is None else now_ms
        self._maybe_expire(now)
        s = self.sensor(user, client_id, now)
        s.rate.record(value, now)
        if s.bound is None:
            return 0
        observed = s.rate.measure(now)
        if observed <= s.bound:
            return 0
        return max(0, self.throttle_time(observed, s.bound, now, s))

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int | None = None) -> None:
        """Take back a recorded value (a throttled Fetch sends nothing, so its bytes do not count)."""
        if not self.enabled:
            return
        now = self.clock() if now_ms is None else now_ms
        self.sensor(user, client_id, now).rate.record(-value, now)

    def record_throttle(self, user: str, client_id: str, throttle_ms: int) -> None:
        """Count a request this manager throttled (Kafka's throttle-time sensor)."""
        s = self._resolved.get((user, client_id))
        if s is None or throttle_ms <= 0:
            return
        s.throttle_ms_total += throttle_ms
        s.throttled_requests += 1
        if self.on_throttle is not None:
            self.on_throttle(s, throttle_ms)

    def _maybe_expire(self, now: int) -> None:
        if now - self._last_expiry_ms < _EXPIRY_CHECK_MS:
            return
        self._last_expiry_ms = now
        idle = [t for t, s in self.sensors.items() if now - s.last_record_ms >= INACTIVE_SENSOR_EXPIRY_MS]
        if idle:
            for t in idle:
                del self.sensors[t]
            self._resolved.clear()


class ClientRequestQuotaManager(ClientQuotaManager):
    """KIP-124: time spent handling a client's requests, as a percentage of one event loop per
    second; throttled for at most one quota window (Kafka's boundedThrottleTime)."""

    def __init__(self, config: QuotaConfig, clock: Callable[[], int] = wall_ms, on_throttle=None) -> None:
        super().__init__(QuotaType.REQUEST, config, clock, on_throttle)

    @property
    def max_throttle_ms(self) -> int:
        return self.config.window_size_s * 1000

    def throttle_time(self, observed: float, bound: float, now_ms: int, sensor: QuotaSensor) -> int:
        return bounded_throttle_time_ms(observed, bound, sensor.rate.window_size_ms(now_ms), self.max_throttle_ms)

    def record_nanos_and_get_throttle_ms(self, user: str, client_id: str, nanos: int, now_ms: int | None = None) -> int:
        return self.record_and_get_throttle_ms(user, client_id, nanos * NANOS_TO_PERCENTAGE_PER_SECOND, now_ms)


@dataclass
class QuotaManagers:
    """The broker's three managers, following the cluster's dynamic quotas."""

    config: QuotaConfig
    on_throttle: Callable[[QuotaType, QuotaSensor, int], None] | None = None
    produce: ClientQuotaManager = field(init=False)
    fetch: ClientQuotaManager = field(init=False)
    request: ClientRequestQuotaManager = field(init=False)

    def __post_init__(self) -> None:
        def hook(t: QuotaType):
            return None if self.on_throttle is None else (lambda s, ms: self.on_throttle(t, s, ms))
        self.produce = ClientQuotaManager(QuotaType.PRODUCE, self.config, on_throttle=hook(QuotaType.PRODUCE))
        self.fetch = ClientQuotaManager(QuotaType.FETCH, self.config, on_throttle=hook(QuotaType.FETCH))
        self.request = ClientRequestQuotaManager(self.config, on_throttle=hook(QuotaType.REQUEST))

    def all(self) -> tuple[ClientQuotaManager, ...]:
        return (self.produce, self.fetch, self.request)

    def update_quotas(self, dynamic: QuotaMap) -> None:
        for m in self.all():
            m.update_quotas(dynamic)

    def request_throttle_ms(self, ctx, now_ns: int | None = None) -> int:
        """Record the handler time of `ctx` so far (once per request) against the request quota."""
        if ctx.request_quota_recorded:
            return ctx.request_throttle_ms
        ctx.request_quota_recorded = True
        if not self.request.enabled:
            return 0
        now_ns = time.perf_counter_ns() if now_ns is None else now_ns
        nanos = max(0, now_ns - ctx.started_ns - ctx.waited_ns)
        ms = self.request.record_nanos_and_get_throttle_ms(ctx.user, ctx.client_id, nanos)
        ctx.request_throttle_ms = ms
        self.request.record_throttle(ctx.user, ctx.client_id, ms)
        return ms

    def skip_request_quota(self, ctx) -> None:
        """Kafka does not count acks=0 produce requests against the request quota."""
        ctx.request_quota_recorded = True

    def exempt(self, ctx) -> None:
        """Replication is not a client (Kafka's sendResponseExemptThrottle): a follower's fetch, or
        an inter-broker request from a connection that proved itself a broker's, counts against no
        client quota and is never throttled; the fetch bytes it reads are not recorded either."""
        ctx.request_quota_recorded = True
        ctx.request_throttle_ms = 0

    def bandwidth_throttle_ms(self, manager: ClientQuotaManager, ctx, size: int) -> tuple[int, int]:
        """Record `size` bytes against a byte-rate quota and the handler time against the request
        quota; (bandwidth throttle, request throttle), each counted by its manager when > 0."""
        bandwidth = manager.record_and_get_throttle_ms(ctx.user, ctx.client_id, size)
        manager.record_throttle(ctx.user, ctx.client_id, bandwidth)
        request = self.request_throttle_ms(ctx)
        ctx.throttle_ms = max(ctx.throttle_ms, bandwidth, request)
        return bandwidth, request
