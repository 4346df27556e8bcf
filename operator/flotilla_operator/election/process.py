"""`flotilla operator --leader-elect`: the operator process when replicas elect a leader.

1. The metrics endpoint and /livez, /readyz start at once (a standby is scraped and probed too).
2. Campaign (elector.py) until this replica holds the Lease; SIGTERM meanwhile ends the process.
3. Run kopf (every handler, loop and resync of handlers.py) with a stop flag and a ready flag,
   while a task renews the Lease.
4. A clean stop (SIGTERM: kopf's own handling) releases the Lease, so the standby takes over at its
   next try rather than after a lease duration.
5. Leadership lost (another holder, or no renewal within the renew deadline): the process exits at
   once with EXIT_LOST, as client-go's controllers do, so that no reconcile of a deposed leader
   overlaps the new one's; Kubernetes restarts it as a standby.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys

import kopf

from .. import metrics
from ..clients.kube import Kube, load_api_client
from ..settings import Settings
from .elector import Elector
from .health import Health
from .lease import Timing

EXIT_LOST = 3
logger = logging.getLogger("flotilla.election")


def _exit_lost(why: str) -> None:
    """Exit now, without the graceful stop (whose reconciles would overlap the next leader's)."""
    logger.error(f"election: lost the leader election Lease ({why}); exiting")  # timestamped
    for handler in logging.getLogger().handlers:
        handler.flush()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(EXIT_LOST)


def _on_keeper_done(task: asyncio.Task) -> None:
    """The renewal task ends only when leadership is lost (or fails): exit. Cancelled: a clean stop."""
    if task.cancelled():
        return
    exc = task.exception()
    _exit_lost(repr(exc) if exc else task.result())


async def run_elected(settings: Settings) -> int:
    e = settings.election
    timing = Timing(e.lease_duration_s, e.renew_deadline_s, e.retry_period_s)
    namespace = e.lease_namespace()
    memo = kopf.Memo(settings=settings)
    if settings.metrics_port >= 0:
        server = metrics.MetricsServer(settings.metrics_host, settings.metrics_port)
        print(f"flotilla operator: metrics {server.start()}", flush=True)
        memo["metrics_server"] = server  # handlers.startup leaves it running, cleanup stops it
    kube = Kube(await load_api_client(), settings.field_manager)
    elector = Elector(kube, namespace, e.name, e.identity, timing)
    health = Health(elector)
    print(f"flotilla operator: leader election for Lease {namespace}/{e.name} as {e.identity} "
          f"(duration {timing.lease_duration_s:g}s, renew deadline {timing.renew_deadline_s:g}s, "
          f"retry {timing.retry_period_s:g}s); health {await health.start(e.health_host, e.health_port)}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)  # kopf replaces these with its own once it runs
    try:
        if not await elector.campaign(stop):
            return 0
        print(f"flotilla operator: {e.identity} leads; starting the operator", flush=True)
        ready = asyncio.Event()
        health.kopf_ready = ready
        # Created before kopf starts, so that kopf's end-of-run sweep leaves it alone.
        keeper = asyncio.create_task(elector.keep(), name="flotilla-lease-keeper")
        keeper.add_done_callback(_on_keeper_done)
        try:
            await kopf.operator(
                standalone=True,
                clusterwide=settings.clusterwide,
                namespaces=list(settings.namespaces),
                liveness_endpoint=settings.liveness_url,
                memo=memo,
                stop_flag=stop,
                ready_flag=ready,
            )
        finally:
            keeper.cancel()
            await asyncio.gather(keeper, return_exceptions=True)
            await elector.release()
        return 0
    finally:
        await health.stop()
        server = memo.get("metrics_server")
        if server is not None:
            server.stop()
        await kube.close()
