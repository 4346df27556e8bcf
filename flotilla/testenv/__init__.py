"""A real Kubernetes control plane for tests: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok, built from source through the Go module proxy and started on loopback.

Modules, one job each:

- `versions`: what is pinned and where the cache lives
- `gomod`: pure generation of the small Go modules the build uses
- `build`: building (or reusing) the binaries
- `certs`: the CA, serving and client certificates and the service-account key
- `kubeconfig`: writing kubeconfig files
- `control_plane`: starting, waiting for and stopping the processes
- `cli`: `flotilla testenv build|up|down`
- `pytest_plugin`: the `kube_env` and `kube_namespace` fixtures

Beside the control plane, what the tests and the benchmarks (bench/) both use to run and reach
brokers, kept here so that nothing outside tests/ imports tests/:

- `brokers/`: Flotilla and Apache Kafka broker processes on loopback, alone or as fleets of three
- `kafka_wire`: a blocking Kafka wire client built on kio, for requests a client library hides
- `fetch_client`: Fetch requests and a KIP-227 session fetcher on top of it
- `waiting`: bounded polling that names what never happened
"""
