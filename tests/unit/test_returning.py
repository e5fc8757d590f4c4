"""Pods that come back to a draining node, and the drain's errors grouped: pure logic."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.errors import InputError, api_error
from ansible_collections.nmo.maintenance.plugins.module_utils.model import returning
from ansible_collections.nmo.maintenance.plugins.module_utils.model import tracking as dt
from ansible_collections.nmo.maintenance.plugins.module_utils.model.taints import DRAIN_TAINT, UNSCHEDULABLE_TAINT
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows.drain import DrainOptions


def pod(tolerations: Optional[List[Dict[str, Any]]] = None, owner: Optional[str] = "ReplicaSet",
        name: str = "web-1") -> Dict[str, Any]:
    meta: Dict[str, Any] = {"name": name, "namespace": "default", "uid": name}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": "web-abc", "controller": True}]
    return {"metadata": meta, "spec": {"tolerations": tolerations or []}}


EVERYTHING = [{"operator": "Exists"}]


class TestTolerations:
    @pytest.mark.parametrize("toleration, taint, expected", [
        ({"operator": "Exists"}, DRAIN_TAINT, True),
        ({"operator": "Exists", "effect": "NoExecute"}, DRAIN_TAINT, False),
        ({"key": "medik8s.io/drain", "operator": "Exists"}, DRAIN_TAINT, True),
        ({"key": "medik8s.io/drain", "operator": "Exists"}, UNSCHEDULABLE_TAINT, False),
        ({"key": "medik8s.io/drain", "value": ""}, DRAIN_TAINT, True),  # Equal is the default
        ({"key": "medik8s.io/drain", "value": "x"}, DRAIN_TAINT, False),
        ({"key": "", "operator": "Equal"}, DRAIN_TAINT, False),  # an empty key needs Exists
        ({"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}, DRAIN_TAINT, False),
    ])
    def test_kubernetes_rule(self, toleration: Dict[str, Any], taint: Dict[str, Any], expected: bool) -> None:
        assert returning.tolerates(toleration, taint) is expected

    def test_tolerate_everything_is_named_with_both_taints(self) -> None:
        assert returning.letting_in(pod(EVERYTHING)) == (
            "tolerates medik8s.io/drain:NoSchedule and node.kubernetes.io/unschedulable:NoSchedule "
            "via {operator: Exists}")

    def test_two_tolerations_are_each_named(self) -> None:
        text = returning.letting_in(pod([{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"},
                                         {"key": "medik8s.io/drain", "operator": "Exists", "effect": "NoSchedule"}]))
        assert text == ("tolerates medik8s.io/drain:NoSchedule via {key: medik8s.io/drain, operator: Exists, "
                        "effect: NoSchedule}; node.kubernetes.io/unschedulable:NoSchedule via "
                        "{key: node.kubernetes.io/unschedulable, operator: Exists}")

    def test_one_taint_tolerated_is_not_enough_to_come_back(self) -> None:
        only_drain = pod([{"key": "medik8s.io/drain", "operator": "Exists"}])
        assert returning.letting_in(only_drain) is None and not returning.may_come_back(only_drain)
        assert "does not tolerate the maintenance taints" in returning.why_here(only_drain)

    def test_who_may_come_back(self) -> None:
        assert returning.may_come_back(pod(EVERYTHING))
        assert not returning.may_come_back(pod(EVERYTHING, owner=None))  # nothing recreates it
        assert not returning.may_come_back(pod(EVERYTHING, owner="DaemonSet"))  # skipped by the drain anyway
        assert not returning.may_come_back(pod([]))


class TestMessages:
    def test_counted_by_workload_and_named(self) -> None:
        why = returning.why_here(pod(EVERYTHING))
        returned = {"default/ReplicaSet/web-abc": [(f"default/web-{i}", why) for i in range(7)]}
        text = returning.came_back_message("node-a", 3, returned)
        assert "default/ReplicaSet/web-abc: 7 pod(s) came back" in text
        assert "default/web-0, default/web-1, default/web-2, default/web-3, default/web-4 and 2 more " + why in text
        assert "at most 3 time(s) per workload, returning_pod_evictions" in text
        assert text.count("tolerates") == 1  # the same reason is said once


class TestGrouping:
    def forbidden(self, name: str) -> str:
        exc = api_error(403, "Forbidden", f'pods "{name}" is forbidden: User "u" cannot create resource '
                        '"pods/eviction" in API group "" in the namespace "ns"', "POST",
                        f"/api/v1/namespaces/ns/pods/{name}/eviction")
        return dt.outcome_of(exc, f"ns/{name}").message

    def test_thirty_403s_are_one_line_with_a_count(self) -> None:
        entries = [(f"ns/web-{i:02d}", self.forbidden(f"web-{i:02d}")) for i in range(30)]
        one = len(entries[0][1])
        text = dt.group(entries)
        assert text.count("forbidden") == 1 and "(x30 pods: ns/web-00, ns/web-01" in text and "and 25 more" in text
        assert len(text) < one + 200
        assert '/pods/*/eviction' in text and 'pods "*" is forbidden' in text

    def test_distinct_errors_stay_apart(self) -> None:
        text = dt.group([("ns/a", "boom"), ("ns/b", "boom"), ("ns/c", "bang")])
        assert text == "boom (x2 pods: ns/a, ns/b); ns/c (bang)"

    def test_fatal_summary_groups_what_stopped_the_drain(self) -> None:
        t = dt.Tracker()
        for name in ("a", "b", "c"):
            t.pending[f"ns/{name}"] = dt.PendingPod(plan=_plan(name), action="evict", in_flight=True)
            t.answer(f"ns/{name}", dt.Outcome(dt.FATAL, self.forbidden(name)), 0.0)
        assert t.fatal_summary().count("forbidden") == 1 and "x3 pods" in t.fatal_summary()
        assert t.describe_pending().count("forbidden") == 1


def _plan(name: str) -> Any:
    from ansible_collections.nmo.maintenance.plugins.module_utils.model.pod_filters import EVICT, PodPlan
    return PodPlan("ns", name, name, EVICT, "test")


@pytest.mark.parametrize("value", [-1, 101, 1.5, "3", True])
def test_returning_pod_evictions_is_checked(value: Any) -> None:
    with pytest.raises(InputError, match="returning_pod_evictions"):
        DrainOptions(node="node-a", returning_pod_evictions=value).validate()
