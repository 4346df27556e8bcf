"""DescribeAcls (key 29): the ACL bindings matching a filter (`kafka-acls --list`,
Admin.describeAcls), grouped by resource pattern as Kafka answers them.

SECURITY_DISABLED without an authorizer, CLUSTER_AUTHORIZATION_FAILED without DESCRIBE on the
cluster, INVALID_REQUEST for a filter with UNKNOWN elements.
"""

from __future__ import annotations

from itertools import groupby

from kio.schema.errors import ErrorCode

from broker.security.acl import AclBindingFilter, AclOperation, InvalidAcl
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext
from broker.apis.handlers.create_acls import NO_AUTHORIZER


class DescribeAclsHandler(Handler):
    api_key = 29
    min_version = 1  # Kafka 4 removed v0 (KIP-896)
    max_version = 3

    async def handle(self, ctx: RequestContext, request):
        if self.broker.authorizer is None:
            return self._error(ctx, ErrorCode.security_disabled, NO_AUTHORIZER)
        if not ctx.authz.cluster(AclOperation.DESCRIBE):
            return self._error(ctx, ErrorCode.cluster_authorization_failed, None)
        try:
            f = AclBindingFilter.create(request.resource_type_filter, request.resource_name_filter,
                                        request.pattern_type_filter, request.principal_filter, request.host_filter,
                                        request.operation, request.permission_type)
        except InvalidAcl as e:
            return self._error(ctx, ErrorCode.invalid_request, str(e))
        matching = sorted((b for b in self.broker.acls.acls if f.matches(b)), key=lambda b: b.sort_key)
        resources = []
        for (rt, pt, name), acls in groupby(matching, key=lambda b: (b.resource_type, b.pattern_type, b.name)):
            resources.append(ctx.build(
                "DescribeAclsResource", resource_type=rt, resource_name=name, pattern_type=pt, acls=tuple(
                    ctx.build("AclDescription", principal=b.principal, host=b.host, operation=b.operation,
                              permission_type=b.permission) for b in acls)))
        return ctx.build("DescribeAclsResponse", throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                         error_message=None, resources=tuple(resources))

    def _error(self, ctx: RequestContext, code: ErrorCode, message: str | None):
        return ctx.build("DescribeAclsResponse", throttle_time=NO_THROTTLE, error_code=code, error_message=message,
                         resources=())

    def error_response(self, ctx: RequestContext, request, code: ErrorCode, message: str):
        return self._error(ctx, code, message)


HANDLER = DescribeAclsHandler
