"""PodDisruptionBudget."""

from flotilla_operator.builders.common import selector_labels
from flotilla_operator.builders.pdb import build_pdb


def test_pdb(owner):
    pdb = build_pdb(owner)
    assert pdb["apiVersion"] == "policy/v1" and pdb["kind"] == "PodDisruptionBudget"
    assert pdb["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": selector_labels(owner)}}
    assert pdb["metadata"]["ownerReferences"][0]["name"] == "demo"
