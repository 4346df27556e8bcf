"""Leader election for running two (or more) operator replicas: one reconciles, the others wait.

A coordination.k8s.io Lease, as Kubernetes' own controllers and controller-runtime operators use
(`kubectl get lease -n flotilla`), rather than kopf's peering: kopf's peers of equal priority all
freeze (two replicas of one Deployment have the same priority), distinct priorities need a value
per pod, and peering has no notion of time after which a silent leader is replaced.

- `lease.py`: pure decisions from the Lease object and this process's clock (acquire, renew, wait,
  lost, release), as client-go's leaderelection package takes them;
- `elector.py`: the thin runner, reading and writing the Lease through clients/kube.py;
- `health.py`: /livez and /readyz, and the leader and ready gauges;
- `process.py`: `flotilla operator --leader-elect`: campaign, then run kopf while the Lease is held,
  release it on a clean stop, exit at once when it is lost.
"""
