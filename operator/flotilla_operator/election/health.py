"""/livez and /readyz of an operator replica under leader election, and its two gauges.

Ready means *able to serve or to take over*: the leader once kopf has started and while its Lease
is renewed within the renew deadline; a standby while it has read the Lease within the renew
deadline (the API server answers it, so it would take over when the leader goes). A ready standby
lets a RollingUpdate go on and the PodDisruptionBudget (minAvailable 1) count it: were only the
leader ready, a new pod could never become ready while the old leader lives, and every drain of
the leader's node would be refused. Which replica leads is the `flotilla_operator_leader` gauge
and the Lease itself (`kubectl get lease`). Live means the event loop answers (this handler runs in
it): a hung loop fails /livez.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Callable

from aiohttp import web

from .. import metrics
from . import lease as L
from .elector import Elector


class Health:
    def __init__(self, elector: Elector, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.elector, self._now = elector, monotonic
        self.kopf_ready: asyncio.Event | None = None
        self._runner: web.AppRunner | None = None
        self.port = 0
        leader, ready = metrics.election_gauges()
        leader.set_function(lambda: 1.0 if self.elector.leading else 0.0)
        ready.set_function(lambda: 1.0 if self.ready() else 0.0)

    def ready(self) -> bool:
        e, now = self.elector, self._now()
        if e.leading:
            return bool(self.kopf_ready and self.kopf_ready.is_set()) and L.still_leading(e.last_renewed, now, e.timing)
        return e.last_read is not None and now - e.last_read < e.timing.renew_deadline_s

    def state(self) -> dict[str, Any]:
        e = self.elector
        return {"identity": e.identity, "role": "leader" if e.leading else "standby", "holder": e.holder,
                "lease": f"{e.namespace}/{e.name}", "ready": self.ready()}

    async def _livez(self, _: web.Request) -> web.Response:
        return web.Response(text=json.dumps(self.state()), content_type="application/json")

    async def _readyz(self, _: web.Request) -> web.Response:
        state = self.state()
        return web.Response(status=200 if state["ready"] else 503, text=json.dumps(state),
                            content_type="application/json")

    async def start(self, host: str, port: int) -> str:
        app = web.Application()
        app.router.add_get("/livez", self._livez)
        app.router.add_get("/readyz", self._readyz)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return f"http://{host}:{self.port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
