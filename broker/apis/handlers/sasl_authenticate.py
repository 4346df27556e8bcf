"""SaslAuthenticate (key 36) reaching the dispatcher: no SASL exchange is under way on this
connection (a listener without SASL, or already authenticated), so, as Kafka's KafkaApis,
ILLEGAL_SASL_STATE. Tokens of a real exchange go to broker/security/authenticator.py."""

from __future__ import annotations

import datetime

from kio.schema.errors import ErrorCode

from broker.apis.handlers.base import Handler, RequestContext


class SaslAuthenticateHandler(Handler):
    api_key = 36
    min_version = 0
    max_version = 2

    async def handle(self, ctx: RequestContext, request):
        return ctx.build("SaslAuthenticateResponse", error_code=ErrorCode.illegal_sasl_state,
                         error_message="SaslAuthenticate request received after successful authentication",
                         auth_bytes=b"", session_lifetime=datetime.timedelta(0))


HANDLER = SaslAuthenticateHandler
