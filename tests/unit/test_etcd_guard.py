"""etcd quorum guard: quorum arithmetic and the verdicts of both flavours."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import etcd_guard


def pod(node: str, ready: str = "True", labels: Dict[str, str] = None, name: str = "") -> Dict[str, Any]:
    return {"metadata": {"name": name or f"etcd-{node}", "labels": labels or {"component": "etcd"}},
            "spec": {"nodeName": node}, "status": {"conditions": [{"type": "Ready", "status": ready}]}}


def members(n: int, not_ready: List[int] = ()) -> List[Dict[str, Any]]:
    return [pod(f"cp-{i}", "False" if i in not_ready else "True") for i in range(n)]


@pytest.mark.parametrize("n, q", [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3), (7, 4)])
def test_quorum_is_a_majority(n, q):
    assert etcd_guard.quorum(n) == q


def test_all_healthy_three_members_allow_one():
    v = etcd_guard.kubeadm_verdict("cp-0", members(3), set())
    assert v.allowed and (v.members, v.healthy, v.quorum) == (3, 3, 2)


def test_one_member_not_ready_blocks_a_second():
    v = etcd_guard.kubeadm_verdict("cp-1", members(3, not_ready=[0]), set())
    assert not v.allowed and not v.never
    assert v.reason.startswith("etcd quorum would not be kept while node cp-1 is in maintenance")
    assert "cp-0 (etcd pod etcd-cp-0 not Ready)" in v.reason
    assert v.healthy == 2


def test_the_member_already_down_may_be_maintained():
    assert etcd_guard.kubeadm_verdict("cp-0", members(3, not_ready=[0]), set()).allowed


def test_member_on_a_node_under_maintenance_is_not_healthy():
    v = etcd_guard.kubeadm_verdict("cp-1", members(3), {"cp-2"})
    assert not v.allowed and "cp-2 (under maintenance)" in v.unhealthy


def test_five_members_tolerate_two_down_in_total():
    assert etcd_guard.kubeadm_verdict("cp-1", members(5, not_ready=[0]), set()).allowed
    assert not etcd_guard.kubeadm_verdict("cp-1", members(5, not_ready=[0, 4]), set()).allowed


@pytest.mark.parametrize("n", [1, 2])
def test_one_or_two_members_are_refused_for_good(n):
    v = etcd_guard.kubeadm_verdict("cp-0", members(n), set())
    assert not v.allowed and v.never
    assert "can never be maintained under this guard" in v.reason


def test_node_without_a_member_only_needs_the_others():
    v = etcd_guard.kubeadm_verdict("cp-9", members(3, not_ready=[0]), set())
    assert v.allowed


def test_kubeadm_without_any_pod_is_refused():
    v = etcd_guard.kubeadm_verdict("cp-0", [], set())
    assert not v.allowed and v.never and "etcd_guard: none" in v.reason


def test_deleting_pods_are_not_members():
    gone = pod("cp-2")
    gone["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert etcd_guard.kubeadm_verdict("cp-0", [pod("cp-0"), pod("cp-1"), gone], set()).never


def guard(node: str, ready: str = "True") -> Dict[str, Any]:
    return pod(node, ready, {"app": "guard"}, name=f"etcd-guard-{node}")


def pdb(allowed: int, name: str = "etcd-guard-pdb") -> Dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"selector": {"matchLabels": {"app": "guard"}}},
            "status": {"disruptionsAllowed": allowed}}


GUARDS = [guard("cp-0"), guard("cp-1"), guard("cp-2")]


def test_openshift_pdb_allowing_a_disruption_allows():
    v = etcd_guard.openshift_verdict("cp-0", [pdb(1)], GUARDS, set())
    assert v.allowed and v.flavour == "openshift"


def test_openshift_pdb_at_zero_blocks_a_healthy_node():
    v = etcd_guard.openshift_verdict("cp-0", [pdb(0)], GUARDS, set())
    assert not v.allowed and v.reason.startswith("etcd quorum would not be kept while node cp-0 is in maintenance")


@pytest.mark.parametrize("status, allowed", [("False", True), ("Unknown", False), ("True", False)])
def test_openshift_node_already_disrupted_may_go(status, allowed):
    pods = [guard("cp-0", status), guard("cp-1"), guard("cp-2")]
    assert etcd_guard.openshift_verdict("cp-0", [pdb(0)], pods, set()).allowed is allowed


def test_openshift_node_without_guard_pod_may_go():
    assert etcd_guard.openshift_verdict("cp-9", [pdb(0)], GUARDS, set()).allowed


def test_openshift_no_pdb_or_several_block():
    assert "no PodDisruptionBudget" in etcd_guard.openshift_verdict("cp-0", [], GUARDS, set()).reason
    v = etcd_guard.openshift_verdict("cp-0", [pdb(1), pdb(1, "etcd-quorum-guard")], GUARDS, set())
    assert not v.allowed and "several PodDisruptionBudgets" in v.reason and "etcd-quorum-guard" in v.reason


def test_openshift_disruption_already_promised_to_another_node():
    v = etcd_guard.openshift_verdict("cp-0", [pdb(1)], GUARDS, {"cp-1"})
    assert not v.allowed and "cp-1" in v.reason


def test_node_disrupted_by_cordon_or_drain_taint():
    assert etcd_guard.node_disrupted({"spec": {"unschedulable": True}})
    assert etcd_guard.node_disrupted({"spec": {"taints": [{"key": "medik8s.io/drain", "effect": "NoSchedule"}]}})
    assert not etcd_guard.node_disrupted({"spec": {"taints": [{"key": "other", "effect": "NoSchedule"}]}})


def test_no_etcd_is_allowed_with_a_warning():
    v = etcd_guard.no_etcd_verdict("openshift-etcd", "component=etcd", "kube-system")
    assert v.allowed and v.flavour == "none" and "external etcd" in v.warning
