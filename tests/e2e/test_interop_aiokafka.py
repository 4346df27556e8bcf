"""aiokafka against the broker: the shared interop scenarios."""

from tests.support.interop_suite import InteropSuite


class TestAIOKafka(InteropSuite):
    family_name = "aiokafka"
