import pytest

from broker.config import ConfigError, load_config, parse_config, parse_properties


def test_defaults_are_the_embedded_single_broker():
    cfg = parse_config({})
    assert cfg.listeners[0].host == "127.0.0.1" and cfg.listeners[0].port == 9092
    assert cfg["flotilla.metrics.listener"] == ("127.0.0.1", 9404)
    assert cfg.node_id == 1


def test_unknown_key_is_named():
    with pytest.raises(ConfigError, match="'log.dir.typo'"):
        parse_config({"log.dir.typo": "x"})


@pytest.mark.parametrize("key,value", [
    ("num.partitions", "zero"), ("num.partitions", "0"), ("listeners", "9092"),
    ("auto.create.topics.enable", "maybe"), ("log.retention.ms", "-5"), ("compression.type", "gzip"),
])
def test_bad_value_is_named(key, value):
    with pytest.raises(ConfigError, match=repr(key)):
        parse_config({key: value})


def test_properties_file_and_overrides(tmp_path):
    f = tmp_path / "server.properties"
    f.write_text("# comment\nnode.id=3\nlisteners = PLAINTEXT://0.0.0.0:9093\n\nnum.partitions: 4\n")
    cfg = load_config(f, ["num.partitions=6", "log.dirs=/tmp/a,/tmp/b"])
    assert cfg.node_id == 3
    assert cfg["num.partitions"] == 6
    assert [str(d) for d in cfg.log_dirs] == ["/tmp/a", "/tmp/b"]
    # 0.0.0.0 is not an address clients can use: advertise loopback unless told otherwise
    assert cfg.advertised_listeners[0].host == "127.0.0.1"
    assert cfg.advertised_listeners[0].port == 9093


def test_advertised_listeners_win():
    cfg = parse_config({"listeners": "PLAINTEXT://0.0.0.0:9092",
                        "advertised.listeners": "PLAINTEXT://broker-0.kafka.svc:9092"})
    assert cfg.advertised_listeners[0].host == "broker-0.kafka.svc"


def test_malformed_properties_line():
    with pytest.raises(ConfigError, match="line 2"):
        parse_properties("a=1\njust words\n")


def test_listener_names_and_protocol_map():
    cfg = parse_config({"listeners": "CLIENT://0.0.0.0:9092,REPLICATION://0.0.0.0:9091",
                        "listener.security.protocol.map": "CLIENT:PLAINTEXT,REPLICATION:PLAINTEXT",
                        "inter.broker.listener.name": "REPLICATION"})
    assert [l.name for l in cfg.listeners] == ["CLIENT", "REPLICATION"]
    with pytest.raises(ConfigError, match="'listener.security.protocol.map'"):
        parse_config({"listeners": "CLIENT://0.0.0.0:9092"})
    with pytest.raises(ConfigError, match="only PLAINTEXT"):
        parse_config({"listener.security.protocol.map": "PLAINTEXT:SSL"})
    with pytest.raises(ConfigError, match="'inter.broker.listener.name'"):
        parse_config({"inter.broker.listener.name": "OTHER"})


def test_queued_max_request_bytes_as_kafka():
    assert parse_config({})["queued.max.request.bytes"] == -1  # unbounded by default
    assert parse_config({"queued.max.request.bytes": str(200 * 2**20)})["queued.max.request.bytes"] == 200 * 2**20
    with pytest.raises(ConfigError, match="'queued.max.request.bytes'.*socket.request.max.bytes"):
        parse_config({"queued.max.request.bytes": "1000"})
