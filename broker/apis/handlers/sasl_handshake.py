"""SaslHandshake (key 17) reaching the dispatcher: the connection is on a listener without SASL, or
already authenticated (no re-authentication, KIP-152, yet). Kafka's KafkaApis answers
ILLEGAL_SASL_STATE then; the handshake itself is broker/security/authenticator.py's."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.apis.handlers.base import Handler, RequestContext


class SaslHandshakeHandler(Handler):
    api_key = 17
    min_version = 0
    max_version = 1

    async def handle(self, ctx: RequestContext, request):
        return ctx.build("SaslHandshakeResponse", error_code=ErrorCode.illegal_sasl_state, mechanisms=())


HANDLER = SaslHandshakeHandler
