"""KIP-333 parallel catch-up consumer: fresh records first after a crash, the gap beside them.

    from flotilla.catchup import CatchUpConsumer

Needs confluent-kafka (`pip install flotilla[catchup]`). See docs/catch-up-consumer.md.
"""

from flotilla.catchup.consumer import CatchUpConsumer
from flotilla.catchup.ranges import PartitionRanges, Range, RangeTokenError

__all__ = ["CatchUpConsumer", "PartitionRanges", "Range", "RangeTokenError"]
