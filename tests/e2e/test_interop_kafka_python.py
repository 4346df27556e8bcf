"""kafka-python against the broker: the shared interop scenarios."""

from tests.support.interop_suite import InteropSuite


class TestKafkaPython(InteropSuite):
    family_name = "kafka-python"
