"""One reconciler per resource: read the latest object, decide with the pure builders, act through
clients/, write the status and Events. handlers.py registers them with kopf; loops.py runs the
operator-wide periodic passes.

- kafka_cluster: a KafkaCluster into its children, as a chain of named steps (`reconcile`), and
  its status from StatefulSet and Lease events (`refresh_status`);
- rebalance: replicas moved onto added brokers and off removed ones, one step at a time;
- client_quota, kafka_user, record_deletion: the other custom resources;
- common: the per-cluster lock, Events, the cluster's admin address and credentials.
"""
