"""Lease arithmetic: times, validity, what acquiring means, which slot to take."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, Dict, Optional

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.errors import InputError
from ansible_collections.nmo.maintenance.plugins.module_utils.model import leases

NOW = datetime(2026, 11, 29, 11, 0, 0, tzinfo=timezone.utc)
NODE = {"metadata": {"name": "node-worker-01", "uid": "u-1"}}


def lease(name: str, holder: Optional[str], renewed: Optional[datetime] = NOW, duration: Optional[int] = 3600,
          acquired: Optional[datetime] = None, transitions: int = 0) -> Dict[str, Any]:
    spec: Dict[str, Any] = {"leaseTransitions": transitions}
    if holder is not None:
        spec["holderIdentity"] = holder
    if renewed is not None:
        spec["renewTime"] = leases.format_time(renewed)
    if duration is not None:
        spec["leaseDurationSeconds"] = duration
    if acquired is not None:
        spec["acquireTime"] = leases.format_time(acquired)
    return {"metadata": {"name": name, "namespace": "medik8s-leases", "resourceVersion": "7", "uid": "x"}, "spec": spec}


def test_microtime_format_round_trips():
    stamp = leases.format_time(NOW + timedelta(microseconds=42))
    assert stamp == "2026-11-29T11:00:00.000042Z"
    assert leases.parse_time(stamp) == NOW + timedelta(microseconds=42)
    assert leases.parse_time("2026-11-29T11:00:00Z") == NOW
    assert leases.parse_time("") is None and leases.parse_time("garbage") is None


def test_node_lease_name_is_medik8s_kind_dash_name():
    assert leases.node_lease_name("node-worker-01") == "node-node-worker-01"
    assert leases.node_of_lease_name("node-node-worker-01") == "node-worker-01"
    assert leases.node_of_lease_name("nmo-maintenance-slot-0") is None


def test_expiry_is_renew_time_plus_duration():
    assert leases.expiry(lease("l", "a", NOW, 60)) == NOW + timedelta(seconds=60)
    assert leases.expiry(lease("l", "a", None, 60)) is None
    assert leases.expiry(lease("l", "a", NOW, None)) is None


@pytest.mark.parametrize("renewed, duration, at, valid", [
    (NOW, 60, NOW + timedelta(seconds=59), True),
    (NOW, 60, NOW + timedelta(seconds=60), True),        # due exactly now: still valid
    (NOW, 60, NOW + timedelta(seconds=61), False),       # lapsed
    (NOW + timedelta(seconds=5), 60, NOW, False),        # renewed in the future: not trusted
    (None, 60, NOW, False),
    (NOW, None, NOW, False),
])
def test_validity(renewed, duration, at, valid):
    assert leases.is_valid(lease("l", "a", renewed, duration), at) is valid


def test_plan_create_when_absent():
    assert leases.plan(None, "node-maintenance", NOW, 3600) == (leases.CREATE, True)


def test_plan_foreign_valid_blocks_and_expired_is_taken_over():
    held = lease("node-x", "NodeHealthCheck-x", NOW, 3600)
    assert leases.plan(held, "node-maintenance", NOW + timedelta(minutes=1), 3600)[0] == leases.BLOCKED
    assert leases.plan(held, "node-maintenance", NOW + timedelta(hours=2), 3600) == (leases.TAKE_OVER, True)


def test_plan_own_lease_renews_when_it_would_lapse_within_the_duration():
    ours = lease("node-x", "node-maintenance", NOW, 3600, acquired=NOW)
    assert leases.plan(ours, "node-maintenance", NOW + timedelta(seconds=1), 3600) == (leases.RENEW, False)
    assert leases.plan(ours, "node-maintenance", NOW + timedelta(seconds=1), 60) == (leases.HELD, False)
    # expired but ours: renewed; acquireTime only set when it was missing
    assert leases.plan(ours, "node-maintenance", NOW + timedelta(hours=2), 3600) == (leases.RENEW, False)
    no_acquire = lease("node-x", "node-maintenance", NOW, 3600)
    assert leases.plan(no_acquire, "node-maintenance", NOW + timedelta(hours=2), 3600) == (leases.RENEW, True)
    assert leases.plan(lease("node-x", "node-maintenance", None, None), "node-maintenance", NOW, 3600) == (
        leases.RENEW, True)


def test_new_lease_speaks_the_medik8s_wire():
    body = leases.new_lease("node-node-worker-01", "medik8s-leases", "node-maintenance", 3600, NOW,
                            leases.owner_reference(NODE))
    assert body["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Node", "name": "node-worker-01",
                                                    "uid": "u-1"}]
    assert body["spec"] == {"holderIdentity": "node-maintenance", "leaseDurationSeconds": 3600,
                            "acquireTime": "2026-11-29T11:00:00.000000Z", "renewTime": "2026-11-29T11:00:00.000000Z",
                            "leaseTransitions": 0}


def test_take_over_counts_a_transition_and_keeps_the_resource_version():
    foreign = lease("node-x", "NodeHealthCheck-x", NOW - timedelta(hours=2), 3600, acquired=NOW - timedelta(hours=2),
                    transitions=3)
    later = NOW + timedelta(seconds=1)
    body = leases.renewed(foreign, "node-maintenance", 3600, later, True, leases.owner_reference(NODE))
    assert body["spec"]["leaseTransitions"] == 4
    assert body["spec"]["holderIdentity"] == "node-maintenance"
    assert body["spec"]["acquireTime"] == body["spec"]["renewTime"] == leases.format_time(later)
    assert body["metadata"]["resourceVersion"] == "7"
    assert foreign["spec"]["holderIdentity"] == "NodeHealthCheck-x"  # the read object is untouched


def test_renew_keeps_acquire_time_and_transitions():
    ours = lease("node-x", "node-maintenance", NOW, 3600, acquired=NOW, transitions=2)
    body = leases.renewed(ours, "node-maintenance", 3600, NOW + timedelta(minutes=5), False, None)
    assert body["spec"]["acquireTime"] == leases.format_time(NOW)
    assert body["spec"]["leaseTransitions"] == 2
    assert body["spec"]["renewTime"] == leases.format_time(NOW + timedelta(minutes=5))


def test_slot_names_and_indexes():
    assert leases.slot_name("nmo-maintenance-slot", 3) == "nmo-maintenance-slot-3"
    assert leases.slot_index("nmo-maintenance-slot-3", "nmo-maintenance-slot") == 3
    assert leases.slot_index("nmo-maintenance-slot-x", "nmo-maintenance-slot") is None
    assert leases.slot_index("other-slot-1", "nmo-maintenance-slot") is None
    mixed = [lease("p-10", "a"), lease("p-2", "b"), lease("node-x", "c"), lease("q-1", "d")]
    assert [s["metadata"]["name"] for s in leases.slots_of(mixed, "p")] == ["p-2", "p-10"]


def test_free_slot_is_created_at_the_lowest_index():
    plan = leases.plan_slot([], "n1", "p", 2, NOW)
    assert plan.candidates == [("p-0", None), ("p-1", None)] and not plan.blocked


def test_slots_in_use_up_to_concurrency_block():
    held = [lease("p-0", "n2")]
    plan = leases.plan_slot(held, "n1", "p", 1, NOW)
    assert plan.blocked and [leases.holder(s) for s in plan.blockers] == ["n2"]
    plan = leases.plan_slot(held, "n1", "p", 2, NOW)
    assert plan.candidates == [("p-1", None)]


def test_slot_beyond_our_concurrency_counts_too():
    # taken by a run that allowed 3 at once: with concurrency 1 we must still wait
    plan = leases.plan_slot([lease("p-2", "n3")], "n1", "p", 1, NOW)
    assert plan.blocked


def test_expired_slot_is_a_candidate_for_takeover():
    stale = lease("p-0", "n2", NOW - timedelta(hours=2), 3600)
    plan = leases.plan_slot([stale], "n1", "p", 1, NOW)
    assert plan.candidates == [("p-0", stale)]
    assert leases.plan(stale, "n1", NOW, 3600) == (leases.TAKE_OVER, True)


def test_rerun_resumes_with_its_own_slot():
    own = lease("p-1", "n1")
    plan = leases.plan_slot([lease("p-0", "n2"), own], "n1", "p", 1, NOW + timedelta(seconds=5))
    assert plan.own is own and not plan.blocked


def test_own_expired_slot_is_not_resumed_when_others_fill_the_limit():
    own = lease("p-1", "n1", NOW - timedelta(hours=2), 3600)
    plan = leases.plan_slot([lease("p-0", "n2"), own], "n1", "p", 1, NOW)
    assert plan.blocked
    plan = leases.plan_slot([own], "n1", "p", 1, NOW)
    assert plan.own is own


def test_valid_slot_without_holder_is_not_free():
    plan = leases.plan_slot([lease("p-0", "")], "n1", "p", 1, NOW)
    assert plan.blocked


def test_disrupting_nodes_counts_valid_node_leases_and_earlier_slots():
    items = [
        lease("node-cp-1", "NodeHealthCheck-x"),                               # remediation in progress
        lease("node-cp-2", "node-maintenance", NOW - timedelta(hours=2), 3600),  # lapsed: ignored
        lease("node-cp-0", "node-maintenance"),                                  # our own node: ignored
        lease("p-0", "cp-3", acquired=NOW - timedelta(seconds=1)),
        lease("p-1", "cp-4", acquired=NOW + timedelta(seconds=1)),
    ]
    at = NOW + timedelta(seconds=2)
    assert leases.disrupting_nodes(items, "cp-0", "p", None, at) == {"cp-1", "cp-3", "cp-4"}
    ours = lease("p-2", "cp-0", acquired=NOW)
    assert leases.disrupting_nodes(items, "cp-0", "p", ours, at) == {"cp-1", "cp-3"}


@pytest.mark.parametrize("concurrency, duration, prefix, fragment", [
    (0, 3600, "p", "concurrency"),
    (1, 0, "p", "duration"),
    (1, 3600, "Bad_Prefix", "slot_prefix"),
    (1, 3600, "", "slot_prefix"),
    (1, 3600, "node-slots", "node-"),
])
def test_bad_input_is_refused(concurrency, duration, prefix, fragment):
    with pytest.raises(InputError, match=fragment):
        leases.validate(concurrency, duration, prefix)


def test_our_lease_under_nmos_holder_name_is_read_as_ours_and_nmos_is_not():
    legacy = lease("node-x", leases.NMO_HOLDER, NOW, 3600)
    legacy["metadata"]["annotations"] = {leases.RUN_ANNOTATION: "r1"}
    assert leases.holder(leases.as_ours(legacy)) == leases.HOLDER
    assert leases.holder(legacy) == leases.NMO_HOLDER, "the lease read is not changed"
    nmos = lease("node-x", leases.NMO_HOLDER, NOW, 3600)  # NMO writes no run annotation
    assert leases.as_ours(nmos) is nmos
    assert leases.plan(leases.as_ours(nmos), leases.HOLDER, NOW + timedelta(minutes=1), 3600)[0] == leases.BLOCKED
    assert leases.HOLDER != leases.NMO_HOLDER


def test_a_slot_loses_the_node_as_owner_at_its_next_write() -> None:
    """A slot owned by the Node would be collected with a node deleted mid-maintenance (issue 23)."""
    body = {"metadata": {"name": "s-0", "ownerReferences": [
        {"apiVersion": "v1", "kind": "Node", "name": "node-a", "uid": "u"},
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "keep", "uid": "c"}]}}
    assert leases.without_node_owner(body)["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "keep", "uid": "c"}]
    only_node = {"metadata": {"name": "s-0", "ownerReferences": [{"kind": "Node", "name": "node-a"}]}}
    assert "ownerReferences" not in leases.without_node_owner(only_node)["metadata"]
