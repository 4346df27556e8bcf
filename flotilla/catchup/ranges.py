"""Range bookkeeping for the KIP-333 catch-up consumer: pure data, no Kafka.

After a crash the primary consumer jumps to the log end and the gap `[committed, end at recovery)`
becomes a *range token* that a second worker processes beside it. Per partition this module keeps
the primary's committed offset and the list of open ranges, oldest first, each with its own
progress (`next`: everything in `[start, next)` is processed and checkpointed). The whole state of
a partition serialises to one short string that rides in the commit metadata of the primary's
offset, so the token and the primary offset past it are written in the same record (see
docs/catch-up-consumer.md for why that place).

The KIP's rule for `committed()`: every offset before the returned one is checkpointed. With open
ranges that is the first range's `next` (below its start the log was committed before the first
crash; ranges are processed in order), otherwise the primary's committed offset.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: prefix of the commit metadata this library writes; metadata without it means "no ranges"
TOKEN_PREFIX = "kip333/1:"


class RangeTokenError(ValueError):
    """Commit metadata that claims to be a range token but cannot be read."""


@dataclass
class Range:
    """One gap `[start, end)` left by a crash; `[start, next)` of it is processed."""

    start: int
    end: int
    next: int = -1

    def __post_init__(self) -> None:
        if self.next < 0:
            self.next = self.start
        if not (0 <= self.start <= self.next <= self.end):
            raise RangeTokenError(f"bad range {self.start}-{self.end}@{self.next}")

    @property
    def done(self) -> bool:
        return self.next >= self.end

    @property
    def left(self) -> int:
        """Offsets of this range not processed yet."""
        return self.end - self.next

    def __contains__(self, offset: int) -> bool:
        return self.start <= offset < self.end


@dataclass
class PartitionRanges:
    """A partition's primary committed offset and open ranges (in offset order, disjoint)."""

    committed_primary: int
    ranges: list[Range] = field(default_factory=list)

    # -- recovery ---------------------------------------------------------------------------
    def recover(self, end: int) -> int:
        """The owner (re)starts with the log end at `end`: the gap `[committed, end)` becomes a range.

        Returns where the primary starts (`end`, or the committed offset if there is no gap). A
        gap that touches the last open range merges with it (its progress kept), so repeated
        crashes with nothing committed in between do not pile up tokens.
        """
        start = self.committed_primary
        if end <= start:
            return start
        last = self.ranges[-1] if self.ranges else None
        if last is not None and last.end == start:
            last.end = end
        else:
            self.ranges.append(Range(start, end))
        self.committed_primary = end
        return end

    # -- commits ----------------------------------------------------------------------------
    def range_of(self, offset: int) -> Range | None:
        """The open range holding `offset`, if any."""
        for r in self.ranges:
            if offset in r:
                return r
        return None

    def commit(self, offset: int) -> str:
        """Record that everything a worker delivered before `offset` is processed.

        `offset` is the next offset to read (Kafka's commit convention), so the record that was
        processed is `offset - 1`. If that record lies in an open range the range's progress moves
        (and the range goes when done): answers "catchup". Above the primary's committed offset
        that offset moves: answers "primary". Anything else was checkpointed already: "stale".
        Nothing moves backwards.
        """
        r = self.range_of(offset - 1)
        if r is not None:
            r.next = max(r.next, offset)
            if r.done:
                self.ranges.remove(r)
            return "catchup"
        if offset <= self.committed_primary:
            # Records arrive out of order in this mode, so a late commit of a record below the
            # primary's offset and outside every open range is one already checkpointed: it must
            # not move the offset back (and past a range's token).
            return "stale"
        self.committed_primary = offset
        return "primary"

    def finish(self, r: Range, through: int) -> None:
        """The worker read past the range's end: offsets `[through, end)` hold no records (holes
        left by compaction or control records), so they count as processed once `through` is."""
        if r.next >= through:
            r.next = r.end
            if r in self.ranges:
                self.ranges.remove(r)

    def committed(self) -> int:
        """Everything before this offset is checkpointed (the KIP's rule)."""
        return self.ranges[0].next if self.ranges else self.committed_primary

    def records_left(self) -> int:
        return sum(r.left for r in self.ranges)

    # -- durable form -----------------------------------------------------------------------
    def token(self) -> str:
        """The open ranges as commit metadata: `kip333/1:start-end@next,...` (empty when none)."""
        if not self.ranges:
            return ""
        return TOKEN_PREFIX + ",".join(f"{r.start}-{r.end}@{r.next}" for r in self.ranges)

    @classmethod
    def from_commit(cls, offset: int, metadata: str | None) -> "PartitionRanges":
        """The state a committed offset and its metadata describe (a new owner's view)."""
        ranges: list[Range] = []
        if metadata and metadata.startswith(TOKEN_PREFIX):
            body = metadata[len(TOKEN_PREFIX):]
            for part in filter(None, body.split(",")):
                try:
                    span, nxt = part.split("@")
                    start, end = span.split("-")
                    ranges.append(Range(int(start), int(end), int(nxt)))
                except ValueError as exc:
                    raise RangeTokenError(f"unreadable range token {part!r} in {metadata!r}") from exc
            for a, b in zip(ranges, ranges[1:]):
                if a.end > b.start:
                    raise RangeTokenError(f"overlapping ranges in {metadata!r}")
            if ranges and ranges[-1].end > offset:
                raise RangeTokenError(f"range past the committed offset {offset} in {metadata!r}")
        return cls(offset, [r for r in ranges if not r.done])
