"""AlterClientQuotas (key 49): set or remove quota values of entities (KIP-546), stored in the
cluster metadata so that every broker applies them without a restart.

Each entry is checked and applied on its own, with its own error (INVALID_REQUEST and a message
naming what is wrong: an unknown entity type or quota key, a value that is not positive, a byte
rate that is not whole, a key twice in one entry); validate_only checks without applying. A
removal (`remove: true`) of a key the entity does not have is not an error, as in Kafka.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.metadata.client_quotas import QUOTA_KEYS, InvalidQuota, QuotaEntity, validate_value
from broker.metadata.store import Conflict, StoreUnavailable
from broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext, require


def parse_entry(entry) -> tuple[QuotaEntity, dict[str, float | None]]:
    entity = QuotaEntity.of((e.entity_type, e.entity_name) for e in entry.entity)
    entity.validate()
    changes: dict[str, float | None] = {}
    for op in entry.ops:
        if op.key in changes:
            raise InvalidQuota(f"quota key {op.key!r} appears twice for entity {entity}")
        if op.remove:
            if op.key not in QUOTA_KEYS:
                raise InvalidQuota(f"unknown quota key {op.key!r} (supported: {', '.join(QUOTA_KEYS)})")
            changes[op.key] = None
        else:
            validate_value(op.key, float(op.value))
            changes[op.key] = float(op.value)
    return entity, changes


class AlterClientQuotasHandler(Handler):
    api_key = 49
    min_version = 0
    max_version = 1

    async def handle(self, ctx: RequestContext, request):
        require(ctx, AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME, ErrorCode.cluster_authorization_failed)
        out = []
        for entry in request.entries:
            code, message = ErrorCode.none, None
            try:
                entity, changes = parse_entry(entry)
                if not request.validate_only and changes:
                    await self.broker.client_quotas.alter(entity, changes)
            except InvalidQuota as e:
                code, message = ErrorCode.invalid_request, str(e)
            except (StoreUnavailable, Conflict) as e:
                code, message = ErrorCode.request_timed_out, f"cluster metadata store unavailable: {e}"
            out.append(ctx.build("EntryData", error_code=code, error_message=message, entity=tuple(
                ctx.build("EntityData", entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity)))
        return ctx.build("AlterClientQuotasResponse", throttle_time=NO_THROTTLE, entries=tuple(out))

    def error_response(self, ctx: RequestContext, request, code: ErrorCode, message: str):
        return ctx.build("AlterClientQuotasResponse", throttle_time=NO_THROTTLE, entries=tuple(
            ctx.build("EntryData", error_code=code, error_message=message, entity=tuple(
                ctx.build("EntityData", entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity))
            for entry in request.entries))


HANDLER = AlterClientQuotasHandler
