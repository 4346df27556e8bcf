import pytest

from flotilla_operator.settings import Settings, parse_address


def test_defaults():
    s = Settings()
    assert s.clusterwide and s.metrics_url == "http://127.0.0.1:9405/metrics"
    assert s.liveness_url == "http://127.0.0.1:8080/healthz"
    assert s.broker_image.startswith("flotilla:")


def test_from_env():
    s = Settings.from_env({
        "FLOTILLA_OPERATOR_NAMESPACES": "a, b,",
        "FLOTILLA_OPERATOR_METRICS_ADDRESS": "0.0.0.0:9999",
        "FLOTILLA_OPERATOR_LIVENESS_ADDRESS": "off",
        "FLOTILLA_OPERATOR_RESYNC_SECONDS": "2.5",
        "FLOTILLA_BROKER_IMAGE": "x:1",
    })
    assert s.namespaces == ("a", "b") and not s.clusterwide
    assert (s.metrics_host, s.metrics_port) == ("0.0.0.0", 9999)
    assert s.liveness_url is None and s.resync_seconds == 2.5 and s.broker_image == "x:1"


def test_parse_address():
    assert parse_address("0.0.0.0:1") == ("0.0.0.0", 1)
    assert parse_address(":9405") == ("127.0.0.1", 9405)
    assert parse_address("9405") == ("127.0.0.1", 9405)
    assert parse_address("[::1]:80") == ("::1", 80)
    with pytest.raises(ValueError):
        parse_address("host:http")
    with pytest.raises(ValueError):
        parse_address("host:70000")
