"""ApiVersions (key 18): which APIs and versions this broker serves. Clients ask first.

v3+ also carries features (KIP-584): only `transaction.version` 1 is offered and finalized, so
clients use transactions without KIP-890 part 2 (no epoch bump at each commit, no implicit
AddPartitions in Produce v12, no EndTxn v5 semantics); Kafka 4.x finalizes 2.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.server.handlers.base import NO_THROTTLE, Handler, RequestContext


# name -> (supported min, supported max, finalized level)
FEATURES = {"transaction.version": (0, 1, 1)}
FEATURES_EPOCH = 0


class ApiVersionsHandler(Handler):
    api_key = 18
    min_version = 0
    max_version = 4

    async def handle(self, ctx: RequestContext, request):
        supported = self.broker.dispatcher.supported
        keys = tuple(ctx.build("ApiVersion", api_key=k, min_version=lo, max_version=hi)
                     for k, (lo, hi) in sorted(supported.items()))
        supported_features = tuple(ctx.build("SupportedFeatureKey", name=n, min_version=lo, max_version=hi)
                                   for n, (lo, hi, _) in FEATURES.items()) if ctx.api_version >= 3 else ()
        finalized = tuple(ctx.build("FinalizedFeatureKey", name=n, min_version_level=level, max_version_level=level)
                          for n, (_, _, level) in FEATURES.items()) if ctx.api_version >= 3 else ()
        return ctx.build("ApiVersionsResponse", error_code=ErrorCode.none, api_keys=keys, throttle_time=NO_THROTTLE,
                         supported_features=supported_features, finalized_features_epoch=FEATURES_EPOCH,
                         finalized_features=finalized)


HANDLER = ApiVersionsHandler
