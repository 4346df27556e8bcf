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
    with pytest.raises(ConfigError, match="KERBEROS is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"):
        parse_config({"listener.security.protocol.map": "PLAINTEXT:KERBEROS"})
    with pytest.raises(ConfigError, match="'inter.broker.listener.name'"):
        parse_config({"inter.broker.listener.name": "OTHER"})


def test_queued_max_request_bytes_as_kafka():
    assert parse_config({})["queued.max.request.bytes"] == -1  # unbounded by default
    assert parse_config({"queued.max.request.bytes": str(200 * 2**20)})["queued.max.request.bytes"] == 200 * 2**20
    with pytest.raises(ConfigError, match="'queued.max.request.bytes'.*socket.request.max.bytes"):
        parse_config({"queued.max.request.bytes": "1000"})


def test_metadata_store_keys():
    c = parse_config({})
    assert (c["flotilla.metadata.store"], c["flotilla.cluster.name"], c["flotilla.kubernetes.namespace"]) == ("file", "", "")
    assert c["flotilla.metadata.lease.duration.ms"] == 15000
    k = parse_config({"flotilla.metadata.store": "Kubernetes", "flotilla.cluster.name": "fleet",
                      "flotilla.kubernetes.namespace": "kafka"})
    assert (k["flotilla.metadata.store"], k["flotilla.cluster.name"]) == ("kubernetes", "fleet")
    with pytest.raises(ConfigError, match="'flotilla.cluster.name' is required"):
        parse_config({"flotilla.metadata.store": "kubernetes"})
    with pytest.raises(ConfigError, match="flotilla.metadata.store"):
        parse_config({"flotilla.metadata.store": "zookeeper"})
    with pytest.raises(ConfigError, match="flotilla.cluster.name"):
        parse_config({"flotilla.cluster.name": "Fleet_1"})
    with pytest.raises(ConfigError, match="flotilla.metadata.lease.duration.ms"):
        parse_config({"flotilla.metadata.lease.duration.ms": "10"})


def test_open_store_picks_the_backend(tmp_path):
    from broker.metadata import open_store
    from broker.metadata.file_store import FileMetadataStore
    from broker.metadata.kube_store import KubernetesMetadataStore

    assert isinstance(open_store(parse_config({}), "cid", tmp_path), FileMetadataStore)
    k = open_store(parse_config({"flotilla.metadata.store": "kubernetes", "flotilla.cluster.name": "fleet",
                                 "flotilla.metadata.lease.duration.ms": "6000", "num.partitions": "3"}), "cid", tmp_path)
    assert isinstance(k, KubernetesMetadataStore)
    assert (k.cluster_name, k.lease_duration_s, k.default_partitions, k.namespace) == ("fleet", 6.0, 3, None)
