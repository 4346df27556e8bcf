"""`python -m bench security`: what TLS, SCRAM and the authorizer cost. For Flotilla and for Apache
Kafka 4.1 (one broker each, configured alike), one librdkafka producer and then one consumer, each
for a fixed time, over the PLAINTEXT listener and over the SASL_SSL listener (SCRAM-SHA-512, as a
user whose rights come from prefixed ACLs); writes bench/results/security.{json,md} with each
side's SASL_SSL / PLAINTEXT ratio and the Flotilla / Apache ratio (bench/commands/security_report.py).

Both brokers: a PLAINTEXT listener (User:ANONYMOUS, a super user: the harness's admin and the
plaintext measurement) and a SASL_SSL listener with SCRAM-SHA-512 (TLS with the test PKI of
flotilla/testenv/brokers/tls_certs.py), `authorizer.class.name` = StandardAuthorizer,
`allow.everyone.if.no.acl.found=false`, and for the bench user PREFIXED ALLOW ACLs on topics
`bench-` (Describe, Write, Read) and groups `bench-` (Read).
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from bench import REPO_ROOT, RESULTS, WORK
from bench.commands import security_report

USER, PASSWORD = "bench", "bench-secret"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
PREFIX = "bench-"
BROKERS = ("PLAINTEXT listener and SASL_SSL listener with SCRAM-SHA-512 (TLS, server certificate only, "
           "PEM keystore), StandardAuthorizer on, `allow.everyone.if.no.acl.found=false`, super user User:ANONYMOUS "
           "(the PLAINTEXT clients), PREFIXED ALLOW ACLs for User:bench on topics and groups `bench-`; "
           "`num.partitions` 1, `log.flush.interval.messages` Kafka's default; Apache Kafka with the JVM options of "
           "kafka-server-start.sh (1 GB heap, G1, C2 JIT)")
CLIENT = ("confluent-kafka (librdkafka) in a child process; producer acks=1, linger.ms=5, batch.size=65536, "
          "no compression, 1 KiB records, as fast as it can for the phase's time; consumer reads that "
          "topic from offset 0 by assignment (no group join), for at most the phase's time")


def _progress(t0: float, msg: str) -> None:
    print(f"[security {time.monotonic() - t0:6.0f}s] {msg}", file=sys.stderr, flush=True)


def make_broker(target: str, workdir: Path, pki) -> tuple[Any, int]:
    """An unstarted broker of `target` and its SASL_SSL port."""
    from flotilla.testenv.brokers.broker_process import FlotillaBroker, free_port

    port, sasl_port = free_port(), free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{port},SASL_SSL://127.0.0.1:{sasl_port}"
    protocol_map = "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL"
    scram = [f"SCRAM-SHA-512=[name={USER},password={PASSWORD}]"]
    settings = {
        "advertised.listeners": listeners,
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
            f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{USER}" password="{PASSWORD}";',
        "ssl.keystore.type": "PEM",
        "listener.name.sasl_ssl.ssl.keystore.location": str(pki.broker_keystore),
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:ANONYMOUS",
        "allow.everyone.if.no.acl.found": "false",
        "auto.create.topics.enable": "false",
        "num.partitions": "1",
        "group.initial.rebalance.delay.ms": "0",
    }
    workdir.mkdir(parents=True, exist_ok=True)
    if target == "apache":
        from bench.harness.targets import apache_class

        ApacheKafka = apache_class()  # kafka-server-start.sh's JVM options, not the tests' C1-only JIT
        controller = free_port()
        settings["listeners"] = f"{listeners},CONTROLLER://127.0.0.1:{controller}"
        settings["listener.security.protocol.map"] = f"{protocol_map},CONTROLLER:PLAINTEXT"
        return ApacheKafka(workdir, port=port, controller_port=controller, overrides=settings,
                           scram_credentials=scram), sasl_port
    credentials = workdir / "scram-credentials"
    credentials.write_text(scram[0] + "\n")
    settings.update({"listeners": listeners, "listener.security.protocol.map": protocol_map,
                     "flotilla.sasl.scram.credentials.file": str(credentials)})
    return FlotillaBroker(workdir, port=port, overrides=settings), sasl_port


def grant(admin) -> None:
    """The bench user's rights: prefixed ACLs, as a team would be given a namespace of topics."""
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    allow = AclPermissionType.ALLOW
    bindings = [AclBinding(ResourceType.TOPIC, PREFIX, ResourcePatternType.PREFIXED, f"User:{USER}", "*", op, allow)
                for op in (AclOperation.DESCRIBE, AclOperation.WRITE, AclOperation.READ)]
    bindings.append(AclBinding(ResourceType.GROUP, PREFIX, ResourcePatternType.PREFIXED, f"User:{USER}", "*",
                               AclOperation.READ, allow))
    for f in admin.create_acls(bindings).values():
        f.result(30)


def client(cmd: str, conf: dict[str, str], topic: str, seconds: float, last: str) -> dict[str, Any]:
    """One phase in a child process: its JSON answer, or {"error": ...}."""
    argv = [sys.executable, "-m", "bench.clients.security_client", cmd, json.dumps(conf), topic, str(seconds), last]
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 180, cwd=REPO_ROOT)
    except subprocess.TimeoutExpired:
        return {"error": f"{cmd} did not finish within {seconds + 180:.0f} s"}
    if p.returncode:
        return {"error": (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def run_target(target: str, base: Path, pki, args: argparse.Namespace, t0: float) -> dict[str, Any]:
    """Start `target`, grant the ACLs, then warm up and measure each transport; stop it."""
    from confluent_kafka.admin import AdminClient, NewTopic

    broker, sasl_port = make_broker(target, base / target, pki)
    _progress(t0, f"{target}: starting")
    broker.start()
    out: dict[str, Any] = {}
    admin = None
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        grant(admin)
        confs = {"plaintext": {"bootstrap.servers": broker.bootstrap},
                 "sasl_ssl": {"bootstrap.servers": f"127.0.0.1:{sasl_port}", "security.protocol": "SASL_SSL",
                              "ssl.ca.location": str(pki.ca_file), "sasl.mechanism": "SCRAM-SHA-512",
                              "sasl.username": USER, "sasl.password": PASSWORD}}
        for transport, conf in confs.items():
            topics = {k: f"{PREFIX}{transport}-{k}-{uuid.uuid4().hex[:6]}" for k in ("warm", "timed")}
            for name in topics.values():
                admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
            _progress(t0, f"{target} {transport}: warm-up produce {args.warmup:.0f} s (not timed)")
            warm = client("produce", conf, topics["warm"], args.warmup, str(args.size))
            res: dict[str, Any] = {"warmup": warm}
            for phase, last in (("produce", str(args.size)), ("consume", f"{PREFIX}group-{uuid.uuid4().hex[:6]}")):
                _progress(t0, f"{target} {transport}: {phase} for {args.seconds:.0f} s")
                res[phase] = client(phase, conf, topics["timed"], args.seconds, last)
                rt = security_report.rates(res[phase])
                _progress(t0, f"{target} {transport}: {phase} " + (
                    f"{rt['records_per_sec']:,.0f} records/s, {rt['mb_per_sec']:.1f} MiB/s" if rt
                    else f"FAILED: {res[phase].get('error')}"))
            out[transport] = res
    except Exception as e:  # the run goes on with the other target; the report says what failed
        out["error"] = f"{type(e).__name__}: {e}"
        _progress(t0, f"{target}: FAILED: {out['error']}\n{broker.log_tail(20)}")
    finally:
        del admin  # before the broker goes: a live admin client would keep reconnecting, noisily
        broker.close()
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench security", description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=12.0, help="time of each timed phase (default 12)")
    ap.add_argument("--warmup", type=float, default=10.0,
                    help="untimed produce before each transport (default 10: the JVM's C2 compiles TLS's AES-GCM)")
    ap.add_argument("--size", type=int, default=1024, help="record size in bytes (default 1024)")
    ap.add_argument("--targets", default="flotilla,apache")
    ap.add_argument("--out", type=Path, default=RESULTS / "security")
    ap.add_argument("--note", default="", help="a sentence on the machine's state, put in the report")
    args = ap.parse_args(argv)

    from bench.harness import machine
    from flotilla.testenv.brokers.tls_certs import make_pki

    t0 = time.monotonic()
    base = WORK / f"security-{uuid.uuid4().hex[:6]}"
    pki = make_pki(base / "pki")
    results = {t: run_target(t, base, pki, args, t0) for t in args.targets.split(",")}
    doc = {"when": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "settings": {"brokers": BROKERS, "client": CLIENT, "seconds": args.seconds, "warmup": args.warmup,
                        "size": args.size},
           "machine": machine.describe(), "machine_note": args.note, "results": results,
           "ratios": security_report.ratios(results)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(doc, indent=2) + "\n")
    args.out.with_suffix(".md").write_text(security_report.render(doc))
    _progress(t0, f"wrote {args.out}.md and .json")
    failed = [t for t, r in results.items() if r.get("error") or any(
        (r.get(tr, {}).get(p) or {}).get("error") for tr in security_report.TRANSPORTS for p in security_report.PHASES)]
    return 1 if failed else 0
