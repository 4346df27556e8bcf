"""Topic configs: validation naming the key, the value in force and its source, and the settings
that act on appends (LogAppendTime, message.timestamp.before/after.max.ms)."""

from __future__ import annotations

import datetime
import io
import os
import time

import crc32c
import pytest
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch

from broker import topic_config
from broker.config import load_config
from broker.log.log import InvalidTimestamp, Log, LogConfig
from broker.protocol import records
from broker.replica.replica_manager import log_config_for
from tests.unit.broker.batches import make_batch


@pytest.mark.parametrize("configs,key", [
    ({"retention.ms": "1", "file.delete.delay.ms": "1"}, "file.delete.delay.ms"),
    ({"compression.type": "zstd"}, "compression.type"),
    ({"message.timestamp.type": "Whenever"}, "message.timestamp.type"),
    ({"segment.bytes": str(2**31)}, "segment.bytes"),
    ({"min.insync.replicas": "0"}, "min.insync.replicas"),
    ({"cleanup.policy": "compact,compact"}, "cleanup.policy"),
    ({"preallocate": "true"}, "preallocate"),
    ({"retention.ms": None}, "retention.ms"),
])
def test_invalid_or_unsupported_keys_are_refused_by_name(configs, key):
    with pytest.raises(topic_config.TopicConfigError) as e:
        topic_config.validate(configs)
    assert e.value.key == key and key in str(e.value)


def test_valid_values_are_normalised():
    assert topic_config.validate({"cleanup.policy": "delete,compact", "preallocate": "FALSE", "retention.ms": "-1"}) == {
        "cleanup.policy": "compact,delete", "preallocate": "false", "retention.ms": "-1"}


def test_value_in_force_and_its_source():
    config = load_config(None, ["log.retention.ms=1000", "log.cleaner.min.cleanable.ratio=0.2"])
    entries = {e.name: e for e in topic_config.describe(config, {"segment.ms": "500"})}
    assert (entries["segment.ms"].value, entries["segment.ms"].source) == ("500", topic_config.DYNAMIC_TOPIC_CONFIG)
    assert (entries["retention.ms"].value, entries["retention.ms"].source) == ("1000", topic_config.STATIC_BROKER_CONFIG)
    assert entries["retention.ms"].synonyms == (("log.retention.ms", "1000", topic_config.STATIC_BROKER_CONFIG),)
    assert entries["min.cleanable.dirty.ratio"].value == "0.2"
    assert (entries["retention.bytes"].value, entries["retention.bytes"].source) == ("-1", topic_config.DEFAULT_CONFIG)
    assert entries["segment.ms"].synonyms[0] == ("segment.ms", "500", topic_config.DYNAMIC_TOPIC_CONFIG)
    assert entries["segment.ms"].synonyms[-1][2] == topic_config.DEFAULT_CONFIG
    cfg = log_config_for(config, {"segment.ms": "500", "message.timestamp.type": "LogAppendTime"})
    assert (cfg.segment_ms, cfg.retention_ms, cfg.min_cleanable_dirty_ratio) == (500, 1000, 0.2)
    assert cfg.message_timestamp_type == "LogAppendTime" and cfg.message_timestamp_after_max_ms == 3_600_000


def test_log_append_time_sets_the_attribute_and_max_timestamp(tmp_path):
    lg = Log.open(tmp_path / "t-0", "t", 0, LogConfig(message_timestamp_type="LogAppendTime"))
    data = make_batch([b"a", b"b"], timestamp_ms=1_000_000)
    before = int(time.time() * 1000)
    result = lg.append(data, records.validate_batches(data, 1 << 20))
    stored = os.pread(lg.active.fd, lg.active.size, 0)
    h = records.read_header(stored)
    assert h.attributes & records.ATTR_TIMESTAMP_TYPE
    assert before <= h.max_timestamp == result.log_append_time <= int(time.time() * 1000)
    assert h.base_timestamp == 1_000_000  # records keep their own deltas; readers use the max
    assert crc32c.crc32c(stored[records.ATTRIBUTES_OFFSET:]) == h.crc
    assert lg.active.max_timestamp == h.max_timestamp  # the time index sees the broker's time


def _batch(timestamps_ms: list[int]) -> bytes:
    recs = tuple(Record(attributes=0, timestamp=datetime.datetime.fromtimestamp(t / 1000, tz=datetime.timezone.utc),
                        offset=i, key=None, value=b"v", headers=()) for i, t in enumerate(timestamps_ms))
    buf = io.BytesIO()
    write_new_batch(buf, NewRecordBatch(producer_id=-1, producer_epoch=-1, base_sequence=-1, records=recs, attributes=0))
    return buf.getvalue()


def test_create_time_bounds(tmp_path):
    day = 86_400_000
    lg = Log.open(tmp_path / "t-0", "t", 0, LogConfig(message_timestamp_before_max_ms=day,
                                                      message_timestamp_after_max_ms=3_600_000))
    now = int(time.time() * 1000)
    for bad in ([now + 2 * 3_600_000], [now - 3600_000, now - 2 * day]):  # the second: only a later record is too old
        data = _batch(bad)
        with pytest.raises(InvalidTimestamp):
            lg.append(data, records.validate_batches(data, 1 << 20))
    assert lg.log_end_offset == 0
    data = _batch([now - 3600_000, now + 60_000])
    assert lg.append(data, records.validate_batches(data, 1 << 20)).base_offset == 0


def test_a_stored_value_that_does_not_validate_is_not_in_force():
    """KafkaTopic resources reach the store without CreateTopics' validation: a bad value must
    neither break opening the log nor be reported as the topic's."""
    config = load_config(None, [])
    cfg = log_config_for(config, {"retention.ms": "soon", "segment.ms": "-5", "no.such.key": "1"})
    assert (cfg.retention_ms, cfg.segment_ms) == (config["log.retention.ms"], config["log.roll.ms"])
    entries = {e.name: e for e in topic_config.describe(config, {"retention.ms": "soon"})}
    assert entries["retention.ms"].source == topic_config.DEFAULT_CONFIG
