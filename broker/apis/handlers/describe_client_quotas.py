"""DescribeClientQuotas (key 48): the dynamic quotas whose entity matches a filter (KIP-546).

Each filter component names an entity type and matches it exactly (a name; a null name is the
default entity), as the default entity, or by any name; a strict filter also excludes entities
with types the filter does not mention. As Kafka, a component repeated or of an unknown type makes
the whole answer INVALID_REQUEST with no entries. Static defaults from the config are not listed
(Kafka lists only what is stored in its metadata, too).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.metadata.client_quotas import ENTITY_TYPES, QuotaEntity
from broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext, require

MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2


class InvalidFilter(ValueError):
    pass


def parse_filter(components) -> list[tuple[str, int, str | None]]:
    seen = set()
    out = []
    for c in components:
        if not c.entity_type:
            raise InvalidFilter("Invalid empty entity type.")
        if c.entity_type in seen:
            raise InvalidFilter(f"Entity type {c.entity_type} cannot appear more than once in the filter.")
        if c.entity_type not in ENTITY_TYPES:
            raise InvalidFilter(f"Unsupported entity type {c.entity_type} (supported: user, client-id).")
        if c.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY):
            raise InvalidFilter(f"Unknown match type {c.match_type}.")
        seen.add(c.entity_type)
        out.append((c.entity_type, int(c.match_type), c.match))
    return out


def matches(entity: QuotaEntity, components: list[tuple[str, int, str | None]], strict: bool) -> bool:
    names = entity.as_dict()
    for entity_type, match_type, match in components:
        if entity_type not in names:
            return False
        name = names[entity_type]
        if match_type == MATCH_DEFAULT or (match_type == MATCH_EXACT and match is None):
            if name is not None:
                return False
        elif match_type == MATCH_EXACT and name != match:
            return False
    return not strict or set(names) == {t for t, _, _ in components}


class DescribeClientQuotasHandler(Handler):
    api_key = 48
    min_version = 0
    max_version = 1

    async def handle(self, ctx: RequestContext, request):
        require(ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME, ErrorCode.cluster_authorization_failed)
        try:
            components = parse_filter(request.components)
        except InvalidFilter as e:
            return ctx.build("DescribeClientQuotasResponse", throttle_time=NO_THROTTLE,
                             error_code=ErrorCode.invalid_request, error_message=str(e), entries=None)
        entries = tuple(
            ctx.build("EntryData",
                      entity=tuple(ctx.build("EntityData", entity_type=t, entity_name=n) for t, n in entity.parts),
                      values=tuple(ctx.build("ValueData", key=k, value=v) for k, v in sorted(values.items())))
            for entity, values in sorted(self.broker.client_quotas.quotas.items(), key=lambda kv: kv[0].sort_key)
            if matches(entity, components, request.strict))
        return ctx.build("DescribeClientQuotasResponse", throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                         error_message=None, entries=entries)


HANDLER = DescribeClientQuotasHandler
