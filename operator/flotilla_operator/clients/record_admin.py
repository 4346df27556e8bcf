"""One RecordDeletion run against a cluster, through confluent-kafka's AdminClient.

The AdminClient routes each call to the partition leaders and group coordinators, as
`kafka-delete-records.sh` does: ListOffsets (earliest, latest, by timestamp), DescribeGroups and
OffsetFetch for `consumedBy`, then DeleteRecords. What to ask for is decided by the pure functions
of builders/record_deletion.py; this module only fetches and sends. It is blocking (librdkafka):
the handler runs it in a thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ..api.record_deletion import RecordDeletionSpec
from ..builders import record_deletion as rd
from .kafka_admin import PLAINTEXT, AdminAuth

CLIENT_ID = "flotilla-operator"
TIMEOUT_S = 15.0
# How long the brokers may wait for the low watermark (every in-sync replica) to reach the target.
DELETE_TIMEOUT_S = 30.0


@dataclass
class RunResult:
    """What one run did: the status rows and, when it stopped or a partition failed, why."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    deleted: int = 0
    error: rd.PlanError | None = None


def client_settings(bootstrap: str, auth: AdminAuth = PLAINTEXT) -> dict[str, Any]:
    """librdkafka settings for the cluster: SCRAM as the operator's user when `auth` says SASL
    (clients/credentials.py), TLS with the cluster's CA when it says SSL."""
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "client.id": CLIENT_ID,
                            "socket.timeout.ms": int(TIMEOUT_S * 1000), "allow.auto.create.topics": False,
                            "security.protocol": auth.security_protocol}
    if auth.sasl:
        conf.update({"sasl.mechanism": auth.mechanism, "sasl.username": auth.username,
                     "sasl.password": auth.password})
    if auth.tls and auth.ca_pem:
        conf["ssl.ca.pem"] = auth.ca_pem
    return conf


def _admin(bootstrap: str, auth: AdminAuth) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(client_settings(bootstrap, auth))


def _wait(future: Any, what: str, timeout: float = TIMEOUT_S) -> Any:
    from confluent_kafka import KafkaException

    try:
        return future.result(timeout=timeout)
    except KafkaException as exc:
        err = exc.args[0]
        raise rd.PlanError(rd.error_reason(err.name()), f"{what}: {err.name()}: {err.str()}") from None
    except Exception as exc:  # concurrent.futures.TimeoutError and friends
        raise rd.PlanError("Unreachable", f"{what}: {exc or type(exc).__name__}") from None


def _partition_count(admin: Any, topic: str) -> int:
    from confluent_kafka import KafkaException

    try:
        md = admin.list_topics(topic=topic, timeout=TIMEOUT_S)
    except KafkaException as exc:
        raise rd.PlanError("Unreachable", f"metadata of topic {topic}: {exc.args[0].str()}") from None
    t = md.topics.get(topic)
    if t is None or t.error is not None and t.error.name() in ("UNKNOWN_TOPIC_OR_PART", "UNKNOWN_TOPIC_OR_PARTITION", "_UNKNOWN_TOPIC"):
        raise rd.PlanError("TopicNotFound", f"spec.topic: topic {topic} does not exist")
    if t.error is not None:
        raise rd.PlanError("Unreachable", f"metadata of topic {topic}: {t.error.str()}")
    return len(t.partitions)


def _list_offsets(admin: Any, topic: str, specs: dict[int, Any]) -> dict[int, int]:
    from confluent_kafka import TopicPartition

    if not specs:
        return {}
    futures = admin.list_offsets({TopicPartition(topic, p): s for p, s in specs.items()},
                                 request_timeout=TIMEOUT_S)
    return {tp.partition: int(_wait(f, f"ListOffsets {topic}-{tp.partition}").offset) for tp, f in futures.items()}


def _offsets(admin: Any, topic: str, partitions: list[int]) -> dict[int, rd.Offsets]:
    from confluent_kafka.admin import OffsetSpec

    starts = _list_offsets(admin, topic, {p: OffsetSpec.earliest() for p in partitions})
    ends = _list_offsets(admin, topic, {p: OffsetSpec.latest() for p in partitions})
    return {p: rd.Offsets(starts[p], ends[p]) for p in partitions}


def _by_timestamp(admin: Any, topic: str, when: datetime, offsets: dict[int, rd.Offsets]) -> dict[int, int]:
    from confluent_kafka.admin import OffsetSpec

    ms = rd.timestamp_ms(when)
    found = _list_offsets(admin, topic, {p: OffsetSpec.for_timestamp(ms) for p in offsets})
    return rd.timestamp_targets(found, offsets)


def _check_groups(admin: Any, groups: list[str]) -> None:
    """Every group must exist: an unknown one would commit nothing and must never read as 'all'."""
    from confluent_kafka import KafkaException

    missing = []
    for group, future in admin.describe_consumer_groups(groups, request_timeout=TIMEOUT_S).items():
        try:
            desc = future.result(timeout=TIMEOUT_S)
        except KafkaException as exc:
            if exc.args[0].name() == "GROUP_ID_NOT_FOUND":
                missing.append(group)
                continue
            raise rd.PlanError("Unreachable", f"DescribeGroups {group}: {exc.args[0].str()}") from None
        if str(getattr(desc.state, "name", desc.state)).upper() == "DEAD":
            missing.append(group)
    if missing:
        raise rd.PlanError("GroupNotFound",
                           f"spec.before.consumedBy: consumer group(s) {', '.join(sorted(missing))} do not exist")


def _committed(admin: Any, groups: list[str], topic: str, partitions: list[int]) -> dict[str, dict[int, int | None]]:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    _check_groups(admin, groups)
    out: dict[str, dict[int, int | None]] = {}
    for group in groups:  # librdkafka fetches one group per request
        request = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in partitions])]
        futures = admin.list_consumer_group_offsets(request, request_timeout=TIMEOUT_S)
        answer = _wait(futures[group], f"OffsetFetch {group}")
        out[group] = {tp.partition: (tp.offset if tp.offset >= 0 and tp.error is None else None)
                      for tp in answer.topic_partitions}
    return out


def _targets(admin: Any, spec: RecordDeletionSpec, partitions: list[int], offsets: dict[int, rd.Offsets],
             now: datetime) -> tuple[dict[int, int], dict[int, str]]:
    before, skipped = spec.before, {}
    if before.offset is not None:
        targets = {p: before.offset for p in partitions}
    elif before.timestamp is not None:
        targets = _by_timestamp(admin, spec.topic, before.timestamp, offsets)
    else:
        targets, skipped = rd.consumed_targets(_committed(admin, list(before.consumed_by or ()), spec.topic, partitions),
                                               partitions)
    if spec.keep is not None and spec.keep.records is not None:
        targets = rd.keep_records(targets, spec.keep.records)
    elif spec.keep is not None and spec.keep.duration is not None:
        bounds = _by_timestamp(admin, spec.topic, now - rd.parse_duration(spec.keep.duration), offsets)
        targets = rd.keep_newer_than(targets, bounds)
    return targets, skipped


def _delete(admin: Any, topic: str, requests: dict[int, int]) -> tuple[dict[int, int], dict[int, tuple[str, str]]]:
    from confluent_kafka import KafkaException, TopicPartition

    if not requests:
        return {}, {}
    futures = admin.delete_records([TopicPartition(topic, p, o) for p, o in requests.items()],
                                   request_timeout=DELETE_TIMEOUT_S + TIMEOUT_S,
                                   operation_timeout=DELETE_TIMEOUT_S)
    lows, errors = {}, {}
    for tp, future in futures.items():
        try:
            lows[tp.partition] = int(future.result(timeout=DELETE_TIMEOUT_S + 2 * TIMEOUT_S).low_watermark)
        except KafkaException as exc:
            err = exc.args[0]
            errors[tp.partition] = (err.name(), f"{err.name()}: {err.str()}")
        except Exception as exc:
            errors[tp.partition] = ("Unreachable", f"{exc or type(exc).__name__}")
    return lows, errors


def run(bootstrap: str, spec: RecordDeletionSpec, now: datetime | None = None,
        auth: AdminAuth = PLAINTEXT) -> RunResult:
    """Resolve the policy and delete; errors that stop the run come back in RunResult.error."""
    now = now or datetime.now(timezone.utc)
    admin = _admin(bootstrap, auth)
    result = RunResult()
    try:
        partitions = rd.chosen_partitions(spec, _partition_count(admin, spec.topic))
        offsets = _offsets(admin, spec.topic, partitions)
        targets, skipped = _targets(admin, spec, partitions, offsets, now)
        todo = rd.plan(targets, offsets, skipped)
        lows, failed = _delete(admin, spec.topic, todo.requests)
        errors = {**todo.skipped, **{p: msg for p, (_, msg) in failed.items()}}
        if failed:
            # The leader may have moved its log start although the wait timed out: read it again.
            after = _offsets(admin, spec.topic, sorted(failed))
            lows.update({p: o.log_start for p, o in after.items()})
        result.rows = rd.partition_rows(partitions, offsets, lows, errors)
        result.deleted = sum(r["recordsDeleted"] for r in result.rows)
        if failed:
            name = next(iter(sorted(failed.items())))[1][0]
            listed = ", ".join(f"{p} ({msg})" for p, (_, msg) in sorted(failed.items()))
            result.error = rd.PlanError(rd.error_reason(name), f"DeleteRecords failed on partition(s) {listed}")
    except rd.PlanError as exc:
        # Without its traceback: the frames would keep the AdminClient (and its threads) alive.
        result.error = exc.with_traceback(None)
    return result
