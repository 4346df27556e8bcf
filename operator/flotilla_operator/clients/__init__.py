"""Everything the operator says to the outside: the Kubernetes API (`kube`: server-side apply, reads,
status, Events), its clusters' Kafka admin APIs (`kafka_admin` on the broker's own network client,
`reassignment_admin` for moving replicas, `record_admin` for DeleteRecords), and the objects that
hold secrets it creates or reads (`certificates`: the CAs and broker certificates, cert-manager's;
`credentials`: the operator's and the brokers' SCRAM users). The reconcilers call these; builders
never do.
"""
