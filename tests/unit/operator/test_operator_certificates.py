"""The operator's certificates for TLS listeners (builders/certificates.py, pki.py): what is issued,
when it is renewed, and that the files work where they are used: the broker's own TLS code loads
the keystores and truststores, a TLS handshake with a user's certificate succeeds and maps to
User:<name>, and a certificate of another CA is refused."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import ssl

import pytest

from broker.security.principal import PrincipalMapper, certificate_subject
from flotilla_operator import pki
from flotilla_operator.builders import build_all
from flotilla_operator.builders import certificates as certs
from flotilla_operator.builders.common import Owner
from flotilla_operator.builders.configmap import tls_config
from flotilla_operator.builders.roll import TEMPLATE_HASH_ANNOTATION
from flotilla_operator.api.common import parse_spec
from flotilla_operator.api.kafka_cluster import KafkaClusterSpec, KAFKA_CLUSTER

OWNER = Owner("demo", "ns", "uid-1")
NOW = dt.datetime(2026, 11, 26, 12, 0, tzinfo=dt.timezone.utc)
TLS_SPEC = {"replicas": 3, "listeners": [{"name": "SECURE", "port": 9093, "protocol": "SASL_SSL"},
                                         {"name": "MTLS", "port": 9094, "protocol": "SSL", "authentication": "tls"}]}


def spec(**overrides) -> KafkaClusterSpec:
    return KafkaClusterSpec.model_validate({**TLS_SPEC, **overrides})


def by_name(plan: certs.CertificatePlan) -> dict[str, dict]:
    return {s["metadata"]["name"]: s for s in plan.secrets}


def files(secret: dict) -> dict[str, str]:
    return certs.decoded(secret)


def first_plan(s: KafkaClusterSpec | None = None, replicas: int = 3) -> certs.CertificatePlan:
    return certs.plan_certificates(OWNER, s or spec(), replicas=replicas, existing={}, now=NOW)


def test_a_new_cluster_gets_two_cas_and_a_certificate_per_broker_for_its_names():
    plan = first_plan()
    secrets = by_name(plan)
    assert list(secrets) == ["demo-cluster-ca", "demo-cluster-ca-cert", "demo-clients-ca", "demo-clients-ca-cert",
                             "demo-broker-certs"]
    assert plan.generation == 1
    ca = pki.KeyPair(**{"key_pem": files(secrets["demo-cluster-ca"])["ca.key"],
                        "cert_pem": files(secrets["demo-cluster-ca"])["ca.crt"]})
    brokers = files(secrets["demo-broker-certs"])
    assert sorted(brokers) == ["broker-0.names", "broker-0.pem", "broker-1.names", "broker-1.pem", "broker-2.names",
                               "broker-2.pem", "ca.crt", "clients-ca.crt"]
    assert brokers["ca.crt"] == ca.cert_pem == files(secrets["demo-cluster-ca-cert"])["ca.crt"]
    # the public Secrets hold no key
    assert "PRIVATE KEY" not in files(secrets["demo-cluster-ca-cert"])["ca.crt"]
    assert "PRIVATE KEY" not in brokers["clients-ca.crt"]
    cert = pki.pem_certificates(brokers["broker-1.pem"])[0]
    assert pki.signed_by(cert, ca)
    assert "demo-broker-1.demo-brokers.ns.svc" in pki.dns_names(cert)
    assert "demo-bootstrap.ns.svc.cluster.local" in pki.dns_names(cert)
    assert "demo-broker-0.demo-brokers.ns.svc" not in pki.dns_names(cert)
    assert pki.not_after(cert) - NOW == dt.timedelta(days=365)  # validityDays
    assert secrets["demo-broker-certs"]["metadata"]["annotations"] == {certs.GENERATION_ANNOTATION: "1"}
    assert secrets["demo-broker-certs"]["metadata"]["ownerReferences"][0]["uid"] == "uid-1"


def test_load_balancer_addresses_are_named_as_they_appear_re_issuing_that_broker_alone():
    """A certificate names its broker's load balancer addresses (an IP as an IP address SAN, what
    a client that dialled it verifies); an address that appears later re-issues that broker's
    certificate only, with no new generation (no roll: the broker waits for it to start)."""
    first = by_name(certs.plan_certificates(OWNER, spec(), replicas=3, existing={}, now=NOW,
                                            external_addresses={0: ("203.0.113.1", "203.0.113.10")}))
    brokers = files(first["demo-broker-certs"])
    cert0 = pki.pem_certificates(brokers["broker-0.pem"])[0]
    assert {"203.0.113.1", "203.0.113.10", "demo-broker-0.demo-brokers.ns.svc"} <= set(pki.alt_names(cert0))
    assert "203.0.113.10" not in pki.dns_names(cert0)  # an IP address SAN, not a DNS name
    assert brokers["broker-0.names"].splitlines()[-2:] == ["203.0.113.1", "203.0.113.10"]
    assert "203.0.113.1" not in brokers["broker-1.names"].splitlines()

    later = certs.plan_certificates(OWNER, spec(), replicas=3, existing=first, now=NOW, external_addresses={
        0: ("203.0.113.1", "203.0.113.10"), 1: ("203.0.113.1", "b1.elb.example.com")})
    assert later.generation == 1, "a new address rolled the brokers"
    assert later.issued == ["broker certificates issued for ordinals 1 (generation 1)"]
    again = files(by_name(later)["demo-broker-certs"])
    assert {k: again[k] for k in ("broker-0.pem", "broker-2.pem")} == {
        k: brokers[k] for k in ("broker-0.pem", "broker-2.pem")}
    assert {"203.0.113.1", "b1.elb.example.com"} <= set(pki.alt_names(pki.pem_certificates(again["broker-1.pem"])[0]))
    assert again["broker-1.names"].splitlines()[-2:] == ["203.0.113.1", "b1.elb.example.com"]


def test_a_reconcile_with_nothing_due_writes_nothing_and_keeps_the_generation():
    first = by_name(first_plan())
    again = certs.plan_certificates(OWNER, spec(), replicas=3, existing=first, now=NOW + dt.timedelta(days=300))
    assert (again.secrets, again.generation, again.issued) == ([], 1, [])


def test_a_scale_up_issues_only_the_new_brokers_certificates_without_a_roll():
    first = by_name(first_plan())
    grown = certs.plan_certificates(OWNER, spec(), replicas=5, existing=first, now=NOW)
    assert [s["metadata"]["name"] for s in grown.secrets] == ["demo-broker-certs"]
    assert grown.generation == 1  # the pod template does not change: no broker restarts
    before, after = files(first["demo-broker-certs"]), files(grown.secrets[0])
    assert {k: after[k] for k in before} == before
    assert sorted(set(after) - set(before)) == ["broker-3.names", "broker-3.pem", "broker-4.names", "broker-4.pem"]


def test_broker_certificates_inside_the_renewal_window_are_all_renewed_and_roll_the_brokers():
    first = by_name(first_plan())
    due = NOW + dt.timedelta(days=336)  # 29 days left: inside renewBeforeDays 30
    plan = certs.plan_certificates(OWNER, spec(), replicas=3, existing=first, now=due)
    assert [s["metadata"]["name"] for s in plan.secrets] == ["demo-broker-certs"]
    assert plan.generation == 2
    renewed = files(plan.secrets[0])
    for ordinal in range(3):
        cert = pki.pem_certificates(renewed[f"broker-{ordinal}.pem"])[0]
        assert pki.not_after(cert) > due + dt.timedelta(days=300)
    assert "renewed" in plan.issued[0]


def test_a_longer_renewal_window_in_the_spec_renews_at_once():
    """What a user (and the real-pod test) does to renew now: a window longer than what is left."""
    first = by_name(first_plan())
    longer = spec(certificates={"validityDays": 400, "renewBeforeDays": 366})
    plan = certs.plan_certificates(OWNER, longer, replicas=3, existing=first, now=NOW)
    assert plan.generation == 2
    cert = pki.pem_certificates(files(plan.secrets[-1])["broker-0.pem"])[0]
    assert pki.not_after(cert) - NOW == dt.timedelta(days=400)


def test_a_renewed_cluster_ca_is_trusted_beside_the_old_one_and_reissues_the_brokers():
    first = by_name(first_plan())
    old_ca = files(first["demo-cluster-ca"])["ca.crt"]
    late = NOW + dt.timedelta(days=1800)  # the CA (1825 days) is inside its window; brokers are long expired
    plan = certs.plan_certificates(OWNER, spec(), replicas=3, existing=first, now=late)
    secrets = by_name(plan)
    new_ca = files(secrets["demo-cluster-ca"])
    bundle = pki.pem_certificates(files(secrets["demo-cluster-ca-cert"])["ca.crt"])
    assert bundle == [new_ca["ca.crt"], old_ca]
    cert = pki.pem_certificates(files(secrets["demo-broker-certs"])["broker-0.pem"])[0]
    assert pki.signed_by(cert, pki.KeyPair(new_ca["ca.key"], new_ca["ca.crt"]))
    assert plan.generation == 2
    # once the old CA has expired it leaves the bundle (and the brokers roll to drop it)
    after = certs.plan_certificates(OWNER, spec(), replicas=3, existing={**first, **secrets},
                                    now=NOW + dt.timedelta(days=1826))
    assert pki.pem_certificates(files(by_name(after)["demo-cluster-ca-cert"])["ca.crt"]) == [new_ca["ca.crt"]]


def test_a_renewed_clients_ca_rolls_the_brokers_so_they_trust_it():
    first = by_name(first_plan())
    clients_ca = files(first["demo-clients-ca"])
    # the clients CA alone is made due: its certificate replaced by one expiring tomorrow
    short = pki.new_ca("demo clients CA", now=NOW, days=2)
    existing = {**first, "demo-clients-ca": {"data": {
        "ca.key": base64.b64encode(short.key_pem.encode()).decode(),
        "ca.crt": base64.b64encode(short.cert_pem.encode()).decode()}}}
    plan = certs.plan_certificates(OWNER, spec(), replicas=3, existing=existing, now=NOW)
    names = [s["metadata"]["name"] for s in plan.secrets]
    assert "demo-clients-ca" in names and "demo-broker-certs" in names and "demo-cluster-ca" not in names
    assert plan.generation == 2
    trusted = files(by_name(plan)["demo-broker-certs"])["clients-ca.crt"]
    assert files(by_name(plan)["demo-clients-ca"])["ca.crt"] in trusted and clients_ca["ca.crt"] in trusted


def test_a_listener_with_its_own_keystore_in_spec_config_gets_nothing_from_the_operator():
    own = spec(listeners=[{"name": "SASL_SSL", "port": 9093, "protocol": "SASL_SSL"}],
               config={"ssl.keystore.location": "/etc/own/keystore.pem"})
    assert certs.managed_listeners(own) == []
    assert first_plan(own).secrets == []
    assert tls_config(own) == {}
    sts = build_all(OWNER, own, image="img").statefulset
    assert all(v["name"] != "tls" for v in sts["spec"]["template"]["spec"]["volumes"])
    # per listener: only the one without its own keystore is served by the operator
    mixed = spec(config={"listener.name.mtls.ssl.keystore.location": "/etc/own/keystore.pem"})
    assert [l.name for l in certs.managed_listeners(mixed)] == ["SECURE"]


def test_server_properties_point_each_listener_at_the_mounted_files():
    config = tls_config(spec())
    assert config == {
        "listener.name.secure.ssl.keystore.type": "PEM",
        "listener.name.secure.ssl.truststore.type": "PEM",
        "listener.name.secure.ssl.truststore.location": "/etc/flotilla-tls/ca.crt",
        "listener.name.mtls.ssl.keystore.type": "PEM",
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.truststore.type": "PEM",
        "listener.name.mtls.ssl.truststore.location": "/etc/flotilla-tls/clients-ca.crt",
        "ssl.principal.mapping.rules": certs.PRINCIPAL_MAPPING_RULES,
    }
    # a key the user sets is theirs
    assert "ssl.principal.mapping.rules" not in tls_config(spec(config={"ssl.principal.mapping.rules": "DEFAULT"}))


def test_the_statefulset_mounts_the_certificates_and_a_new_generation_rolls_it():
    one = build_all(OWNER, spec(), image="img", certificate_generation=1).statefulset
    two = build_all(OWNER, spec(), image="img", certificate_generation=2).statefulset
    pod = one["spec"]["template"]
    assert pod["metadata"]["annotations"][certs.GENERATION_ANNOTATION] == "1"
    assert {"name": "tls", "secret": {"secretName": "demo-broker-certs", "defaultMode": 0o440}} in pod["spec"]["volumes"]
    mounts = pod["spec"]["containers"][0]["volumeMounts"]
    assert {"name": "tls", "mountPath": "/etc/flotilla-tls", "readOnly": True} in mounts
    script = pod["spec"]["containers"][0]["command"][2]
    assert 'listener.name.secure.ssl.keystore.location=/etc/flotilla-tls/broker-${ordinal}.pem' in script
    assert 'listener.name.mtls.ssl.keystore.location=/etc/flotilla-tls/broker-${ordinal}.pem' in script
    assert one["metadata"]["annotations"][TEMPLATE_HASH_ANNOTATION] != two["metadata"]["annotations"][TEMPLATE_HASH_ANNOTATION]
    assert certs.live_generation(two) == 2
    # a PLAINTEXT fleet's pods are as they were: no annotation, no volume
    plain = build_all(OWNER, KafkaClusterSpec(), image="img").statefulset["spec"]["template"]
    assert certs.GENERATION_ANNOTATION not in plain["metadata"]["annotations"]


@pytest.mark.parametrize("listeners, message", [
    ([{"name": "A", "port": 9093, "protocol": "SASL_SSL"}, {"name": "B", "port": 9094, "protocol": "SASL_SSL",
                                                             "authentication": "tls"}],
     "spec.listeners[].authentication tls needs protocol SSL"),
    ([{"name": "A", "port": 9093, "protocol": "SSL", "authentication": "tls"}],
     "spec.listeners[0].authentication must be unset"),
])
def test_tls_authentication_is_refused_where_it_cannot_work(listeners, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_spec(KAFKA_CLUSTER, {"listeners": listeners})


def test_a_renewal_window_as_long_as_the_validity_is_refused():
    with pytest.raises(ValueError, match="renewBeforeDays must be less than validityDays"):
        parse_spec(KAFKA_CLUSTER, {"certificates": {"validityDays": 30, "renewBeforeDays": 30}})


def _user(plan: certs.CertificatePlan, name: str) -> tuple[dict[str, str], pki.KeyPair]:
    secrets = by_name(plan)
    ca = files(secrets["demo-clients-ca"])
    clients_ca = pki.KeyPair(ca["ca.key"], ca["ca.crt"])
    bundle = files(secrets["demo-cluster-ca-cert"])["ca.crt"]
    return certs.user_certificate_files(clients_ca, bundle, name, now=NOW, days=365), clients_ca


def test_a_user_certificate_is_due_when_missing_foreign_renamed_or_near_expiry():
    plan = first_plan()
    alice, clients_ca = _user(plan, "alice")
    due = certs.user_certificate_due
    assert not due(alice, clients_ca, "alice", now=NOW, renew_before_days=30)
    assert due({}, clients_ca, "alice", now=NOW, renew_before_days=30)
    assert due(alice, clients_ca, "bob", now=NOW, renew_before_days=30)
    assert due(alice, clients_ca, "alice", now=NOW + dt.timedelta(days=340), renew_before_days=30)
    other_ca = pki.new_ca("another", now=NOW, days=100)
    assert due(alice, other_ca, "alice", now=NOW, renew_before_days=30)
    assert alice["user.pem"] == alice["user.key"] + alice["user.crt"]


def broker_server(tmp_path, brokers: dict[str, str], truststore: str, where: str, client_auth: str) -> ssl.SSLContext:
    """The broker's own server_context for broker 0, from the brokers' Secret's files (written to
    tmp_path) with `truststore` (one of them) checking client certificates."""
    from broker.security.tls import server_context

    for name, text in brokers.items():
        (tmp_path / name).write_text(text)
    keys = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(tmp_path / "broker-0.pem"),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(tmp_path / truststore),
            "ssl.enabled.protocols": "TLSv1.2,TLSv1.3"}
    return server_context(keys.get, where, client_auth)


def _serve_and_connect(tmp_path, server: ssl.SSLContext, client: ssl.SSLContext, hostname: str,
                       rules: str = certs.PRINCIPAL_MAPPING_RULES):
    """A real TLS handshake over loopback: (the principal the broker maps the client to, or the
    client's error)."""
    mapper = PrincipalMapper(rules)
    seen: list[str] = []

    async def run():
        async def on_client(reader, writer):
            der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
            seen.append("User:" + mapper.name(certificate_subject(der)) if der else "none")
            writer.close()

        srv = await asyncio.start_server(on_client, "127.0.0.1", 0, ssl=server)
        port = srv.sockets[0].getsockname()[1]
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client, server_hostname=hostname)
            await reader.read()
            writer.close()
        except (ssl.SSLError, ConnectionError) as exc:
            return type(exc).__name__
        finally:
            srv.close()
        for _ in range(100):
            if seen:
                break
            await asyncio.sleep(0.01)
        return seen[0] if seen else "none"
    return asyncio.run(run())


def test_the_issued_files_work_with_the_brokers_tls_code_and_map_the_user(tmp_path):
    """The broker's own server_context (Kafka's ssl.* keys) loads broker-0.pem and clients-ca.crt;
    a client trusting ca.crt and presenting alice's certificate connects to broker 0's DNS name,
    and the broker's mapping rules make it User:alice; another CA's client is refused."""
    from broker.security.tls import server_context

    plan = first_plan()
    brokers = files(by_name(plan)["demo-broker-certs"])
    for name, text in brokers.items():
        (tmp_path / name).write_text(text)
    keys = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(tmp_path / "broker-0.pem"),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(tmp_path / "clients-ca.crt")}
    server = server_context(lambda k: keys.get(k, {"ssl.enabled.protocols": "TLSv1.2,TLSv1.3"}.get(k)),
                            "listener MTLS", "required")
    alice, _ = _user(plan, "alice")
    (tmp_path / "alice.crt").write_text(alice["user.crt"])
    (tmp_path / "alice.key").write_text(alice["user.key"])
    client = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    client.load_cert_chain(tmp_path / "alice.crt", tmp_path / "alice.key")
    assert _serve_and_connect(tmp_path, server, client, "demo-broker-0.demo-brokers.ns.svc") == "User:alice"

    # the wrong name: hostname verification fails on the client
    wrong = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    wrong.load_cert_chain(tmp_path / "alice.crt", tmp_path / "alice.key")
    assert _serve_and_connect(tmp_path, server, wrong, "demo-broker-1.demo-brokers.ns.svc") == "SSLCertVerificationError"

    # a client certificate from a CA the listener does not trust: no principal reaches the broker
    other = pki.new_ca("elsewhere", now=NOW, days=10)
    mallory = pki.issue(other, "alice", now=NOW, days=5, unit=certs.CLIENTS_UNIT)
    (tmp_path / "m.crt").write_text(mallory.cert_pem)
    (tmp_path / "m.key").write_text(mallory.key_pem)
    rogue = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    rogue.load_cert_chain(tmp_path / "m.crt", tmp_path / "m.key")
    assert _serve_and_connect(tmp_path, server, rogue, "demo-broker-0.demo-brokers.ns.svc") != "User:alice"


def test_the_crds_default_of_spec_certificates_is_the_models():
    """Spelled out in the CRD (the API server checks the CEL rules against a default itself, and
    `{}` has no renewBeforeDays): it must stay what the model's defaults are."""
    from flotilla_operator.api.kafka_cluster import Certificates

    field = KafkaClusterSpec.model_fields["certificates"]
    assert field.json_schema_extra["default"] == Certificates().model_dump(by_alias=True, exclude_none=True)


# --- spec.certificates.issuerRef: cert-manager issues, the operator copies ---------------------------

ISSUER_SPEC = {**TLS_SPEC, "certificates": {"issuerRef": {"name": "ca"}}}


def _cert_manager_secret(ca: pki.KeyPair, common: str, names: tuple[str, ...]) -> dict[str, str]:
    """What cert-manager's CA issuer writes (decoded): tls.key, tls.crt, ca.crt."""
    pair = pki.issue(ca, common, now=NOW, days=90, alt_names=names, unit=certs.BROKERS_UNIT, server=True)
    return {"tls.key": pair.key_pem, "tls.crt": pair.cert_pem, "ca.crt": ca.cert_pem}


def test_a_brokers_cert_manager_certificate_names_its_addresses_and_the_issuer():
    from flotilla_operator.builders.cert_manager import build_broker_certificate

    s = KafkaClusterSpec.model_validate(ISSUER_SPEC)
    cert = build_broker_certificate(OWNER, s.certificates, 1, "demo-broker-1",
                                    ("demo-broker-1.demo-brokers.ns.svc", "203.0.113.1", "b1.elb.example.com"))
    assert cert["metadata"]["name"] == "demo-broker-1" and cert["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    spec_ = cert["spec"]
    assert spec_["secretName"] == "demo-broker-1-tls"
    assert spec_["issuerRef"] == {"name": "ca", "kind": "Issuer", "group": "cert-manager.io"}
    assert spec_["dnsNames"] == ["demo-broker-1.demo-brokers.ns.svc", "b1.elb.example.com"]
    assert spec_["ipAddresses"] == ["203.0.113.1"]
    assert (spec_["duration"], spec_["renewBefore"]) == ("8760h", "720h")
    assert spec_["privateKey"]["encoding"] == "PKCS8" and "server auth" in spec_["usages"]


def test_what_cert_manager_issued_is_copied_and_only_a_renewal_rolls_the_brokers():
    s = KafkaClusterSpec.model_validate(ISSUER_SPEC)
    ca = pki.new_ca("issuer", now=NOW, days=365)
    names = {o: certs.broker_dns_names(OWNER, o) for o in range(3)}
    issued = {o: _cert_manager_secret(ca, f"demo-broker-{o}", names[o]) for o in range(2)}

    waiting = certs.plan_issued_certificates(OWNER, s, replicas=3, existing={}, issued=issued)
    assert (waiting.pending, waiting.secrets) == ([2], []), "brokers were handed certificates before all were issued"

    issued[2] = _cert_manager_secret(ca, "demo-broker-2", names[2])
    first = certs.plan_issued_certificates(OWNER, s, replicas=3, existing={}, issued=issued)
    secrets = by_name(first)
    assert list(secrets) == ["demo-cluster-ca-cert", "demo-clients-ca-cert", "demo-broker-certs"], "an operator CA"
    brokers = files(secrets["demo-broker-certs"])
    assert brokers["broker-1.pem"] == issued[1]["tls.key"] + issued[1]["tls.crt"]
    assert brokers["ca.crt"] == brokers["clients-ca.crt"] == ca.cert_pem == files(secrets["demo-cluster-ca-cert"])["ca.crt"]
    assert first.generation == 1

    again = certs.plan_issued_certificates(OWNER, s, replicas=3, existing=secrets, issued=issued)
    assert (again.secrets, again.generation) == ([], 1)
    # a load balancer's address added to broker 1's names: copied, no roll (that broker waits for it)
    readdressed = {**issued, 1: _cert_manager_secret(ca, "demo-broker-1", names[1] + ("203.0.113.11",))}
    moved = certs.plan_issued_certificates(OWNER, s, replicas=3, existing=secrets, issued=readdressed)
    assert moved.generation == 1 and "203.0.113.11" in files(by_name(moved)["demo-broker-certs"])["broker-1.names"]
    # cert-manager renewed broker 0 (same names, a new key): every broker rolls onto it
    renewed = {**issued, 0: _cert_manager_secret(ca, "demo-broker-0", names[0])}
    rolled = certs.plan_issued_certificates(OWNER, s, replicas=3, existing=secrets, issued=renewed)
    assert rolled.generation == 2
    assert rolled.issued == ["broker certificates from cert-manager renewed for ordinals 0 (generation 2)"]


# --- an SSL first listener: the brokers and the operator authenticate with their certificates -------

SSL_FIRST = {"replicas": 3, "listeners": [{"name": "TLS", "port": 9093, "protocol": "SSL"}],
             "config": {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                        "super.users": "User:admin"}}


def test_on_an_ssl_first_listener_brokers_and_operator_present_certificates_and_are_super_users():
    from flotilla_operator.builders.configmap import operator_config

    config = operator_config(OWNER, KafkaClusterSpec.model_validate(SSL_FIRST))
    assert config["listener.name.tls.ssl.client.auth"] == "requested"  # clients without one: ANONYMOUS
    assert config["ssl.principal.mapping.rules"] == certs.FLEET_MAPPING_RULES
    assert config["super.users"] == "User:admin;User:flotilla-operator;User:flotilla-broker"
    # a SASL first listener keeps SCRAM for both, and nothing changes for PLAINTEXT fleets
    sasl = operator_config(OWNER, spec())
    assert "listener.name.secure.ssl.client.auth" not in sasl and "flotilla-broker" in sasl["super.users"]
    assert "super.users" not in operator_config(OWNER, KafkaClusterSpec.model_validate({"replicas": 3}))

    plan = certs.plan_certificates(OWNER, KafkaClusterSpec.model_validate(SSL_FIRST), replicas=3, existing={}, now=NOW)
    mine = files(by_name(plan)["demo-operator-tls"])
    assert pki.common_name(mine["tls.crt"]) == "flotilla-operator"
    again = certs.plan_certificates(OWNER, KafkaClusterSpec.model_validate(SSL_FIRST), replicas=3,
                                    existing=by_name(plan), now=NOW + dt.timedelta(days=10))
    assert again.secrets == [], "the operator's certificate was re-issued while valid"


def test_the_operator_and_a_broker_map_to_their_principals_and_a_client_without_one_is_anonymous(tmp_path):
    """The broker's own server_context with the first listener's keys (ssl.client.auth=requested):
    the operator's admin client (kafka_admin.AdminAuth) is User:flotilla-operator, a broker's
    certificate (what its inter-broker client presents) User:flotilla-broker, a client without a
    certificate connects with none (User:ANONYMOUS)."""
    from flotilla_operator.clients.kafka_admin import AdminAuth

    s = KafkaClusterSpec.model_validate(SSL_FIRST)
    secrets = by_name(certs.plan_certificates(OWNER, s, replicas=3, existing={}, now=NOW))
    brokers = files(secrets["demo-broker-certs"])
    server = broker_server(tmp_path, brokers, "ca.crt", "listener TLS", "requested")
    host = "demo-broker-0.demo-brokers.ns.svc"
    mine = files(secrets["demo-operator-tls"])
    operator = AdminAuth(security_protocol="SSL", ca_pem=brokers["ca.crt"], client_cert_pem=mine["tls.crt"],
                         client_key_pem=mine["tls.key"]).ssl_context()
    assert _serve_and_connect(tmp_path, server, operator, host, certs.FLEET_MAPPING_RULES) == "User:flotilla-operator"
    peer = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    peer.load_cert_chain(tmp_path / "broker-2.pem")
    assert _serve_and_connect(tmp_path, server, peer, host, certs.FLEET_MAPPING_RULES) == "User:flotilla-broker"
    anonymous = AdminAuth(security_protocol="SSL", ca_pem=brokers["ca.crt"]).ssl_context()
    assert _serve_and_connect(tmp_path, server, anonymous, host, certs.FLEET_MAPPING_RULES) == "none"
