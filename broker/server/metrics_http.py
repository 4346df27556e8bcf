"""HTTP endpoint of a broker: Prometheus /metrics, the /healthz liveness probe and the /readyz
readiness probe (aiohttp; the rule behind /readyz is in readiness.py)."""

from __future__ import annotations

from typing import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from broker.server.metrics import BrokerMetrics
from broker.server.readiness import NOT_STARTED, Readiness


async def start_metrics_server(metrics: BrokerMetrics, host: str, port: int, healthy: Callable[[], bool],
                               ready: Callable[[], Readiness] = lambda: NOT_STARTED,
                               started: Callable[[], bool] = lambda: True) -> tuple[web.AppRunner, int]:
    """The listener is up from the start of start-up (a broker waiting for the API server
    answers /healthz); /metrics answers 503 until the broker has started (a scrape then shows
    the target down, which it is)."""

    async def handle_metrics(_request: web.Request) -> web.Response:
        if not started():
            return web.Response(status=503, text="starting\n")
        body = generate_latest(metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def handle_health(_request: web.Request) -> web.Response:
        ok = healthy()
        return web.Response(status=200 if ok else 503, text="ok\n" if ok else "starting or stopping\n")

    async def handle_ready(_request: web.Request) -> web.Response:
        answer = ready()
        return web.Response(status=200 if answer.ready else 503, text=answer.text)

    app = web.Application()
    app.router.add_get("/metrics", handle_metrics)
    app.router.add_get("/healthz", handle_health)
    app.router.add_get("/readyz", handle_ready)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_address=True)
    await site.start()
    bound_port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, bound_port
