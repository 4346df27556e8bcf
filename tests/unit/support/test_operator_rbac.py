"""The operator log check of the RBAC e2e tests (tests/support/operator_rbac.py): it finds a 403
in every form the log prints one, and not in a timestamp's milliseconds, a port or an id."""

import json

from flotilla_operator.clients.kube import ApiError
from kubernetes_asyncio.client.exceptions import ApiException
from tests.support.operator_rbac import refusals

MESSAGE = ('services is forbidden: User "system:serviceaccount:flotilla-system:flotilla-operator" '
           'cannot patch resource "services" in API group "" in the namespace "ns"')
STATUS = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
          "message": MESSAGE, "reason": "Forbidden", "code": 403}


def test_a_403_is_found_as_each_client_prints_it():
    printed = [
        f"[2026-12-07 05:32:26,403] kopf.objects [ERROR] Handler 'reconcile' failed: {ApiError(403, MESSAGE)}",
        f"Request attempt 1 failed; will retry: PATCH ... -> APIForbiddenError({MESSAGE!r}, {STATUS!r}, status=403)",
        "kopf._core.reactor.o [WARNING ] Not enough permissions to watch for resources: changes will not be noticed",
        "error: HTTP 403: no reason given",
        "{'code': 403}",
    ]
    for line in printed:
        assert refusals(line) == [line], line
    api_exception = ApiException(status=403, reason="Forbidden")  # "(403)\nReason: Forbidden\n..."
    api_exception.body = json.dumps(STATUS)
    assert refusals(str(api_exception))[:2] == ["(403)", "Reason: Forbidden"]


def test_timestamps_ports_and_ids_are_not_a_403():
    log = "\n".join([
        "[2026-12-07 05:32:26,403] flotilla.operator [INFO    ] kube context 'operator'",
        "metrics http://127.0.0.1:40403/metrics, liveness on 127.0.0.1:4030",
        "KafkaCluster ns/chart uid 4031-403a reconciled in 0.403 s (generation 403)",
    ])
    assert refusals(log) == []
