"""kafka-python against the broker: the shared interop scenarios."""

from tests.support.interop_suite import AdminScenarios, InteropSuite


class TestKafkaPython(InteropSuite, AdminScenarios):
    family_name = "kafka-python"
