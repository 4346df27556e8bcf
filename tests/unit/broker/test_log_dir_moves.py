"""Moving a replica between log dirs (AlterReplicaLogDirs, KIP-113) on real files: the future
log's copy following the current log (appends, truncation, log start), the swap while appends go
on (every record once, the partition led throughout), Kafka's per-partition errors, and restarts
in the middle of a move or of its swap."""

from __future__ import annotations

import asyncio
import os
import uuid

from kio.schema.errors import ErrorCode

from broker.config import parse_config
from broker.log.future_log import FutureLogCopier, find_future_dirs, parse_future_dir
from broker.log.log import Log, LogConfig
from broker.metadata.store import BrokerRegistration, MetadataImage, PartitionState, TopicRecord
from broker.protocol import records
from broker.replica import log_dir_moves, log_dirs
from broker.replica.purgatory import Purgatory
from broker.replica.replica_manager import ReplicaManager
from flotilla.testenv import kafka_wire

TOPIC_ID = uuid.uuid4()


class ImageStore:
    def __init__(self, *topics: TopicRecord) -> None:
        live = {1: BrokerRegistration(1, "incarnation-1", ())}
        self.image = MetadataImage.build("c", live, 1, {t.name: t for t in topics})


def led_here(name: str = "t", partitions: int = 1) -> TopicRecord:
    return TopicRecord(name, TOPIC_ID, partitions, 1, {}, tuple(PartitionState(1, 0, (1,), (1,)) for _ in range(partitions)), 0)


def manager(tmp_path, store) -> ReplicaManager:
    dirs = f"{tmp_path / 'a'},{tmp_path / 'b'}"
    return ReplicaManager(parse_config({"node.id": "1", "log.dirs": dirs}), store, Purgatory("fetch"), Purgatory("produce"))


def append(rm: ReplicaManager, n: int, start: int = 0) -> None:
    part = rm.get("t", 0)
    for i in range(start, start + n):
        payload = kafka_wire.build_batch([kafka_wire.Msg(None, b"value-%06d" % i)])
        rm.append(part, payload, records.validate_batches(payload, 1 << 20))


def offsets(log: Log) -> list[int]:
    """Every record offset the log holds, from its batches (one record each here)."""
    region = log.read(log.log_start_offset, 1 << 30, upper_bound=log.log_end_offset)
    if region is None:
        return []
    data = os.pread(region.fd, region.length, region.position)
    return [h.base_offset + i for _, h in records.iter_headers(data) for i in range(h.last_offset - h.base_offset + 1)]


async def wait_moved(rm: ReplicaManager, timeout: float = 10.0) -> None:
    async def done():
        while rm.moves.moves or rm.moves._retiring:
            await asyncio.sleep(0.01)
    await asyncio.wait_for(done(), timeout)


def at(offset: int, value: bytes) -> bytes:
    """A leader's one-record batch at `offset` (what a follower appends)."""
    batch = bytearray(kafka_wire.build_batch([kafka_wire.Msg(None, value)]))
    records.rebase(batch, 0, offset)
    return bytes(batch)


# -- the copy, on two Log objects ------------------------------------------------------------

def test_the_copy_follows_appends_truncation_and_log_start(tmp_path):
    source = Log.open(tmp_path / "a" / "t-0", "t", 0, LogConfig())
    for i in range(20):
        source.append_as_follower(at(i, b"v%d" % i))
    copier = FutureLogCopier(Log.open(tmp_path / "b" / "t-0.x-future", "t", 0, LogConfig()))
    source.truncation_listeners.append(copier.source_truncated)
    copier.step(source, max_bytes=1)  # at least one batch per step
    copier.step(source, max_bytes=1)
    assert copier.future.log_end_offset == 2
    while copier.step(source, max_bytes=300):
        pass
    assert copier.caught_up(source)
    # A follower's log cut back (its leader diverged) and written again with other batches:
    source.truncate_to(15)
    for i in range(15, 18):
        source.append_as_follower(at(i, b"new%d" % i))
    assert not copier.caught_up(source)
    while copier.step(source):
        pass
    assert copier.caught_up(source) and copier.future.log_end_offset == 18
    both = [os.pread(r.fd, r.length, r.position) for r in (
        lg.read(0, 1 << 20, upper_bound=18) for lg in (source, copier.future))]
    assert both[0] == both[1]  # byte for byte, the rewritten batches included
    # Emptied and restarted further on (a follower below its leader's log start):
    source.truncate_fully_and_start_at(100)
    source.append_as_follower(at(100, b"late"))
    while copier.step(source):
        pass
    assert copier.future.log_start_offset == 100 and offsets(copier.future) == [100]


def test_future_dir_names_are_kafkas(tmp_path):
    assert parse_future_dir("my-topic-3." + "a" * 32 + "-future") == ("my-topic", 3)
    assert parse_future_dir("my-topic-3") is None and parse_future_dir("t-0." + "a" * 32 + "-delete") is None
    (tmp_path / ("t-1." + "0" * 32 + "-future")).mkdir()
    assert find_future_dirs([tmp_path]) == [("t", 1, tmp_path / ("t-1." + "0" * 32 + "-future"))]


# -- a move on a ReplicaManager ----------------------------------------------------------------

async def test_a_move_under_appends_keeps_every_record_once_and_swaps(tmp_path, monkeypatch):
    monkeypatch.setattr(log_dir_moves, "STEP_BYTES", 200)  # many small steps, appends in between
    store = ImageStore(led_here())
    rm = manager(tmp_path, store)
    rm.load()
    a, b = rm.log_dirs
    part = rm.get("t", 0)
    start_dir = part.log.directory.parent
    other = b if start_dir == a else a
    append(rm, 200)
    assert rm.moves.alter("t", 0, str(other)) == ErrorCode.none
    assert rm.moves.alter("t", 0, str(other)) == ErrorCode.none  # asked again: the same move
    [(name, index, future_dir)] = find_future_dirs(rm.log_dirs)
    assert (name, index, future_dir.parent) == ("t", 0, other)
    assert rm.cleaner.paused(("t", 0))  # not cleaned while it moves, as Kafka pauses its cleaning
    seen_future = False
    for i in range(200, 400):  # appends interleaved with the copy
        append(rm, 1, start=i)
        described = log_dirs.describe(rm.log_dirs, rm.offline_dirs, rm.partitions, None, rm.moves.futures())
        futures = [p for d in described for ps in d.topics.values() for p in ps if p.is_future]
        seen_future = seen_future or bool(futures and rm.moves.moves)
        assert rm.get("t", 0) is part  # served throughout
        await asyncio.sleep(0)
    await wait_moved(rm)
    assert seen_future
    assert part.log.directory == other / "t-0"
    assert not (start_dir / "t-0").exists() and not find_future_dirs(rm.log_dirs)
    assert [e.name for e in start_dir.iterdir() if e.name.startswith("t-0")] == []  # -delete gone too
    assert not rm.cleaner.paused(("t", 0))
    append(rm, 10, start=400)
    assert offsets(part.log) == list(range(410))
    described = log_dirs.describe(rm.log_dirs, rm.offline_dirs, rm.partitions, None, rm.moves.futures())
    where = {d.path: [p.partition for ps in d.topics.values() for p in ps] for d in described}
    assert where == {str(other.absolute()): [0], str(start_dir.absolute()): []}
    rm.close()
    # The next start opens it in its new dir, from the checkpoints written for it there.
    rm2 = manager(tmp_path, store)
    rm2.load()
    assert rm2.partitions[("t", 0)].log.directory == other / "t-0"
    assert offsets(rm2.partitions[("t", 0)].log) == list(range(410))
    rm2.close()


async def test_kafkas_errors(tmp_path):
    store = ImageStore(led_here(), TopicRecord("elsewhere", uuid.uuid4(), 1, 1, {},
                                               (PartitionState(2, 0, (2,), (2,)),), 0))
    rm = manager(tmp_path, store)
    rm.load()
    part = rm.get("t", 0)
    here, other = part.log.directory.parent, next(d for d in rm.log_dirs if d != part.log.directory.parent)
    assert rm.moves.alter("t", 0, str(tmp_path / "c")) == ErrorCode.log_dir_not_found
    assert rm.moves.alter("t", 0, os.path.relpath(other)) == ErrorCode.log_dir_not_found  # compared absolute
    assert rm.moves.alter("t", 0, str(here)) == ErrorCode.none  # already there: nothing to do
    assert not rm.moves.moves
    assert rm.moves.alter("elsewhere", 0, str(other)) == ErrorCode.replica_not_available
    assert rm.moves.alter("nope", 0, str(other)) == ErrorCode.unknown_topic_or_partition
    assert rm.moves.alter("t", 5, str(other)) == ErrorCode.unknown_topic_or_partition
    rm.mark_offline(other, "test")
    assert rm.moves.alter("t", 0, str(other)) == ErrorCode.kafka_storage_error
    rm.close()


async def test_moving_back_to_the_current_dir_cancels_the_move(tmp_path, monkeypatch):
    monkeypatch.setattr(log_dir_moves, "IDLE_S", 60)  # the move would not finish by itself
    monkeypatch.setattr(log_dir_moves, "STEP_BYTES", 1)
    rm = manager(tmp_path, ImageStore(led_here()))
    rm.load()
    append(rm, 50)
    part = rm.get("t", 0)
    here, other = part.log.directory.parent, next(d for d in rm.log_dirs if d != part.log.directory.parent)
    assert rm.moves.alter("t", 0, str(other)) == ErrorCode.none
    await asyncio.sleep(0)
    assert rm.moves.alter("t", 0, str(here)) == ErrorCode.none
    assert not rm.moves.moves and not find_future_dirs(rm.log_dirs)
    assert part.log.directory.parent == here and offsets(part.log) == list(range(50))
    rm.close()


async def test_a_replica_asked_for_before_it_is_assigned_is_created_in_that_dir(tmp_path):
    later = led_here()
    store = ImageStore(TopicRecord("t", TOPIC_ID, 1, 1, {}, (PartitionState(2, 0, (2,), (2,)),), 0))
    rm = manager(tmp_path, store)
    rm.load()
    for target in rm.log_dirs:
        assert rm.moves.alter("t", 0, str(target)) == ErrorCode.replica_not_available
    store.image = MetadataImage.build("c", store.image.brokers, 1, {"t": later})
    rm.apply_image(store.image)
    assert rm.partitions[("t", 0)].log.directory.parent == rm.log_dirs[-1]  # the last one asked
    rm.close()


# -- restarts ----------------------------------------------------------------------------------

async def test_a_restart_mid_move_resumes_it(tmp_path, monkeypatch):
    monkeypatch.setattr(log_dir_moves, "STEP_BYTES", 1)
    monkeypatch.setattr(log_dir_moves, "IDLE_S", 60)
    store = ImageStore(led_here())
    rm = manager(tmp_path, store)
    rm.load()
    append(rm, 100)
    part = rm.get("t", 0)
    other = next(d for d in rm.log_dirs if d != part.log.directory.parent)
    assert rm.moves.alter("t", 0, str(other)) == ErrorCode.none
    for _ in range(10):
        await asyncio.sleep(0)
    assert rm.moves.moves  # still copying
    rm.close()
    assert len(find_future_dirs(rm.log_dirs)) == 1
    monkeypatch.setattr(log_dir_moves, "STEP_BYTES", 1 << 20)
    rm2 = manager(tmp_path, store)
    rm2.load()
    assert rm2.partitions[("t", 0)].log.directory.parent != other  # the current one serves meanwhile
    await wait_moved(rm2)
    assert rm2.partitions[("t", 0)].log.directory == other / "t-0"
    assert offsets(rm2.partitions[("t", 0)].log) == list(range(100))
    assert not find_future_dirs(rm2.log_dirs)
    rm2.close()


async def test_a_restart_during_the_swap_keeps_the_moved_log_only(tmp_path):
    """A crash after the current dir was renamed away and before the future dir took its name."""
    store = ImageStore(led_here())
    rm = manager(tmp_path, store)
    rm.load()
    append(rm, 30)
    part = rm.get("t", 0)
    current = part.log.directory
    other = next(d for d in rm.log_dirs if d != current.parent)
    copier = FutureLogCopier(Log.open(other / ("t-0." + "1" * 32 + "-future"), "t", 0, part.log.config))
    (copier.future.directory / "partition.metadata").write_bytes((current / "partition.metadata").read_bytes())
    while copier.step(part.log):
        pass
    copier.finish(part.log)
    rm.close()
    os.rename(current, current.parent / ("t-0." + "2" * 32 + "-delete"))
    rm2 = manager(tmp_path, store)
    rm2.load()
    assert rm2.partitions[("t", 0)].log.directory == other / "t-0"
    assert offsets(rm2.partitions[("t", 0)].log) == list(range(30))
    leftovers = [e.name for d in rm2.log_dirs for e in d.iterdir() if e.name.startswith("t-0") and e.name != "t-0"]
    assert leftovers == [] and not (current.parent / "t-0").exists()
    rm2.close()


async def test_a_followed_replica_moves_while_the_fetcher_appends_and_truncates(tmp_path, monkeypatch):
    monkeypatch.setattr(log_dir_moves, "STEP_BYTES", 1)  # one batch per step
    store = ImageStore(TopicRecord("t", TOPIC_ID, 1, 2, {}, (PartitionState(2, 0, (2, 1), (2, 1)),), 0))
    rm = manager(tmp_path, store)
    rm.load()
    part = rm.partitions[("t", 0)]
    assert not part.is_leader
    written = {}  # offset -> the batch the log holds there
    for i in range(50):
        written[i] = at(i, b"first-%d" % i)
        rm.append_as_follower(part, written[i])
    other = next(d for d in rm.log_dirs if d != part.log.directory.parent)
    assert rm.moves.alter("t", 0, str(other)) == ErrorCode.none
    future = rm.moves.moves[("t", 0)].future

    async def copied_48():
        while future.log_end_offset < 48:
            await asyncio.sleep(0)
    await asyncio.wait_for(copied_48(), 10)
    # The new leader's log diverged at 45: the fetcher truncates and appends the leader's batches,
    # past what the copy holds, before the copy's next step.
    part.log.truncate_to(45)
    for i in range(45, 80):
        written[i] = at(i, b"second-%d" % i)
        rm.append_as_follower(part, written[i])
    await wait_moved(rm)
    assert part.log.directory == other / "t-0"
    region = part.log.read(0, 1 << 20, upper_bound=part.log.log_end_offset)
    data = os.pread(region.fd, region.length, region.position)
    assert data == b"".join(written[i] for i in range(80))  # byte for byte, the diverged batches replaced
    rm.close()
