"""A node that cannot be drained (model/blocked.py): the whole table, policy x phase x the
count of this run's blocked nodes against the bound, and the run lease's count."""

from __future__ import annotations

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.errors import InputError
from ansible_collections.nmo.maintenance.plugins.module_utils.model import blocked, failure

BLOCKER = "drain timed out after 5 s; pending: pod ns/db-0"
GOES_ON = (blocked.SKIP, blocked.QUARANTINE)


@pytest.mark.parametrize("policy", blocked.POLICIES)
@pytest.mark.parametrize("phase", failure.PHASES)
@pytest.mark.parametrize("before, bound", [(0, 0), (0, 1), (1, 1), (1, 2), (2, 2), (3, 5)])
def test_the_table(policy, phase, before, bound):
    verdict = blocked.decide(policy, phase, BLOCKER, before, bound)
    if phase != failure.DRAIN:  # no block outside the drain; in or after the work: always the stop
        assert verdict == blocked.Verdict(blocked.FAIL, False, "")
    elif policy == blocked.STOP:
        assert verdict.action == blocked.FAIL and verdict.block and "is stop" in verdict.why
    elif before + 1 > bound:  # one more than the bound: the failure path, which stops the rollout
        assert verdict.action == blocked.FAIL and verdict.block
        assert f"the {blocked.ordinal(before + 1)} blocked node of this run: more than node_maintenance_max_blocked " \
               f"({bound}) stops the rollout" in verdict.why
    else:
        assert verdict.action == policy and verdict.goes_on and verdict.blocker == BLOCKER
        assert f"{before + 1} of at most {bound} blocked nodes" in verdict.why
    assert verdict.goes_on == (verdict.action in GOES_ON)


@pytest.mark.parametrize("policy", blocked.POLICIES)
def test_a_drain_failure_that_is_no_block_stops(policy):
    """A drain stopped by a lost lease, a deleted node, an API error: no blocker, the failure path."""
    assert blocked.decide(policy, failure.DRAIN, "", 0, 5).action == blocked.FAIL
    assert not blocked.decide(policy, failure.DRAIN, "", 0, 5).block


@pytest.mark.parametrize("phase", [p for p in failure.PHASES if p not in failure.BEFORE_WORK])
def test_a_failure_in_or_after_the_work_always_stops(phase):
    for policy in GOES_ON:
        assert blocked.decide(policy, phase, BLOCKER, 0, 100).action == blocked.FAIL


def test_the_outcome_names_the_policy_and_the_blocker():
    assert blocked.outcome(blocked.decide(blocked.SKIP, failure.DRAIN, BLOCKER, 0, 1)) == f"skipped (blocked: {BLOCKER})"
    assert blocked.outcome(blocked.decide(blocked.QUARANTINE, failure.DRAIN, BLOCKER, 0, 1)).startswith("quarantined (")


@pytest.mark.parametrize("status, said", [
    ({"phase": "Running", "pendingPods": ["web-0"], "lastError": "Cannot evict pod as it would violate the pod's "
                                                                 "disruption budget."},
     "the Node Maintenance Operator's drain did not finish in 5 s; pending: web-0; last error: Cannot evict pod as "
     "it would violate the pod's disruption budget."),
    ({"phase": "Running", "pendingPods": ["a"]}, "the Node Maintenance Operator's drain did not finish in 5 s; pending: a"),
    ({"phase": "Running", "pendingPods": [f"p{i}" for i in range(12)]},
     "the Node Maintenance Operator's drain did not finish in 5 s; pending: p0, p1, p2, p3, p4, p5, p6, p7, p8, p9 "
     "(2 more)"),
    ({"phase": "Running", "pendingPods": [], "lastError": "failed to obtain a lease"}, ""),  # waiting for its lease
    ({"phase": "Running"}, ""),
    ({}, ""),
    ({"phase": "Failed", "pendingPods": ["web-0"]}, ""),  # NMO failed it: the failure path, not a block
    ({"phase": "Succeeded", "pendingPods": ["web-0"]}, ""),
])
def test_the_operator_modes_blocker_is_the_pods_nmo_could_not_evict(status, said):
    assert blocked.operator_blocker(status, 5) == said


def test_the_outcome_is_read_back_as_what_was_done():
    for policy in (blocked.SKIP, blocked.QUARANTINE):
        said = blocked.outcome(blocked.decide(policy, failure.DRAIN, BLOCKER, 0, 1))
        assert blocked.left_as(said) == blocked.OUTCOMES[policy]
    for other in (None, "", "rolled back", "kept out of service", "skipped", "quarantined by hand"):
        assert blocked.left_as(other) == ""


@pytest.mark.parametrize("policy, bound, message", [
    ("cordon", 1, "node_maintenance_on_blocked must be one of stop, skip, quarantine, got 'cordon'"),
    ("skip", -1, "node_maintenance_max_blocked must be a whole number, 0 or more, got -1"),
    ("skip", "2", "node_maintenance_max_blocked must be a whole number"),
    ("skip", True, "node_maintenance_max_blocked must be a whole number"),
])
def test_bad_inputs_are_named(policy, bound, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        blocked.decide(policy, failure.DRAIN, BLOCKER, 0, bound)


@pytest.mark.parametrize("n, said", [(1, "1st"), (2, "2nd"), (3, "3rd"), (4, "4th"), (11, "11th"), (12, "12th"),
                                     (21, "21st"), (102, "102nd")])
def test_ordinal(n, said):
    assert blocked.ordinal(n) == said


def test_the_run_lease_count():
    assert blocked.parse(None) == [] and blocked.parse("") == []
    assert blocked.added(None, "w1") == "w1"
    assert blocked.added("w1", "w2") == "w1,w2"
    assert blocked.added("w1,w2", "w1") == "w1,w2"  # a node counted once, however often it is told
    assert blocked.parse("w1,w2") == ["w1", "w2"]


@pytest.mark.parametrize("policy, bound, no_go, drain_only, goes", [
    (blocked.STOP, 5, [], [], True),  # nothing blocked
    (blocked.STOP, 5, ["w1"], ["w1"], False),  # stop: a drain block stops the run before it begins
    (blocked.SKIP, 1, ["w1"], ["w1"], True),  # left to the policy
    (blocked.QUARANTINE, 1, ["w1"], ["w1"], True),
    (blocked.QUARANTINE, 1, ["w1", "w2"], ["w1", "w2"], False),  # more than the bound: the rollout would stop
    (blocked.QUARANTINE, 0, ["w1"], ["w1"], False),
    (blocked.SKIP, 5, ["w1", "w2"], ["w1"], False),  # w2's blocker is the begin's (a name, NotReady, etcd)
])
def test_the_preflight_leaves_drain_blocks_to_the_policy(policy, bound, no_go, drain_only, goes):
    go, said = blocked.preflight_goes(policy, bound, no_go, drain_only)
    assert go == goes
    if goes and no_go:
        assert said == f"left to node_maintenance_on_blocked {policy} (the drain would not finish): {', '.join(no_go)}"
    if policy != blocked.STOP and not goes and set(no_go) == set(drain_only):
        assert f"more than node_maintenance_max_blocked ({bound})" in said
