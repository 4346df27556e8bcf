"""The PodDisruptionBudget: voluntary disruptions (node drains) take at most one broker at a time."""

from __future__ import annotations

from typing import Any

from .common import Owner, metadata, pdb_name, selector_labels


def build_pdb(owner: Owner) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": metadata(owner, pdb_name(owner)),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": selector_labels(owner)}},
    }
