"""Kafka-protocol brokers on loopback, for the tests and the benchmarks alike: a Flotilla broker or
an Apache Kafka node as a child process, and fleets of three of either. They live in the product
(not under tests/) because bench/ starts the same brokers the tests do, and the product must not
import its tests.

- `broker_process`: ServerProcess (ports, data directory, readiness, stop, kill -9) and FlotillaBroker
- `apache_kafka`: Apache Kafka's jars from Maven Central and one KRaft node (ApacheKafka)
- `kafka_tools`: Kafka's own test tools (VerifiableProducer/Consumer) from the kafka-tools jars
- `fleet`: what a fleet of brokers answers, whichever kind (Fleet)
- `cluster`: three Flotilla brokers with their metadata in a test kube-apiserver (BrokerCluster)
- `kraft_cluster`: three Apache Kafka KRaft nodes with a static quorum (ApacheCluster)
- `crds`: applying crds/ to that API server safely across test modules
- `tls_certs`: a test PKI for TLS and mTLS listeners
"""
