"""DescribeUserScramCredentials (key 50, KIP-554): each user's SCRAM mechanisms and iterations
(never salts or keys). The decisions are broker/security/scram_admin.py's."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.security import scram_admin
from broker.security.acl import AclOperation
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext


class DescribeUserScramCredentialsHandler(Handler):
    api_key = 50
    min_version = 0
    max_version = 0

    async def handle(self, ctx: RequestContext, request):
        if not ctx.authz.cluster(AclOperation.DESCRIBE):
            return self.error_response(ctx, request, ErrorCode.cluster_authorization_failed,
                                       "Cluster authorization failed.")
        known = scram_admin.effective(self.broker.scram, self.broker.scram_store)
        users = None if request.users is None else [u.name for u in request.users]
        results = tuple(ctx.build(
            "DescribeUserScramCredentialsResult", user=r.user, error_code=r.error, error_message=r.message,
            credential_infos=tuple(ctx.build("CredentialInfo", mechanism=m, iterations=i) for m, i in r.credentials))
            for r in scram_admin.describe(known, users))
        return ctx.build("DescribeUserScramCredentialsResponse", throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                         error_message=None, results=results)

    def error_response(self, ctx: RequestContext, request, code: ErrorCode, message: str):
        """Kafka's getErrorResponse: the error at the top, and once per user asked about."""
        results = tuple(ctx.build("DescribeUserScramCredentialsResult", user=u.name, error_code=code,
                                  error_message=message, credential_infos=()) for u in (request.users or ()))
        return ctx.build("DescribeUserScramCredentialsResponse", throttle_time=NO_THROTTLE, error_code=code,
                         error_message=message, results=results)


HANDLER = DescribeUserScramCredentialsHandler
