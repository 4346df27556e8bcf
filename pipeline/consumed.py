"""What the pipeline has consumed for good, committed as a consumer group's offsets.

Spark's Kafka source keeps its offsets in the checkpoint, not in a consumer group. A raw record
may be deleted once every query has committed a micro-batch past it: after each progress report
(sent after the batch's commit), the minimum end offset per partition over all queries is safe.
The pipeline commits that minimum to a consumer group (`--commit-group`, default
`flotilla-pipeline`), so that a RecordDeletion resource naming the group, or any tool that reads
group offsets (lag monitors, `kafka-consumer-groups`), sees what the pipeline has finished with.
Nothing reads these offsets back: restarts resume from the checkpoint.
"""

from __future__ import annotations

Offsets = dict[str, dict[str, int]]  # topic -> partition (as Spark writes it, a string) -> offset


class ConsumedOffsets:
    """Per query, the end offsets of its last committed batch; `safe()` is their minimum."""

    def __init__(self, queries: list[str]):
        self.by_query: dict[str, Offsets] = {q: {} for q in queries}

    def update(self, query: str, end_offsets: Offsets) -> None:
        if end_offsets:
            self.by_query[query] = end_offsets

    def forget(self, query: str) -> None:
        """A participant that holds nothing back any more (catch-up ranges all done)."""
        self.by_query.pop(query, None)

    def safe(self) -> Offsets:
        """Offsets every query has passed; empty until every query has reported."""
        if any(not offsets for offsets in self.by_query.values()):
            return {}
        out: Offsets = {}
        first, *rest = self.by_query.values()
        for topic, parts in first.items():
            for partition, offset in parts.items():
                others = [o.get(topic, {}).get(partition) for o in rest]
                if any(x is None for x in others):
                    continue
                out.setdefault(topic, {})[partition] = min([int(offset), *(int(x) for x in others)])
        return out


class GroupCommitter:
    """Commits offsets to a consumer group without joining it (a standalone commit)."""

    def __init__(self, bootstrap: str, group: str):
        from confluent_kafka import Consumer

        self.group = group
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
        self.committed: Offsets = {}

    def commit(self, offsets: Offsets) -> bool:
        """Commit what moved forward; True if anything was committed."""
        from confluent_kafka import TopicPartition

        moved = [
            TopicPartition(topic, int(partition), offset)
            for topic, parts in offsets.items() for partition, offset in parts.items()
            if offset > self.committed.get(topic, {}).get(partition, -1)
        ]
        if not moved:
            return False
        self.consumer.commit(offsets=moved, asynchronous=False)
        for tp in moved:
            self.committed.setdefault(tp.topic, {})[str(tp.partition)] = tp.offset
        return True

    def close(self) -> None:
        self.consumer.close()


def committed(bootstrap: str, group: str, topic: str, partitions: int, timeout: float = 10.0) -> dict[int, int]:
    """The group's committed offsets for `topic` (partition -> offset; -1001 where none)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=timeout)
        return {tp.partition: tp.offset for tp in got}
    finally:
        c.close()
