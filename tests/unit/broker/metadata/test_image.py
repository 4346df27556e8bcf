"""MetadataImage.with_topics: an image made from the last one by a few changes equals one built
from scratch (both indexes and the partition count), and says what changed since which image."""

import dataclasses

from broker.metadata.store import MetadataImage, new_topic


def test_with_topics_equals_a_full_build_and_names_the_change():
    topics = {f"t{i}": new_topic(f"t{i}", 1 + i % 4) for i in range(100)}
    base = MetadataImage.build("c", {}, None, topics)
    assert base.partition_count() == sum(t.partitions for t in topics.values())
    grown = dataclasses.replace(topics["t5"], partitions=40)
    added = new_topic("new", 7)
    image = base.with_topics(puts=[grown, added], deletes=["t7", "absent"])
    expected = {**topics, "t5": grown, "new": added}
    del expected["t7"]
    full = MetadataImage.build("c", {}, None, expected)
    assert dict(image.topics) == dict(full.topics)
    assert dict(image._by_id) == dict(full._by_id)
    assert image.topic_by_id(topics["t7"].topic_id) is None and image.topic_by_id(added.topic_id) is added
    assert image.partition_count() == full.partition_count()
    assert image.changed_since(base) == {"t5", "new", "t7"}
    assert image.changed_since(full) is None and full.changed_since(base) is None  # unknown: compare all
    assert "t7" in base.topics and base.partition_count() == sum(t.partitions for t in topics.values())
