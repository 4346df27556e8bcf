"""CreateAcls (key 30): add ACL bindings (`kafka-acls --add`, Admin.createAcls), stored in the
cluster metadata (broker/metadata/acls.py) so every broker's authorizer enforces them.

As Kafka: SECURITY_DISABLED without an authorizer, CLUSTER_AUTHORIZATION_FAILED without ALTER on
the cluster, INVALID_REQUEST (with the reason) for a binding Kafka refuses; each creation has its
own result. Creating a binding that exists already succeeds.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.metadata.store import Conflict, StoreUnavailable
from broker.security.acl import AclBinding, AclOperation, InvalidAcl
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext

NO_AUTHORIZER = "No Authorizer is configured."


class CreateAclsHandler(Handler):
    api_key = 30
    min_version = 1  # Kafka 4 removed v0 (KIP-896)
    max_version = 3

    async def handle(self, ctx: RequestContext, request):
        if self.broker.authorizer is None:
            return self._answer(ctx, [(ErrorCode.security_disabled, NO_AUTHORIZER)] * len(request.creations))
        if not ctx.authz.cluster(AclOperation.ALTER):
            return self._answer(ctx, [(ErrorCode.cluster_authorization_failed, None)] * len(request.creations))
        results: list[tuple[ErrorCode, str | None]] = []
        valid: list[AclBinding] = []
        for c in request.creations:
            try:
                valid.append(AclBinding.create(c.resource_type, c.resource_name, c.resource_pattern_type,
                                               c.principal, c.host, c.operation, c.permission_type))
                results.append((ErrorCode.none, None))
            except InvalidAcl as e:
                results.append((ErrorCode.invalid_request, str(e)))
        if valid:
            try:
                await self.broker.acls.update(lambda current: current | set(valid))
            except (StoreUnavailable, Conflict) as e:
                message = f"cluster metadata store unavailable: {e}"
                results = [(ErrorCode.request_timed_out, message) if code == ErrorCode.none else (code, m)
                           for code, m in results]
        return self._answer(ctx, results)

    def _answer(self, ctx: RequestContext, results):
        return ctx.build("CreateAclsResponse", throttle_time=NO_THROTTLE, results=tuple(
            ctx.build("AclCreationResult", error_code=code, error_message=message) for code, message in results))

    def error_response(self, ctx: RequestContext, request, code: ErrorCode, message: str):
        return self._answer(ctx, [(code, message)] * len(request.creations))


HANDLER = CreateAclsHandler
