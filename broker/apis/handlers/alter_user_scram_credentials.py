"""AlterUserScramCredentials (key 51, KIP-554): add, replace and delete users' SCRAM credentials
in the cluster metadata (broker/security/scram_store.py), checked as Kafka's controller does
(broker/security/scram_admin.py). Every broker authenticates with the new credentials once its
store has them (at once on this broker; a fleet's others through their watch)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.metadata.store import Conflict, StoreUnavailable
from broker.security import scram_admin
from broker.security.acl import AclOperation
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext


class AlterUserScramCredentialsHandler(Handler):
    api_key = 51
    min_version = 0
    max_version = 0

    async def handle(self, ctx: RequestContext, request):
        if not ctx.authz.cluster(AclOperation.ALTER):
            return self.error_response(ctx, request, ErrorCode.cluster_authorization_failed,
                                       "Cluster authorization failed.")
        store = self.broker.scram_store
        changes, results = scram_admin.plan_alter(dict(store.credentials), request.deletions, request.upsertions)
        if changes:
            try:
                await store.alter(changes)
            except (StoreUnavailable, Conflict) as e:
                failed = (ErrorCode.request_timed_out, f"cluster metadata store unavailable: {e}")
                results = [scram_admin.UserResult(r.user, *failed) if r.error == ErrorCode.none else r for r in results]
        return ctx.build("AlterUserScramCredentialsResponse", throttle_time=NO_THROTTLE, results=tuple(
            ctx.build("AlterUserScramCredentialsResult", user=r.user, error_code=r.error, error_message=r.message)
            for r in results))

    def error_response(self, ctx: RequestContext, request, code: ErrorCode, message: str):
        """Kafka's getErrorResponse: the error once per user named."""
        users = dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions])
        return ctx.build("AlterUserScramCredentialsResponse", throttle_time=NO_THROTTLE, results=tuple(
            ctx.build("AlterUserScramCredentialsResult", user=u, error_code=code, error_message=message)
            for u in users))


HANDLER = AlterUserScramCredentialsHandler
