"""Prometheus metrics of one broker, in its own registry, served over HTTP by metrics_http.

Request rate/latency per API, bytes in/out per topic and open connections are updated as they
happen; per-partition log size and offsets are read from the logs at scrape time (a collector),
so the hot path does no extra work for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from broker.apis.fetch_session import EVICTION_REASONS
from broker.apis.request_stages import STAGES, StageHistograms
from broker.replica.log_dirs import disk_space  # noqa: F401 (the log-dir gauges read it)

if TYPE_CHECKING:
    from broker.apis.fetch_session import FetchSessionCache
    from broker.replica.replica_manager import ReplicaManager
    from broker.security.serving_certificates import ServingCertificate

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
LOOP_LAG_BUCKETS = (0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
STAGE_NAMES = {
    "queue": "flotilla_request_queue_time_seconds", "local": "flotilla_request_local_time_seconds",
    "remote": "flotilla_request_remote_time_seconds", "response_queue": "flotilla_response_queue_time_seconds",
    "send": "flotilla_response_send_time_seconds", "total": "flotilla_request_total_time_seconds",
}
STAGE_HELP = {
    "queue": "From the request read to its handler's start, per API (Kafka: RequestQueueTimeMs)",
    "local": "The handler's own work, waits excluded, per API (Kafka: LocalTimeMs)",
    "remote": "Parked in a purgatory until the event that completes it, per API: followers for an acks=all "
              "produce, an append or max_wait for a fetch (Kafka: RemoteTimeMs)",
    "response_queue": "From the completing event, or the handler's end, until the answer starts out: the event "
                      "loop busy with others, per API (Kafka: ResponseQueueTimeMs)",
    "send": "Writing the answer until the socket drained it, per API (Kafka: ResponseSendTimeMs)",
    "total": "From the request read to its answer sent, per API (Kafka: TotalTimeMs)",
}


class _LogCollector(Collector):
    def __init__(self, replicas: Callable[[], "ReplicaManager | None"]) -> None:
        self._replicas = replicas

    def collect(self) -> Iterable[GaugeMetricFamily]:
        size = GaugeMetricFamily("flotilla_log_size_bytes", "Bytes on disk of a partition's log", labels=["topic", "partition"])
        leo = GaugeMetricFamily("flotilla_log_end_offset", "Next offset to be written in a partition", labels=["topic", "partition"])
        lso = GaugeMetricFamily("flotilla_log_start_offset", "First readable offset of a partition", labels=["topic", "partition"])
        segs = GaugeMetricFamily("flotilla_log_segments", "Segment files of a partition", labels=["topic", "partition"])
        offline = GaugeMetricFamily("flotilla_log_dir_offline",
                                    "1 if a log directory failed and refuses writes (Kafka's offline log dir)", labels=["dir"])
        total = GaugeMetricFamily("flotilla_log_dir_total_bytes",
                                  "Size of the filesystem holding a log directory (KIP-827 TotalBytes)", labels=["dir"])
        usable = GaugeMetricFamily("flotilla_log_dir_usable_bytes",
                                   "Bytes the broker may still write on a log directory's filesystem (KIP-827 UsableBytes)",
                                   labels=["dir"])
        rm = self._replicas()
        if rm is not None:
            for d in rm.log_dirs:
                offline.add_metric([str(d)], 1 if d in rm.offline_dirs else 0)
                space = disk_space(d)
                if space is not None:
                    total.add_metric([str(d)], space[0])
                    usable.add_metric([str(d)], space[1])
            for (topic, partition), p in rm.partitions.items():
                labels = [topic, str(partition)]
                size.add_metric(labels, p.log.size_bytes)
                leo.add_metric(labels, p.log.log_end_offset)
                lso.add_metric(labels, p.log.log_start_offset)
                segs.add_metric(labels, len(p.log.segments))
        yield from (size, leo, lso, segs, offline, total, usable)
        if rm is not None:
            yield from _cleaner_metrics(rm.cleaner)


def _cleaner_metrics(cleaner) -> Iterable[Any]:
    """The log cleaner's work so far (broker/log/cleaner.py)."""
    done = CounterMetricFamily("flotilla_log_cleaner_cleanings", "Compacted logs cleaned")
    done.add_metric([], cleaner.cleanings)
    read = CounterMetricFamily("flotilla_log_cleaner_read_bytes", "Segment bytes the log cleaner read")
    read.add_metric([], cleaner.bytes_read)
    written = CounterMetricFamily("flotilla_log_cleaner_written_bytes", "Segment bytes the log cleaner wrote")
    written.add_metric([], cleaner.bytes_written)
    last = GaugeMetricFamily("flotilla_log_cleaner_last_clean_seconds", "Duration of the last cleaning")
    last.add_metric([], cleaner.last_clean_seconds)
    workers = GaugeMetricFamily("flotilla_log_cleaner_threads",
                                "Log cleaner workers running (log.cleaner.threads, dynamic)")
    workers.add_metric([], len(cleaner.workers))
    throttled = CounterMetricFamily("flotilla_log_cleaner_throttled_seconds",
                                    "Time the log cleaner slept under log.cleaner.io.max.bytes.per.second")
    throttled.add_metric([], cleaner.throttler.throttled_seconds)
    return (done, read, written, last, workers, throttled)


@dataclass(frozen=True, slots=True)
class ApiMetrics:
    requests: Any
    errors: Any
    latency: Any
    stages: StageHistograms


@dataclass(frozen=True, slots=True)
class TopicMetrics:
    bytes_in: Any
    messages_in: Any


class BrokerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("flotilla_requests", "Requests handled, per API", ["api"], registry=r)
        self.request_errors = Counter("flotilla_request_errors", "Requests that raised inside a handler, per API", ["api"], registry=r)
        self.request_latency = Histogram("flotilla_request_latency_seconds", "Time from request parsed to response ready, per API",
                                         ["api"], buckets=LATENCY_BUCKETS, registry=r)
        # Kafka's RequestMetrics (RequestQueueTimeMs ... TotalTimeMs): broker/apis/request_stages.py
        self.request_stages = {stage: Histogram(
            STAGE_NAMES[stage], STAGE_HELP[stage], ["api"], buckets=LATENCY_BUCKETS, registry=r) for stage in STAGES}
        self.loop_lag = Histogram("flotilla_event_loop_lag_seconds",
                                  "How late a timer of the event loop fires (every 100 ms): the time every request "
                                  "ready to run waits for the loop", buckets=LOOP_LAG_BUCKETS, registry=r)
        self.bytes_in = Counter("flotilla_topic_bytes_in", "Record bytes appended, per topic", ["topic"], registry=r)
        self.bytes_out = Counter("flotilla_topic_bytes_out", "Record bytes sent to fetchers, per topic", ["topic"], registry=r)
        self.follower_fetch_bytes = Counter(
            "flotilla_follower_fetch_bytes_out",
            "Record bytes sent to consumers from partitions this broker follows (KIP-392 fetch from follower), "
            "per client rack (\"\" when the consumer names none)", ["client_rack"], registry=r)
        self.messages_in = Counter("flotilla_topic_messages_in", "Records appended, per topic", ["topic"], registry=r)
        self.sendfile_bytes = Counter("flotilla_sendfile_bytes", "Record bytes sent from segment files with sendfile()", registry=r)
        self.connections = Gauge("flotilla_connections", "Open client connections", registry=r)
        self.malformed_frames = Counter("flotilla_malformed_frames", "Connections closed for a malformed or oversized frame", registry=r)
        self.request_memory_used = Gauge("flotilla_request_memory_used_bytes",
                                         "Request bytes held under queued.max.request.bytes; reading stops when the "
                                         "bound is reached (Kafka: MemoryPoolUsed; 0 when unbounded)", registry=r)
        # KIP-227 fetch sessions, with Kafka's meaning (its names in docs/fetch-sessions.md).
        self.fetch_requests = Counter("flotilla_fetch_requests", "Fetch requests by how they relate to sessions: "
                                      "full, incremental, sessionless, session_error", ["kind"], registry=r)
        self.fetch_sessions = Gauge("flotilla_incremental_fetch_sessions",
                                    "Incremental fetch sessions in the cache (Kafka: NumIncrementalFetchSessions)", registry=r)
        self.fetch_session_partitions = Gauge(
            "flotilla_incremental_fetch_partitions_cached",
            "Partitions cached by all incremental fetch sessions (Kafka: NumIncrementalFetchPartitionsCached)", registry=r)
        self.fetch_session_evictions = Counter(
            "flotilla_incremental_fetch_session_evictions",
            "Sessions evicted to make room for another, by reason (idle, follower, larger); not counted "
            "when a client closes its own (Kafka: IncrementalFetchSessionEvictionsPerSec, a rate of the sum)",
            ["reason"], registry=r)
        self.fetch_session_slots = Gauge("flotilla_fetch_session_cache_slots",
                                         "Fetch session cache slots (max.incremental.fetch.session.cache.slots)", registry=r)
        self.fetch_session_slots_used = Gauge("flotilla_fetch_session_cache_slots_used",
                                              "Fetch session cache slots in use", registry=r)
        # Listener security (broker/security/): labels are listener names and mechanisms (PLAIN,
        # SCRAM-*, "TLS" for failed handshakes, "none" before a mechanism was chosen): bounded.
        self.successful_authentications = Counter(
            "flotilla_successful_authentication", "Connections that authenticated (SASL, or a TLS client certificate)",
            ["listener", "mechanism"], registry=r)
        self.failed_authentications = Counter(
            "flotilla_failed_authentication", "Failed authentications: refused SASL exchanges and TLS handshakes",
            ["listener", "mechanism"], registry=r)
        self._replicas: "ReplicaManager | None" = None
        r.register(_LogCollector(lambda: self._replicas))
        self._per_api: dict[str, ApiMetrics] = {}
        self._per_topic: dict[str, TopicMetrics] = {}

    # Children of labelled metrics, looked up once: labels() validates and locks on every call,
    # which showed in profiles of small produce requests.
    def api(self, name: str) -> "ApiMetrics":
        m = self._per_api.get(name)
        if m is None:
            stages = StageHistograms(**{stage: h.labels(name) for stage, h in self.request_stages.items()})
            m = self._per_api[name] = ApiMetrics(self.requests.labels(name), self.request_errors.labels(name),
                                                 self.request_latency.labels(name), stages)
        return m

    def topic(self, name: str) -> "TopicMetrics":
        m = self._per_topic.get(name)
        if m is None:
            m = self._per_topic[name] = TopicMetrics(self.bytes_in.labels(name), self.messages_in.labels(name))
        return m

    def authentications(self, listener: str, mechanism: str, ok: bool) -> None:
        (self.successful_authentications if ok else self.failed_authentications).labels(listener, mechanism).inc()

    def watch_logs(self, replicas: "ReplicaManager") -> None:
        self._replicas = replicas

    def watch_certificates(self, certificates: "Iterable[ServingCertificate]") -> None:
        """The validity of each TLS listener's served certificate (broker/security/serving_certificates.py),
        so that an expiry alert fires from the brokers themselves, with or without the operator."""
        expiry = Gauge("flotilla_broker_certificate_expiry_timestamp_seconds",
                       "When the certificate a TLS listener serves expires (notAfter, Unix time)",
                       ["listener"], registry=self.registry)
        start = Gauge("flotilla_broker_certificate_not_before_timestamp_seconds",
                      "When the certificate a TLS listener serves became valid (notBefore, Unix time); with the "
                      "expiry, its lifetime", ["listener"], registry=self.registry)
        for cert in certificates:
            expiry.labels(cert.listener).set(cert.not_after)
            start.labels(cert.listener).set(cert.not_before)

    def watch_fetch_sessions(self, cache: "FetchSessionCache") -> None:
        """Session gauges read the cache at scrape time; evictions are counted as they happen."""
        self.fetch_sessions.set_function(lambda: len(cache))
        self.fetch_session_slots_used.set_function(lambda: len(cache))
        self.fetch_session_partitions.set_function(lambda: cache.partitions_cached)
        self.fetch_session_slots.set_function(lambda: cache.max_slots)
        evictions = {reason: self.fetch_session_evictions.labels(reason) for reason in EVICTION_REASONS}
        cache.on_eviction = lambda session, reason: evictions[reason].inc()
