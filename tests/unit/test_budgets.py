"""Pure logic of PodDisruptionBudgets: selection, never-allowing budgets versus transient ones."""

from __future__ import annotations

from typing import Any, Dict, Optional

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.model import budgets


def pdb(selector: Optional[Dict[str, Any]] = None, min_available: Any = None, max_unavailable: Any = None,
        expected: Optional[int] = None, allowed: int = 0, namespace: str = "ns", name: str = "b",
        conditions: Optional[list] = None) -> Dict[str, Any]:
    spec: Dict[str, Any] = {"selector": {"matchLabels": {"app": "a"}} if selector is None else selector}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    status: Dict[str, Any] = {"observedGeneration": 1, "disruptionsAllowed": allowed, "conditions": conditions or []}
    if expected is not None:
        status["expectedPods"] = expected
    return {"metadata": {"name": name, "namespace": namespace, "generation": 1}, "spec": spec, "status": status}


def pod(labels: Dict[str, str], namespace: str = "ns", name: str = "p", phase: str = "Running") -> Dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels}, "status": {"phase": phase}}


# -- which budgets guard a pod -------------------------------------------------------------------
def test_match_labels_and_expressions_must_all_hold() -> None:
    b = pdb({"matchLabels": {"app": "a"}, "matchExpressions": [
        {"key": "tier", "operator": "In", "values": ["web", "api"]},
        {"key": "legacy", "operator": "DoesNotExist"}]})
    assert budgets.selects(b, pod({"app": "a", "tier": "web"}))
    assert not budgets.selects(b, pod({"app": "a", "tier": "db"}))
    assert not budgets.selects(b, pod({"app": "a", "tier": "web", "legacy": ""}))


def test_an_empty_selector_takes_the_whole_namespace_and_a_missing_one_nothing() -> None:
    assert budgets.selects(pdb({}), pod({}))
    whole = pdb({})
    whole["spec"]["selector"] = None
    assert not budgets.selects(whole, pod({}))


def test_budgets_only_guard_pods_of_their_namespace() -> None:
    assert not budgets.selects(pdb(namespace="other"), pod({"app": "a"}))


def test_budgets_index_finds_every_guard_and_counts_selected_running_pods() -> None:
    pods = [pod({"app": "a"}, name="p1"), pod({"app": "a"}, name="p2"), pod({"app": "a"}, name="done", phase="Succeeded")]
    known = budgets.Budgets([pdb(min_available=2, name="b1"), pdb(max_unavailable=1, name="b2"),
                             pdb(namespace="x", name="b3")], pods)
    guards = known.guarding(pods[0])
    assert [g["metadata"]["name"] for g in guards] == ["b1", "b2"]
    view = known.view(guards[0])
    assert (view.selected, view.budget, bool(view.never)) == (2, "minAvailable 2", True)


# -- never versus for now --------------------------------------------------------------------------
@pytest.mark.parametrize("spec,selected,never", [
    ({"min_available": 1}, 1, True),            # docs/design.md §12.3: alone behind minAvailable 1
    ({"min_available": 1}, 2, False),
    ({"min_available": 3}, 3, True),
    ({"min_available": "100%"}, 4, True),
    ({"min_available": "50%"}, 1, True),        # rounds up to the one pod there is
    ({"min_available": "50%"}, 4, False),
    ({"max_unavailable": 0}, 3, True),
    ({"max_unavailable": 1}, 1, False),
    ({"max_unavailable": "0%"}, 5, True),
    ({"max_unavailable": "10%"}, 3, False),     # rounds up to one
    ({}, 1, True),                              # neither: minAvailable 1, as the API defaults it
])
def test_never_allows(spec: Dict[str, Any], selected: int, never: bool) -> None:
    assert bool(budgets.never_allows(pdb(**spec), selected)) is never


def test_the_controllers_expected_count_wins_over_the_pods_seen() -> None:
    # minAvailable 2 with 3 replicas expected but only 2 pods now: it recovers when the third comes back
    assert budgets.never_allows(pdb(min_available=2, expected=3), 2) is None
    stale = pdb(min_available=2, expected=3)
    stale["metadata"]["generation"] = 2  # the controller has not seen this spec yet
    assert budgets.never_allows(stale, 2)


def test_a_budget_the_controller_cannot_compute_never_allows() -> None:
    failed = pdb(max_unavailable=1, conditions=[{"type": "DisruptionAllowed", "status": "False",
                                                 "reason": "SyncFailed", "message": "found no controllers"}])
    assert "found no controllers" in budgets.never_allows(failed, 1)


def test_never_says_what_to_do() -> None:
    why = budgets.never_allows(pdb(min_available=1), 1)
    assert "minAvailable 1 with 1 pod(s)" in why and "relax the budget" in why
