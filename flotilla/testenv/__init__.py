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
"""
