"""KIP-333 parallel catch-up consumer: fresh records first after a crash, the gap beside them.

    from flotilla.catchup import CatchUpConsumer

See docs/catch-up-consumer.md.
"""

from flotilla.catchup.ranges import PartitionRanges, Range, RangeTokenError

__all__ = ["PartitionRanges", "Range", "RangeTokenError"]
