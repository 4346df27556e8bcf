"""aiokafka against the broker: the shared interop scenarios."""

from tests.support.interop_suite import AdminScenarios, InteropSuite


class TestAIOKafka(InteropSuite, AdminScenarios):
    family_name = "aiokafka"
