"""The start-up check of the Kubernetes version (issue 41 item 6): kube_version.py's verdict from
/version documents as API servers write them, and the start-up step that logs it."""

from __future__ import annotations

import logging

from flotilla_operator import kube_version as kv
from flotilla_operator.clients.kube import ApiError
from flotilla_operator.reconcilers.startup import check_kube_version


def doc(major, minor, git):
    return {"major": major, "minor": minor, "gitVersion": git, "platform": "linux/amd64"}


def test_supported_versions_including_vendor_suffixes():
    for version in (doc("1", "30", "v1.30.0"), doc("1", "34", "v1.34.4"), doc("1", "31+", "v1.31.5-gke.1200"),
                    doc("2", "0", "v2.0.0")):
        found = kv.verdict(version)
        assert found.supported is True and found.off == (), version
        assert found.message == f"Kubernetes {version['gitVersion']}: supported (Flotilla needs 1.30 or later)"


def test_below_130_says_what_is_off():
    found = kv.verdict(doc("1", "29+", "v1.29.8-eks-a737599"))
    assert found.supported is False
    assert found.message.startswith("Kubernetes v1.29.8-eks-a737599 is older than Flotilla needs (1.30 or later")
    (off,) = found.off
    assert "ValidatingAdmissionPolicy" in off and "delete.topic.enable=false" in off and "__consumer_offsets" in off
    assert found.lines[1].startswith("off: ValidatingAdmissionPolicy")


def test_below_125_cannot_even_hold_the_crds():
    found = kv.verdict(doc("1", "24", "v1.24.17"))
    assert found.supported is False and "x-kubernetes-validations" in found.message and found.off


def test_the_git_version_alone_and_nothing_readable():
    assert kv.parse({"gitVersion": "v1.30.2-k3s1"}) == (1, 30)
    assert kv.verdict({"gitVersion": "v1.28.1"}).supported is False
    unknown = kv.verdict({"major": "", "minor": "", "gitVersion": "weird"})
    assert unknown.supported is None and "needs 1.30 or later" in unknown.message


class VersionKube:
    def __init__(self, answer):
        self.answer = answer

    async def version(self):
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


async def test_start_up_logs_the_verdict(caplog):
    with caplog.at_level(logging.INFO, logger="flotilla_operator"):
        found = await check_kube_version(VersionKube(doc("1", "29", "v1.29.0")))
    assert found.supported is False
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings[0].startswith("Kubernetes v1.29.0 is older") and warnings[1].startswith("off: ")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="flotilla_operator"):
        unread = await check_kube_version(VersionKube(ApiError(403, "forbidden")))
    assert unread.supported is None and "forbidden" in caplog.records[0].getMessage()
