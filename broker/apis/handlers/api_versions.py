"""ApiVersions (key 18): which APIs and versions this broker serves. Clients ask first.

v3+ also carries features (KIP-584): only `transaction.version` 1 is offered and finalized, so
clients use transactions without KIP-890 part 2 (no epoch bump at each commit, no implicit
AddPartitions in Produce v12, no EndTxn v5 semantics); Kafka 4.x finalizes 2.

Before v4 a feature whose supported range starts at 0 is left out, as Kafka 4.1 does (KAFKA-17011):
clients before 3.9 (Spark 3.5 ships kafka-clients 3.4) reject such a range and their network thread
dies on it. Finalized features are sent at every version from 3, except those at level 0 (off).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext


# name -> (supported min, supported max, finalized level)
FEATURES = {"transaction.version": (0, 1, 1)}
FEATURES_EPOCH = 0


def supported_ranges(api_version: int) -> list[tuple[str, int, int]]:
    """(name, min, max) of each supported feature as answered at this request version."""
    if api_version < 3:
        return []
    return [(name, lo, hi) for name, (lo, hi, _) in FEATURES.items() if lo > 0 or api_version >= 4]


def finalized_levels(api_version: int) -> list[tuple[str, int]]:
    """(name, level) of each finalized feature; level 0 means off and is not sent."""
    if api_version < 3:
        return []
    return [(n, level) for n, (_, _, level) in FEATURES.items() if level > 0]


class ApiVersionsHandler(Handler):
    api_key = 18
    min_version = 0
    max_version = 4

    async def handle(self, ctx: RequestContext, request):
        supported = self.broker.dispatcher.supported
        keys = tuple(ctx.build("ApiVersion", api_key=k, min_version=lo, max_version=hi)
                     for k, (lo, hi) in sorted(supported.items()))
        supported_features = tuple(ctx.build("SupportedFeatureKey", name=n, min_version=lo, max_version=hi)
                                   for n, lo, hi in supported_ranges(ctx.api_version))
        finalized = tuple(ctx.build("FinalizedFeatureKey", name=n, min_version_level=level, max_version_level=level)
                          for n, level in finalized_levels(ctx.api_version))
        return ctx.build("ApiVersionsResponse", error_code=ErrorCode.none, api_keys=keys, throttle_time=NO_THROTTLE,
                         supported_features=supported_features, finalized_features_epoch=FEATURES_EPOCH,
                         finalized_features=finalized)


HANDLER = ApiVersionsHandler
