"""Read one value from a broker's Prometheus /metrics page (summed over matching label sets)."""

from __future__ import annotations

import re
import urllib.request


def metric(url: str, name: str, **labels: str) -> float:
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    total = 0.0
    for line in text.splitlines():
        m = re.match(r"^(\w+)(\{[^}]*\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        if all(got.get(k) == v for k, v in labels.items()):
            total += float(m.group(3))
    return total
