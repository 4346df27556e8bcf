"""bench/commands/security_report.py: rates from a phase's records, bytes and seconds; ratios only where
both sides measured; a failed phase shows its error and no number."""

from __future__ import annotations

import pytest

from bench.commands.security_report import MIB, rates, ratios, render


def _phase(records: int, seconds: float, size: int = 1024) -> dict:
    return {"records": records, "bytes": records * size, "seconds": seconds}


def _results(apache_sasl_produce: dict) -> dict:
    return {
        "flotilla": {"plaintext": {"produce": _phase(100_000, 10), "consume": _phase(100_000, 5)},
                     "sasl_ssl": {"produce": _phase(50_000, 10), "consume": _phase(100_000, 10)}},
        "apache": {"plaintext": {"produce": _phase(80_000, 10), "consume": _phase(100_000, 4)},
                   "sasl_ssl": {"produce": apache_sasl_produce, "consume": _phase(40_000, 10)}},
    }


def test_rates_are_records_and_mib_per_second():
    r = rates({"records": 2048, "bytes": 2048 * 1024, "seconds": 2.0})
    assert r == {"records_per_sec": 1024.0, "mb_per_sec": 2048 * 1024 / MIB / 2.0}
    assert rates({"error": "boom"}) is None
    assert rates({"records": 0, "bytes": 0, "seconds": 1.0}) is None
    assert rates(None) is None


def test_ratios_per_target_and_per_transport():
    r = ratios(_results(_phase(20_000, 10)))
    assert r["sasl_over_plain"]["flotilla"] == {"produce": 0.5, "consume": 0.5}
    assert r["sasl_over_plain"]["apache"]["produce"] == 0.25
    assert r["sasl_over_plain"]["apache"]["consume"] == pytest.approx(0.16)
    assert r["flotilla_over_apache"]["plaintext"] == {"produce": 1.25, "consume": 0.8}
    assert r["flotilla_over_apache"]["sasl_ssl"] == {"produce": 2.5, "consume": 2.5}


def test_a_failed_phase_has_no_ratio_and_its_error_is_listed():
    doc = {"when": "2026-11-26 13:00 UTC", "note": "", "machine_note": "2 shared cores",
           "settings": {"brokers": "alike", "client": "librdkafka"}, "machine": {"cores": 2, "cpu_model": "x"},
           "results": _results({"error": "SaslAuthenticationError: bad"})}
    r = ratios(doc["results"])
    assert r["sasl_over_plain"]["apache"]["produce"] is None
    assert r["flotilla_over_apache"]["sasl_ssl"]["produce"] is None
    md = render(doc)
    assert "- apache sasl_ssl produce: SaslAuthenticationError: bad" in md
    assert "| apache | sasl_ssl | produce | — | — |" in md
    assert "| Flotilla / Apache over SASL_SSL | — | 2.50 |" in md
    assert "2 shared cores" in md


def test_a_target_that_did_not_run_leaves_dashes():
    doc = {"when": "w", "settings": {"brokers": "b", "client": "c"},
           "results": {"flotilla": _results({})["flotilla"], "apache": {"error": "BrokerStartError: no java"}}}
    md = render(doc)
    assert "| apache | plaintext | produce | — | — | — | — |" in md
    assert "- apache: BrokerStartError: no java" in md
    assert ratios(doc["results"])["flotilla_over_apache"]["plaintext"]["produce"] is None
