"""Reading output topics as their readers must: latest row per key, dead letters by source record."""

from pipeline.results import Record, dead_letters_by_source, latest_per_key, reason


def rec(offset, key, value, headers=()):
    return Record(0, offset, key, value, tuple(headers))


def test_latest_row_per_key_collapses_copies_and_keeps_the_last():
    rows = [rec(0, b"w1/books", b"a"), rec(1, b"w1/games", b"b"), rec(2, b"w1/books", b"a"), rec(3, b"w2/books", b"c")]
    assert latest_per_key(rows) == {"w1/books": "a", "w1/games": "b", "w2/books": "c"}
    assert latest_per_key([rec(0, b"k", b"old"), rec(1, b"k", b"new")]) == {"k": "new"}


def dlq(offset, source_offset, value, partition="1"):
    return rec(offset, b"u-1", value, [
        ("dlq.error", b"value is null"), ("dlq.source.topic", b"events"),
        ("dlq.source.partition", partition.encode()), ("dlq.source.offset", str(source_offset).encode())])


def test_dead_letters_are_keyed_by_their_source_record():
    letters = [dlq(0, 17, b"x"), dlq(1, 18, None), dlq(2, 17, b"x"), dlq(3, 17, b"y", partition="2")]
    by_source = dead_letters_by_source(letters)
    assert set(by_source) == {("events", 1, 17), ("events", 1, 18), ("events", 2, 17)}
    assert by_source[("events", 1, 18)].value is None
    assert reason(by_source[("events", 1, 17)]) == "value is null"
    assert rec(0, None, None).header("dlq.error") is None
