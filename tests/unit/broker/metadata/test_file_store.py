"""The local-file backend (one broker, `make broker`): the shared contract, and what only it does."""

import dataclasses

import pytest

from broker.metadata.file_store import FileMetadataStore
from broker.metadata.store import PartitionState, new_topic
from tests.support.metadata_contract import MetadataStoreContract


class TestFileStore(MetadataStoreContract):
    @pytest.fixture
    async def store(self, tmp_path):
        s = FileMetadataStore(tmp_path, "cluster-a")
        await s.start()
        yield s
        await s.close()


async def test_survives_reopen(tmp_path):
    s = FileMetadataStore(tmp_path, "c")
    t = await s.create_topic(new_topic("kept", 2, configs={"retention.ms": "1000"}))
    t = await s.update_topic(dataclasses.replace(t, assignment=(PartitionState(1, 3, (1,), (1,)),) * 2))
    again = FileMetadataStore(tmp_path, "c")
    assert again.image.topics["kept"] == t
    assert again.image.topic_by_id(t.topic_id) == t


async def test_no_partition_limit_of_its_own(tmp_path):
    assert FileMetadataStore(tmp_path, "c").max_partitions(3) is None


# -- the journal: what a write costs, and what a crash leaves --------------------------------

import asyncio  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402

from broker.metadata import file_store  # noqa: E402
from broker.metadata.file_store import FILE_NAME, JOURNAL_NAME  # noqa: E402


def bytes_written_by_this_process() -> int:
    """write()/pwrite() bytes of this process, from the kernel: the store cannot misreport them."""
    for line in open("/proc/self/io"):
        if line.startswith("wchar:"):
            return int(line.split()[1])
    raise AssertionError("no wchar in /proc/self/io")


async def create_assigned(store, name, partitions=1):
    """A topic as a broker creates it: the create, then the controller's assignment write."""
    t = await store.create_topic(new_topic(name, partitions))
    return await store.update_topic(dataclasses.replace(
        t, assignment=tuple(PartitionState(1, 0, (1,), (1,)) for _ in range(partitions))))


def records(store):
    return {n: (t.topic_id, t.partitions, t.configs, t.assignment, t.version) for n, t in store.image.topics.items()}


async def test_a_write_costs_the_size_of_the_change_not_of_the_topic_count(tmp_path, monkeypatch):
    """Before the journal every create rewrote the whole file (and fsync'd it): creating the
    1,000th topic wrote 1,000 topics. Now a write appends one line and fsyncs once; the snapshot
    is rewritten only when the journal has grown as large as it, so the bytes written per topic
    stay flat however many topics exist. Bytes are the kernel's count, fsyncs the real calls."""
    fsyncs = [0]
    real_fsync = os.fsync

    def counted_fsync(fd):
        fsyncs[0] += 1
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counted_fsync)
    store = FileMetadataStore(tmp_path, "c")
    costs = []  # (bytes this process wrote, fsyncs) per topic: its create and its assignment
    for i in range(1500):
        before, synced = bytes_written_by_this_process(), fsyncs[0]
        await create_assigned(store, f"topic-{i:05d}")
        costs.append((bytes_written_by_this_process() - before, fsyncs[0] - synced))
    typical = sorted(b for b, _ in costs)[len(costs) // 2]  # two journal lines, about 400 bytes
    assert typical < 1000, typical
    # The 1,500th topic costs what the 10th did: two lines, two fsyncs ...
    p90 = lambda xs: sorted(xs)[int(0.9 * len(xs))]  # noqa: E731
    assert p90([b for b, _ in costs[-100:]]) <= p90([b for b, _ in costs[10:110]]) + 64
    assert p90([f for _, f in costs[-100:]]) == 2
    # ... and compactions are rare and geometric: all the bytes of 1,500 topics are a few times
    # what their lines take (rewriting the file per write made it ~750 times).
    total = sum(b for b, _ in costs)
    assert total < 6 * typical * len(costs), (total, typical)
    assert sum(b for b, _ in costs[750:]) < 4 * typical * 750
    assert sum(f for _, f in costs) < 2 * len(costs) + 40
    again = FileMetadataStore(tmp_path, "c")
    assert records(again) == records(store) and len(again.image.topics) == 1500


async def test_concurrent_writes_share_an_fsync(tmp_path):
    store = FileMetadataStore(tmp_path, "c")
    await store.create_topic(new_topic("first", 1))
    fsyncs = store.fsyncs
    await asyncio.gather(*(store.create_topic(new_topic(f"t{i}", 1)) for i in range(200)))
    assert len(store.image.topics) == 201
    assert store.fsyncs - fsyncs < 50, store.fsyncs - fsyncs  # group commit, not 200 fsyncs
    assert len(FileMetadataStore(tmp_path, "c").image.topics) == 201


async def test_restart_keeps_thousands_of_topics_crash_or_clean_stop(tmp_path):
    store = FileMetadataStore(tmp_path, "c")
    for i in range(3000):
        await create_assigned(store, f"t{i}", partitions=1 + i % 3)
    for i in range(0, 3000, 7):
        await store.delete_topic(f"t{i}")
    grown = await store.update_topic(dataclasses.replace(store.image.topics["t1"], partitions=9))
    expected = records(store)
    assert len(expected) == 3000 - len(range(0, 3000, 7))
    # A crash: no close(); part of it is in the snapshot, the rest in the journal.
    assert (tmp_path / JOURNAL_NAME).stat().st_size > 0
    crashed = FileMetadataStore(tmp_path, "c")
    assert records(crashed) == expected
    assert crashed.image.topic_by_id(grown.topic_id).partitions == 9
    # A clean stop leaves everything in the snapshot and an empty journal.
    await crashed.close()
    assert (tmp_path / JOURNAL_NAME).stat().st_size == 0
    assert len(json.loads((tmp_path / FILE_NAME).read_text())["topics"]) == len(expected)
    assert records(FileMetadataStore(tmp_path, "c")) == expected


async def test_a_write_torn_by_a_crash_is_dropped_and_every_whole_one_recovered(tmp_path):
    store = FileMetadataStore(tmp_path, "c")
    for i in range(20):
        await create_assigned(store, f"t{i}")
    await store.delete_topic("t3")
    expected = records(store)
    journal = tmp_path / JOURNAL_NAME
    whole = journal.read_bytes()
    await store.create_topic(new_topic("torn", 4, configs={"retention.ms": "1"}))
    last_line = journal.read_bytes()[len(whole):]
    assert last_line.endswith(b"\n") and b"torn" in last_line
    for cut in (1, len(last_line) // 2, len(last_line) - 1):
        journal.write_bytes(whole + last_line[:cut])  # the crash hit in the middle of the append
        recovered = FileMetadataStore(tmp_path, "c")
        assert records(recovered) == expected, cut
        assert journal.read_bytes() == whole  # the torn tail is cut off, so appends start clean
    # A whole-looking line whose checksum fails (a torn page) is dropped the same way.
    journal.write_bytes(whole + last_line.replace(b'"torn"', b'"tOrn"'))
    assert records(FileMetadataStore(tmp_path, "c")) == expected
    # The recovered store goes on writing, and that survives the next restart.
    recovered = FileMetadataStore(tmp_path, "c")
    await recovered.create_topic(new_topic("after", 2))
    again = FileMetadataStore(tmp_path, "c")
    assert set(again.image.topics) == set(expected) | {"after"}


async def test_a_crash_between_snapshot_and_journal_truncation_loses_and_doubles_nothing(tmp_path):
    store = FileMetadataStore(tmp_path, "c")
    for i in range(50):
        await create_assigned(store, f"t{i}")
    await store.delete_topic("t7")
    await store.create_topic(new_topic("t7", 5))  # deleted and made again: replay order matters
    expected = records(store)
    journal = (tmp_path / JOURNAL_NAME).read_bytes()
    await store.close()  # compacts: the snapshot now holds all of it, the journal is empty
    (tmp_path / JOURNAL_NAME).write_bytes(journal)  # as if the truncation had not happened
    assert records(FileMetadataStore(tmp_path, "c")) == expected


async def test_a_metadata_file_from_before_the_journal_is_read_as_the_snapshot(tmp_path):
    """A broker upgraded in place starts with the topics its old `flotilla-metadata.json` holds."""
    old = {"version": 1, "cluster_id": "c", "topics": [
        {"name": "orders", "id": "6c8d1e4e-9f0a-4a59-9a43-41a7c5e0d2b1", "partitions": 2, "replication_factor": 1,
         "configs": {"retention.ms": "60000"}, "version": 2,
         "assignment": [{"leader": 1, "leader_epoch": 0, "replicas": [1], "isr": [1]},
                        {"leader": 1, "leader_epoch": 3, "replicas": [1], "isr": [1]}]},
        {"name": "pending", "id": "0b0c86a4-8d8b-4c44-b0f8-0c3d7a9a2b11", "partitions": 1}]}
    (tmp_path / FILE_NAME).write_text(json.dumps(old))
    store = FileMetadataStore(tmp_path, "c")
    orders = store.image.topics["orders"]
    assert (str(orders.topic_id), orders.partitions, orders.configs, orders.version) == (
        old["topics"][0]["id"], 2, {"retention.ms": "60000"}, 2)
    assert orders.assignment[1] == PartitionState(1, 3, (1,), (1,))
    assert store.image.topics["pending"].assignment is None
    await store.update_topic(dataclasses.replace(orders, partitions=3))
    assert FileMetadataStore(tmp_path, "c").image.topics["orders"].partitions == 3


async def test_a_failed_append_publishes_nothing_and_leaves_the_journal_whole(tmp_path, monkeypatch):
    store = FileMetadataStore(tmp_path, "c")
    await store.create_topic(new_topic("kept", 1))
    size = (tmp_path / JOURNAL_NAME).stat().st_size
    real_fsync = os.fsync

    def full_disk(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(file_store.os, "fsync", full_disk)
    with pytest.raises(OSError):
        await store.create_topic(new_topic("lost", 1))
    assert "lost" not in store.image.topics
    assert (tmp_path / JOURNAL_NAME).stat().st_size == size
    monkeypatch.setattr(file_store.os, "fsync", real_fsync)
    await store.create_topic(new_topic("lost", 1))  # the name was not left taken
    assert set(FileMetadataStore(tmp_path, "c").image.topics) == {"kept", "lost"}


async def test_a_reassignment_in_progress_survives_reopen(tmp_path):
    s = FileMetadataStore(tmp_path, "c")
    t = await s.create_topic(new_topic("moving", 1))
    t = await s.update_topic(dataclasses.replace(t, assignment=(PartitionState(1, 3, (2, 1), (1,), (2,), (1,)),)))
    assert FileMetadataStore(tmp_path, "c").image.topics["moving"] == t
