"""kwok's configuration for the test control plane: its options and our own pod Stages.

Why our own pod stages: kwok v0.7.0's default `pod-ready` stage fires only while a pod has no
`status.podIP`. When a fake node's Lease lapses (kwok starved on a loaded machine, an API server
outage) the node lifecycle controller marks the node's pods Ready=False; once the node is Ready
again nothing in the defaults marks them Ready, so an OrderedReady StatefulSet waits forever
(kubernetes-sigs/kwok issue 1464). `pod-ready-again` restores such pods: Running, not being deleted,
Ready not True. Its delay bounds the flip-flop while the node is still NotReady (the node controller
marks every updated pod of a NotReady node NotReady again).

The other pod stages are kwok v0.7.0's defaults (`kustomize/stage/pod/fast`): giving kwok any pod
Stage replaces all of its default pod stages. Node stages are left to kwok's defaults
(`node-initialize` brings a node whose Ready is not True back to Ready; heartbeats every 20-45 s),
and Leases are renewed every nodeLeaseDurationSeconds / 4, well inside the controller-manager's
node-monitor-grace-period (control_plane.py).
"""

from __future__ import annotations

#: kwok's own default (written out so that the relation to the grace period is visible here).
NODE_LEASE_DURATION_SECONDS = 40

#: How long a Ready=False pod of a managed node stays so before kwok marks it Ready again.
RECOVERY_DELAY_MS = 1000

OPTIONS = f"""\
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  nodeLeaseDurationSeconds: {NODE_LEASE_DURATION_SECONDS}
"""

# The status kwok writes for a pod that starts running: kwok v0.7.0's default `pod-ready`.
_READY_STATUS = """\
    statusTemplate: |
      {{ $now := Now }}

      conditions:
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Initialized
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Ready
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: ContainersReady
      {{ range .spec.readinessGates }}
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: {{ .conditionType | Quote }}
      {{ end }}

      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: true
        restartCount: 0
        state:
          running:
            startedAt: {{ $now | Quote }}
      {{ end }}

      initContainerStatuses:
      {{ range .spec.initContainers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: true
        restartCount: 0
        {{ if eq .restartPolicy "Always" }}
        started: true
        state:
          running:
            startedAt: {{ $now | Quote }}
        {{ else }}
        state:
          terminated:
            exitCode: 0
            finishedAt: {{ $now | Quote }}
            reason: Completed
            startedAt: {{ $now | Quote }}
        {{ end }}
      {{ end }}

      hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
      podIP: {{ PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) | Quote }}
      phase: Running
      startTime: {{ $now | Quote }}
"""

POD_READY = """\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-ready
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.podIP'
      operator: 'DoesNotExist'
  next:
""" + _READY_STATUS

# Only the conditions the node lifecycle controller turns False (Ready; ContainersReady for a
# pod some other hand touched): the pod keeps its IP, start time and container states.
POD_READY_AGAIN = f"""\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-ready-again
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.podIP'
      operator: 'Exists'
    - key: '.status.phase'
      operator: 'In'
      values:
      - 'Running'
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'NotIn'
      values:
      - 'True'
  delay:
    durationMilliseconds: {RECOVERY_DELAY_MS}
  next:
    statusTemplate: |
      {{{{ $now := Now }}}}
      conditions:
      - lastTransitionTime: {{{{ $now | Quote }}}}
        status: "True"
        type: Ready
      - lastTransitionTime: {{{{ $now | Quote }}}}
        status: "True"
        type: ContainersReady
"""

POD_COMPLETE = """\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-complete
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values:
      - 'Running'
    - key: '.metadata.ownerReferences.[].kind'
      operator: 'In'
      values:
      - 'Job'
  next:
    statusTemplate: |
      {{ $now := Now }}
      {{ $root := . }}
      containerStatuses:
      {{ range $index, $item := .spec.containers }}
      {{ $origin := index $root.status.containerStatuses $index }}
      - image: {{ $item.image | Quote }}
        name: {{ $item.name | Quote }}
        ready: false
        restartCount: 0
        started: false
        state:
          terminated:
            exitCode: 0
            finishedAt: {{ $now | Quote }}
            reason: Completed
            startedAt: {{ $now | Quote }}
      {{ end }}
      phase: Succeeded
"""

POD_DELETE = """\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-delete
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'Exists'
  next:
    finalizers:
      empty: true
    delete: true
"""

POD_STAGES = (POD_READY, POD_READY_AGAIN, POD_COMPLETE, POD_DELETE)


def config() -> str:
    """The whole `kwok --config` file: options, then the pod stages, as one YAML stream."""
    return "---\n".join((OPTIONS, *POD_STAGES))
