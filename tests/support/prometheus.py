"""Read one value from a broker's Prometheus /metrics page (summed over matching label sets)."""

from __future__ import annotations

import re
import urllib.request


def metric(url: str, name: str, **labels: str) -> float:
    return value_in(scrape(url), name, **labels)


def metrics(url: str, *names: str) -> dict[str, float]:
    """Several values from one scrape, so that they are consistent with each other (two scrapes can
    straddle an update of the broker and compare counters from different moments)."""
    text = scrape(url)
    return {name: value_in(text, name) for name in names}


def scrape(url: str) -> str:
    return urllib.request.urlopen(url, timeout=5).read().decode()


def value_in(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in text.splitlines():
        m = re.match(r"^(\w+)(\{[^}]*\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        if all(got.get(k) == v for k, v in labels.items()):
            total += float(m.group(3))
    return total
