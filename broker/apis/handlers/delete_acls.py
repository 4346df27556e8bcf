"""DeleteAcls (key 31): remove the ACL bindings matching each filter (`kafka-acls --remove`,
Admin.deleteAcls) and say, per filter, which were removed.

SECURITY_DISABLED without an authorizer, CLUSTER_AUTHORIZATION_FAILED without ALTER on the
cluster, INVALID_REQUEST for a filter with UNKNOWN elements; all filters apply in one write.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.metadata.store import Conflict, StoreUnavailable
from broker.security.acl import AclBindingFilter, AclOperation, InvalidAcl
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext
from broker.apis.handlers.create_acls import NO_AUTHORIZER


class DeleteAclsHandler(Handler):
    api_key = 31
    min_version = 1  # Kafka 4 removed v0 (KIP-896)
    max_version = 3

    async def handle(self, ctx: RequestContext, request):
        if self.broker.authorizer is None:
            return self._errors(ctx, request, ErrorCode.security_disabled, NO_AUTHORIZER)
        if not ctx.authz.cluster(AclOperation.ALTER):
            return self._errors(ctx, request, ErrorCode.cluster_authorization_failed, None)
        filters: list[AclBindingFilter | InvalidAcl] = []
        for f in request.filters:
            try:
                filters.append(AclBindingFilter.create(f.resource_type_filter, f.resource_name_filter,
                                                       f.pattern_type_filter, f.principal_filter, f.host_filter,
                                                       f.operation, f.permission_type))
            except InvalidAcl as e:
                filters.append(e)
        removed: list[list] = [[] for _ in filters]

        def change(current):
            for i, f in enumerate(filters):  # again from scratch if the write is retried
                removed[i] = [] if isinstance(f, InvalidAcl) else sorted(
                    (b for b in current if f.matches(b)), key=lambda b: b.sort_key)
            return current.difference(b for bs in removed for b in bs)

        try:
            await self.broker.acls.update(change)
        except (StoreUnavailable, Conflict) as e:
            return self._errors(ctx, request, ErrorCode.request_timed_out, f"cluster metadata store unavailable: {e}")
        results = []
        for f, bindings in zip(filters, removed):
            if isinstance(f, InvalidAcl):
                results.append(ctx.build("DeleteAclsFilterResult", error_code=ErrorCode.invalid_request,
                                         error_message=str(f), matching_acls=()))
                continue
            results.append(ctx.build("DeleteAclsFilterResult", error_code=ErrorCode.none, error_message=None,
                                     matching_acls=tuple(ctx.build(
                                         "DeleteAclsMatchingAcl", error_code=ErrorCode.none, error_message=None,
                                         resource_type=b.resource_type, resource_name=b.name,
                                         pattern_type=b.pattern_type, principal=b.principal, host=b.host,
                                         operation=b.operation, permission_type=b.permission) for b in bindings)))
        return ctx.build("DeleteAclsResponse", throttle_time=NO_THROTTLE, filter_results=tuple(results))

    def _errors(self, ctx: RequestContext, request, code: ErrorCode, message: str | None):
        return ctx.build("DeleteAclsResponse", throttle_time=NO_THROTTLE, filter_results=tuple(
            ctx.build("DeleteAclsFilterResult", error_code=code, error_message=message, matching_acls=())
            for _ in request.filters))

    def error_response(self, ctx: RequestContext, request, code: ErrorCode, message: str):
        return self._errors(ctx, request, code, message)


HANDLER = DeleteAclsHandler
