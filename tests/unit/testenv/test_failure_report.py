"""What a failed cluster test's report carries: cluster state, control-plane log tails, and the
operator's log lines of that test only."""

from __future__ import annotations

import logging
import subprocess

from flotilla.testenv import failure_report
from flotilla.testenv.processes import ProcessRecord


class Cluster:
    """A stand-in for KubeEnv/ControlPlane: canned kubectl answers, log files on disk."""

    def __init__(self, records):
        self.records = records
        self.calls = []

    @property
    def control_plane(self):
        return self

    def kubectl(self, *args, check=True, timeout=None):
        self.calls.append(args)
        if args[:2] == ("get", "events"):
            out = "".join(f"event {i}\n" for i in range(200))
        else:
            out = "NAMESPACE  NAME  READY\ndemo  pod/demo-broker-0  0/1\n"
        return subprocess.CompletedProcess(args, 0, out, "")


def test_sections_hold_objects_events_and_the_tails_of_the_right_logs(tmp_path):
    records = []
    for name in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"):
        log = tmp_path / f"{name}.log"
        log.write_text("".join(f"{name} line {i}\n" for i in range(100)))
        records.append(ProcessRecord(name, 1, 1, str(log)))
    sections = dict(failure_report.cluster_sections(Cluster(records)))
    assert "pod/demo-broker-0" in sections["kubectl get pods,nodes -A -o wide"]
    events = sections[f"kubectl get events -A (last {failure_report.EVENT_LINES})"].splitlines()
    assert events[-1] == "event 199" and len(events) == failure_report.EVENT_LINES
    tails = {title.split()[0]: text for title, text in sections.items() if "log tail" in title}
    assert sorted(tails) == ["kube-controller-manager", "kube-scheduler", "kwok"]
    assert tails["kwok"].splitlines()[-1] == "kwok line 99"
    assert len(tails["kwok"].splitlines()) == failure_report.LOG_TAIL_LINES


def test_a_kubectl_that_hangs_is_reported_not_raised():
    class Hung(Cluster):
        def kubectl(self, *args, check=True, timeout=None):
            raise subprocess.TimeoutExpired(["kubectl", *args], timeout)

    sections = dict(failure_report.cluster_sections(Hung([])))
    assert "timed out" in sections["kubectl get pods,nodes -A -o wide"]


def test_operator_log_lines_since_a_mark():
    recent = failure_report.RecentLog(keep=5)
    recent.install()
    try:
        log = logging.getLogger("flotilla_operator.test")
        log.setLevel(logging.INFO)
        log.info("before the test")
        mark = recent.mark()
        for i in range(3):
            log.info("reconciled %d", i)
        logging.getLogger("unrelated").warning("not the operator")
        assert [line.split(": ", 1)[1] for line in recent.since(mark)] == [f"reconciled {i}" for i in range(3)]
        for i in range(10):
            log.info("more %d", i)
        assert len(recent.since(mark)) == 5  # only what is still kept
    finally:
        for name in recent.LOGGERS:
            logging.getLogger(name).removeHandler(recent)
