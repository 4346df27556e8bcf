"""Every name derived from a KafkaCluster's name, in one place (Strimzi's KafkaResources).

The brokers find their Leases, ConfigMaps and Secrets by these names and the operator creates them
(and grants the brokers access to exactly these names), so both import them from here: a name typed
twice drifts. Pure functions of the cluster name; metadata.name is at most 40 characters (the CRD),
so each fits a 63-character DNS label with room for a StatefulSet's `-<ordinal>` and revision hash.
"""

from __future__ import annotations


# -- the brokers: StatefulSet, pods, Services, configuration ------------------------------------
def statefulset_name(cluster: str) -> str:
    return f"{cluster}-broker"


def broker_pod_name(cluster: str, ordinal: int | str) -> str:
    return f"{statefulset_name(cluster)}-{ordinal}"


def headless_service_name(cluster: str) -> str:
    return f"{cluster}-brokers"


def bootstrap_service_name(cluster: str) -> str:
    return f"{cluster}-bootstrap"


def external_bootstrap_name(cluster: str, port: int) -> str:
    """The bootstrap Service of the external listener on `port`."""
    return f"{bootstrap_service_name(cluster)}-{port}"


def external_broker_name(cluster: str, ordinal: int | str, port: int) -> str:
    """Broker `ordinal`'s own Service on the external listener on `port` (a str: a shell expression)."""
    return f"{statefulset_name(cluster)}-{ordinal}-{port}"


def configmap_name(cluster: str) -> str:
    """The brokers' server.properties."""
    return f"{cluster}-config"


def external_addresses_name(cluster: str) -> str:
    """The ConfigMap of the external listeners' addresses the brokers advertise."""
    return f"{cluster}-external-addresses"


def rebalance_plan_name(cluster: str) -> str:
    """The ConfigMap of a rebalance's target assignment."""
    return f"{cluster}-rebalance-plan"


def operator_owned_name(cluster: str) -> str:
    """The ConfigMap of the KafkaUsers and ClientQuotas whose credentials, ACLs and quotas the
    operator has applied to the cluster (reconcilers/orphans.py removes those whose owner is gone)."""
    return f"{cluster}-operator-owned"


def cluster_id_name(cluster: str) -> str:
    """The ConfigMap that records the cluster id the brokers' volumes hold."""
    return f"{cluster}-cluster-id"


def service_account_name(cluster: str) -> str:
    return f"{cluster}-broker"


def role_name(cluster: str) -> str:
    return f"{cluster}-broker"


def metadata_binding_name(cluster: str) -> str:
    return f"{cluster}-broker-metadata"


def pdb_name(cluster: str) -> str:
    return f"{cluster}-broker"


# -- the metadata store: Leases and the published documents --------------------------------------
def broker_lease_name(cluster: str, node_id: int) -> str:
    return f"{cluster}-broker-{node_id}"


def controller_lease_name(cluster: str) -> str:
    return f"{cluster}-controller"


def producer_ids_lease_name(cluster: str) -> str:
    return f"{cluster}-producer-ids"


def client_quotas_name(cluster: str) -> str:
    """The ConfigMap of dynamic client quotas (KIP-13)."""
    return f"{cluster}-client-quotas"


def acls_name(cluster: str) -> str:
    """The ConfigMap of ACLs."""
    return f"{cluster}-acls"


def broker_configs_name(cluster: str) -> str:
    """The ConfigMap of dynamic broker configs (KIP-73 throttle rates)."""
    return f"{cluster}-broker-configs"


def scram_credentials_name(cluster: str) -> str:
    """The Secret of SCRAM credentials (KIP-554)."""
    return f"{cluster}-scram-credentials"


# -- credentials and certificates ----------------------------------------------------------------
def operator_credentials_name(cluster: str) -> str:
    """The Secret of the operator's own SCRAM password."""
    return f"{cluster}-operator-credentials"


def broker_credentials_secret_name(cluster: str) -> str:
    """The Secret of the brokers' SCRAM password on a SASL inter-broker listener."""
    return f"{cluster}-broker-credentials"


def cluster_ca_name(cluster: str) -> str:
    return f"{cluster}-cluster-ca"


def cluster_ca_cert_name(cluster: str) -> str:
    return f"{cluster}-cluster-ca-cert"


def clients_ca_name(cluster: str) -> str:
    return f"{cluster}-clients-ca"


def clients_ca_cert_name(cluster: str) -> str:
    return f"{cluster}-clients-ca-cert"


def broker_certs_name(cluster: str) -> str:
    return f"{cluster}-broker-certs"


def operator_tls_name(cluster: str) -> str:
    """The operator's client certificate for an SSL first listener (tls.crt, tls.key)."""
    return f"{cluster}-operator-tls"


def operator_certificate_name(cluster: str) -> str:
    """The cert-manager Certificate that writes operator_tls_name."""
    return f"{cluster}-operator"


def broker_certificate_name(cluster: str, ordinal: int) -> str:
    """The cert-manager Certificate of broker `ordinal`."""
    return f"{cluster}-broker-{ordinal}"


def broker_certificate_secret(cluster: str, ordinal: int) -> str:
    """The Secret cert-manager writes broker `ordinal`'s key and certificate to."""
    return f"{cluster}-broker-{ordinal}-tls"
