"""The rollout scheduler (model/rollout.py): what a node may do next, over the whole table.

The world: four workers in two zones (a: w1 w2, b: w3 w4), a slot family of ``concurrency``
places and, with the zone budget, one place a zone. The leases are built as the cluster
holds them, and the places a waiting node is blocked by come from the same slot arithmetic
the begin uses (model/leases.plan_slot), so concurrency and budgets change the blockers the
way they do in a run, and the table says what the scheduler makes of each.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, List, Optional

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.model import failure, leases, marks, rollout, rollout_record
from ansible_collections.nmo.maintenance.plugins.module_utils.model.record import Record

NOW = datetime(2026, 12, 3, 12, 0, 0, tzinfo=timezone.utc)
ME, DEAD, OTHER = "run-me", "run-dead", "run-other"
PREFIX = leases.SLOT_PREFIX
ZONES = {"w1": "a", "w2": "a", "w3": "b", "w4": "b"}
ORDER = ["w1", "w2", "w3", "w4"]


def lease(name: str, holder: str, run: str = "", annotations: Optional[Dict[str, str]] = None,
          labels: Optional[Dict[str, str]] = None, renewed: datetime = NOW, duration: int = 3600) -> Dict[str, Any]:
    meta: Dict[str, Any] = {"name": name, "namespace": leases.LEASE_NAMESPACE, "resourceVersion": "1",
                            "annotations": {**({leases.RUN_ANNOTATION: run} if run else {}), **(annotations or {})},
                            "labels": dict(labels or {})}
    return {"metadata": meta, "spec": {"holderIdentity": holder, "renewTime": leases.format_time(renewed),
                                       "leaseDurationSeconds": duration}}


def run_lease(run: str, stopped_after: str = "", alive: bool = True) -> Dict[str, Any]:
    return lease(leases.RUN_LEASE_PREFIX + run, run,
                 annotations={rollout.STOPPED_AFTER: stopped_after} if stopped_after else {},
                 renewed=NOW if alive else NOW - timedelta(seconds=600), duration=60)


def zone_family(zone: str) -> str:
    return f"{PREFIX}-zone-{zone}-abc123"


def held(node: str, run: str, slot: int, zone_budget: bool) -> List[Dict[str, Any]]:
    """The leases a node in maintenance holds: its slot, its zone place, its node lease."""
    out = [lease(leases.slot_name(PREFIX, slot), node, run, {}, leases.SLOT_LABELS),
           lease(leases.node_lease_name(node), leases.HOLDER, run, {})]
    if zone_budget:
        out.append(lease(leases.slot_name(zone_family(ZONES[node]), 0), node, run,
                         {leases.BUDGET_ANNOTATION: f"zone={ZONES[node]}"}, leases.SLOT_LABELS))
    return out


def failed_record(failed_in: str, phase: str, now_run: str = "") -> Record:
    """The record of a node whose maintenance failed in run ``failed_in`` and was kept; a
    later run that took it over since (``now_run``) wrote its own run."""
    return Record(run=now_run or failed_in, phase=phase, failure="firmware flash failed", failed_phase=phase,
                  failed_run=failed_in)


def blockers(seen: List[Dict[str, Any]], node: str, concurrency: int, zone_budget: bool, run: str) -> List[str]:
    """The nodes holding the places ``node`` would wait for, by the begin's own slot arithmetic."""
    alive = leases.alive_run_ids(seen, NOW)
    families = [(PREFIX, concurrency)] + ([(zone_family(ZONES[node]), 1)] if zone_budget else [])
    for family, limit in families:
        plan = leases.plan_slot(leases.slots_of(seen, family), node, family, limit, NOW, run, alive)
        if plan.blocked:
            return [leases.holder(s) for s in plan.blockers]
    return []


def decide(seen: List[Dict[str, Any]], node: str, concurrency: int, zone_budget: bool,
           run: str = ME, records: Optional[Dict[str, Record]] = None) -> rollout.Decision:
    state = rollout.state_of(seen, run, NOW, records=records)
    return rollout.decide(node, state, blockers(seen, node, concurrency, zone_budget, run))


TABLE = [(c, z) for c in (1, 2, 4) for z in (False, True)]


# the settle fails after the end: the node is back in service, holding nothing, under any policy
PHASES = (*failure.PHASES, "settle")


@pytest.mark.parametrize("concurrency, zone_budget", TABLE)
@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("policy", failure.POLICIES)
def test_after_a_failure_in_this_run_no_node_begins_and_those_past_their_begin_finish(concurrency, zone_budget,
                                                                                      phase, policy):
    kept = phase != "settle" and failure.keeps(policy, phase)
    # w1 failed (kept or rolled back by the policy); w3 was past its begin when it did
    seen = [run_lease(ME, rollout.stopped_mark("w1", phase))]
    records = {"w1": failed_record(ME, phase)}
    if kept:
        seen += held("w1", ME, 0, zone_budget)
    if concurrency > 1:
        seen += held("w3", ME, 1, zone_budget)
        records["w3"] = Record(run=ME, phase=failure.DRAIN)
    for node in ("w2", "w4"):
        decided = decide(seen, node, concurrency, zone_budget, records=records)
        assert decided.action == rollout.STOP, (node, decided)
        assert decided.blocker == "w1"
        assert decided.say == f"not started: the run stopped after w1 failed (in the {phase.replace('_', '-')} phase)"
        assert decided.outcome == "not started (the run stopped after w1 failed)"
    if concurrency > 1:
        assert decide(seen, "w3", concurrency, zone_budget, records=records).action == rollout.BEGIN


@pytest.mark.parametrize("concurrency, zone_budget", TABLE)
@pytest.mark.parametrize("failed_in, alive, taken_by, expected", [
    (ME, True, ME, rollout.STOP),  # this run's kept node: its place is never released in this run
    (DEAD, False, DEAD, rollout.STOP),  # a gone run's kept node: nobody will release it
    (DEAD, False, OTHER, rollout.WAIT),  # a live run resumes it now: it will end it
    (OTHER, True, OTHER, rollout.WAIT),  # a live run's kept node: that run may still end it
    ("", False, DEAD, rollout.WAIT),  # a gone run's node that did not fail: its places lapse with the run
])
def test_a_wait_for_a_place_held_by_a_failed_kept_node(concurrency, zone_budget, failed_in, alive, taken_by,
                                                       expected):
    seen = [run_lease(ME), run_lease(DEAD, alive=False), run_lease(OTHER)]
    records = {"w1": failed_record(failed_in, failure.WORK, taken_by) if failed_in
               else Record(run=taken_by, phase=failure.WORK)}
    # w1 (the failed one) and up to two nodes of another live run hold the slots: at
    # concurrency 1 and 2 every slot is held, at 4 one is free; the zone budget makes w2 wait
    # for zone a's one place, w1's, whatever the concurrency
    seen += held("w1", taken_by, 0, zone_budget)
    for index, node in enumerate(["w3", "w4"][:concurrency - 1], start=1):
        seen += held(node, OTHER, index, zone_budget=False)
    waits_for = blockers(seen, "w2", concurrency, zone_budget, ME)
    decided = decide(seen, "w2", concurrency, zone_budget, records=records)
    if "w1" not in waits_for:  # concurrency 4 without a budget: a place is free, w2 begins
        assert (concurrency, zone_budget) == (4, False) and decided.action == rollout.BEGIN
        return
    assert decided.action == expected, decided
    if expected == rollout.STOP and failed_in == ME:  # this run's failure: the run stopped
        assert decided.blocker == "w1"
        assert decided.say == "not started: the run stopped after w1 failed (in the work phase)"
        assert not decided.fails_run, "w1 fails the run: w2 is only not started"
    elif expected == rollout.STOP:
        assert decided.blocker == "w1"
        assert decided.fails_run, "no node of this run failed: w2, left undone, fails it"
        assert "it waits for a place that w1 holds, kept out of service after its maintenance failed" in decided.say
        assert "ansible-playbook playbooks/recover.yml -e nmo_nodes=w1" in decided.say
        assert "run again with -l w1" in decided.say
        assert f"run {DEAD}, which is gone" in decided.say
    else:
        assert decided.say.startswith("w2 waits for a place held by w1")


@pytest.mark.parametrize("concurrency, zone_budget", TABLE)
def test_before_any_failure_a_node_waits_only_for_places_that_are_held(concurrency, zone_budget):
    # w1 (zone a) in maintenance, no failure: w2 (zone a) waits when the slots or its zone's place
    # are full; w3 (zone b) only when the slots are
    seen = [run_lease(ME)] + held("w1", ME, 0, zone_budget)
    for node, full in (("w2", concurrency == 1 or zone_budget), ("w3", concurrency == 1)):
        decided = decide(seen, node, concurrency, zone_budget)
        assert decided.action == (rollout.WAIT if full else rollout.BEGIN), (node, decided)
        if full:
            assert decided.say == f"{node} waits for a place held by w1"
    assert decide(seen, "w1", concurrency, zone_budget).action == rollout.BEGIN  # its own places


def test_nothing_held_nothing_failed_begins():
    assert decide([run_lease(ME)], "w1", 1, True) == rollout.Decision(rollout.BEGIN)


def test_a_lapsed_place_is_no_holder():
    seen = [run_lease(ME)] + [dict(item, spec=dict(item["spec"], renewTime=leases.format_time(NOW - timedelta(hours=2))))
                              for item in held("w1", DEAD, 0, True)]
    records = {"w1": failed_record(DEAD, failure.WORK)}
    assert rollout.state_of(seen, ME, NOW, records=records).holders == {}
    assert decide(seen, "w2", 1, True, records=records).action == rollout.BEGIN


def test_another_holder_of_the_node_lease_is_not_ours():
    seen = [run_lease(ME), lease(leases.node_lease_name("w1"), "node-healthcheck")]
    assert rollout.state_of(seen, ME, NOW).holders == {}


def test_a_node_resuming_its_own_kept_places_goes_on_even_after_a_stop():
    seen = [run_lease(ME, rollout.stopped_mark("w3", failure.DRAIN))]
    seen += held("w1", DEAD, 0, True)
    assert decide(seen, "w1", 1, True, records={"w1": failed_record(DEAD, failure.WORK)}).action == rollout.BEGIN
    # held for another live run, it is not this node's own to finish: the begin refuses it (§6.3)
    seen_live = [run_lease(ME), run_lease(OTHER)] + held("w1", OTHER, 0, False)
    assert rollout.decide("w1", rollout.state_of(seen_live, ME, NOW)).action == rollout.BEGIN


def test_marks_parse_and_read_back():
    assert rollout.Mark.parse("node-a/work") == rollout.Mark("node-a", "work")
    assert rollout.Mark.parse("20261203-120000-abcdef/before_drain").phase == "before_drain"
    for bad in ("", None, "nophase", "/work", "node/"):
        assert rollout.Mark.parse(bad) is None
    state = rollout.state_of([run_lease(ME, "w4/gate")], ME, NOW)
    assert state.stopped_after == rollout.Mark("w4", "gate")
    assert rollout.state_of([run_lease(OTHER, "w4/gate")], ME, NOW).stopped_after is None


def test_kept_leases_are_the_nodes_places_of_ours():
    seen = held("w1", ME, 0, True) + held("w2", ME, 1, True) + [run_lease(ME)]
    names = sorted(item["metadata"]["name"] for item in rollout.kept_leases(seen, "w1"))
    assert names == sorted([leases.slot_name(PREFIX, 0), leases.node_lease_name("w1"),
                            leases.slot_name(zone_family("a"), 0)])


def report(phase: Optional[str], leases_held: List[Dict[str, Any]], cordoned: bool = False) -> Dict[str, Any]:
    return {"node": "w2", "maintenance": None if phase is None else {"name": "maintenance-w2", "phase": phase},
            "leases": leases_held, "unschedulable": cordoned,
            "maintenance_taints": [{"key": "medik8s.io/drain", "effect": "NoSchedule"}] if cordoned else []}


SLOT = {"name": "nmo-maintenance-slot-0", "holder": "w2", "slot": True}
NODE_LEASE = {"name": "node-w2", "holder": leases.HOLDER, "slot": False}


@pytest.mark.parametrize("node, first", [
    (report(None, []), False),  # not in maintenance: new
    (report("Pending", []), False),  # a gone run's Pending, holding nothing: taken as new
    (report("", []), False),  # operator mode before NMO set a phase, holding nothing: new
    (report("Pending", [SLOT]), True),  # waited and took its places, killed before the drain
    (report("Pending", [], cordoned=True), True),  # cordoned by the begin, its leases lapsed
    (report("Running", []), True),
    (report("Succeeded", [SLOT, NODE_LEASE]), True),  # drained, not ended
    (report("Failed", [SLOT, NODE_LEASE]), True),  # kept out of service
    (report("Failed", []), True),  # rolled back, the record kept: finished (ended) first
])
def test_a_rerun_finishes_what_holds_places_first(node, first):
    assert rollout.resumes_first(node) is first


# -- the holders' records ----------------------------------------------------------------------
def test_a_holders_failure_comes_from_its_record_not_its_leases():
    seen = [run_lease(ME)] + held("w1", ME, 0, True)
    # no record (or one without a failure): a holder like any other, waited for
    assert decide(seen, "w2", 1, True).action == rollout.WAIT
    assert decide(seen, "w2", 1, True, records={"w1": Record(run=ME, phase=failure.WORK)}).action == rollout.WAIT
    # the record says it failed in this run (kept, or being rolled back before the run lease
    # says the run stopped): the wait ends at once, the run stopped
    stopped = decide(seen, "w2", 1, True, records={"w1": failed_record(ME, failure.GATE)})
    assert stopped.action == rollout.STOP and stopped.say == "not started: the run stopped after w1 failed (in the gate phase)"
    # another node's record is not w1's
    assert decide(seen, "w2", 1, True, records={"w3": failed_record(ME, failure.GATE)}).action == rollout.WAIT


def test_a_record_written_before_failed_run_existed_failed_in_the_run_that_wrote_it():
    old = Record(run=DEAD, phase=failure.WORK, failure="boom", failed_phase=failure.WORK)
    assert rollout.failure_of(old) == rollout.Mark(DEAD, failure.WORK)
    assert rollout.failure_of(Record(run=ME, failure="boom")) == rollout.Mark(ME, "unknown")
    assert rollout.failure_of(Record(run=ME)) is None and rollout.failure_of(None) is None
    seen = [run_lease(ME), run_lease(DEAD, alive=False)] + held("w1", DEAD, 0, True)
    assert decide(seen, "w2", 1, True, records={"w1": old}).action == rollout.STOP


def test_a_record_a_live_run_took_over_names_that_run_over_the_places_annotation():
    # w1 failed in a gone run; a live run resumed it: its record names that run, its places
    # still carry the gone run's annotation until that run re-takes them
    seen = [run_lease(ME), run_lease(DEAD, alive=False), run_lease(OTHER)] + held("w1", DEAD, 0, True)
    taken = failed_record(DEAD, failure.WORK, now_run=OTHER)
    state = rollout.state_of(seen, ME, NOW, records={"w1": taken})
    assert state.holders["w1"] == rollout.Holder("w1", OTHER, rollout.Mark(DEAD, failure.WORK))
    assert decide(seen, "w2", 1, True, records={"w1": taken}).action == rollout.WAIT
    # once that run's begin wrote its record the failure is gone: a holder like any other
    resumed = Record(run=OTHER, phase=failure.BEGIN)
    assert rollout.state_of(seen, ME, NOW, records={"w1": resumed}).holders["w1"].failed is None


# -- a domain full of nodes out of service (issue 41; docs/design.md §18.1) --------------------
def node_obj(name: str, cordoned: bool = False, ready: bool = True, quarantined: bool = False,
             ours: bool = False) -> Dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": ZONES.get(name, "a"),
                                                  **({marks.QUARANTINED: "true"} if quarantined else {})},
                         "annotations": {marks.MAINTAINED_BY: "nmo.maintenance"} if ours else {}},
            "spec": {"unschedulable": True} if cordoned else {},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def out_of(seen: List[Dict[str, Any]], *nodes: Dict[str, Any]) -> List[rollout.OutOfService]:
    busy = set(rollout.state_of(seen, ME, NOW).holders)
    return [rollout.OutOfService.of(n, n["metadata"]["name"] in busy) for n in nodes]


ZONE_A = "budgets[0] (topology_key topology.kubernetes.io/zone, max 1 a domain), domain topology.kubernetes.io/zone=a"


@pytest.mark.parametrize("other, releases", [
    (node_obj("w1", cordoned=True, quarantined=True, ours=True), "ansible-playbook playbooks/recover.yml -e nmo_nodes=w1"),
    (node_obj("w1", cordoned=True), "kubectl uncordon w1"),
    (node_obj("w1", cordoned=True, ours=True), "run again with -l w1"),  # kept, its leases lapsed
])
def test_a_zone_full_of_nodes_nothing_releases_stops_at_once_and_fails_the_run(other, releases):
    seen = [run_lease(ME)]
    state = rollout.state_of(seen, ME, NOW)
    decided = rollout.decide("w2", state, [], 1, out_of(seen, other), ZONE_A)
    assert decided.action == rollout.STOP and decided.fails_run and decided.blocker == "w1"
    assert decided.say.startswith(f"not started: {ZONE_A} allows 1 node(s) out of service at once, and 1 are out of "
                                  "service with nothing in flight to put them back: w1 (")
    assert releases in decided.say
    assert decided.outcome == f"not started ({ZONE_A} is full of nodes out of service: w1)"


def test_a_kept_node_of_a_gone_run_without_a_place_of_the_budget_stops_the_next_run():
    # the gone run had no budget: w1 holds a slot and its node lease, no place of zone a; the
    # next run's budget counts it against zone a (busy) and the scheduler reads why (item 3)
    seen = [run_lease(ME), run_lease(DEAD, alive=False)] + held("w1", DEAD, 0, zone_budget=False)
    records = {"w1": failed_record(DEAD, failure.WORK)}
    state = rollout.state_of(seen, ME, NOW, records=records)
    decided = rollout.decide("w2", state, [], 1, out_of(seen, node_obj("w1", cordoned=True, ours=True)), ZONE_A)
    assert decided.action == rollout.STOP and decided.fails_run
    assert f"w1 (kept out of service after its maintenance failed in the work phase, run {DEAD}, which is gone" \
        in decided.say
    # a live run took it over since: it will end it, w2 waits
    taken = {"w1": failed_record(DEAD, failure.WORK, now_run=OTHER)}
    live = rollout.state_of(seen + [run_lease(OTHER)], ME, NOW, records=taken)
    assert rollout.decide("w2", live, [], 1, out_of(seen, node_obj("w1", cordoned=True, ours=True)),
                          ZONE_A).action == rollout.WAIT


@pytest.mark.parametrize("other", [
    node_obj("w1", ready=False),  # NotReady, schedulable: its kubelet may come back
    node_obj("w1", cordoned=True, ours=True),  # a live run's node between two steps (its record below)
])
def test_out_of_service_nodes_that_something_releases_are_waited_for(other):
    seen = [run_lease(ME)]
    state = rollout.state_of(seen, ME, NOW, records={"w1": Record(run=ME, phase=failure.DRAIN)})
    decided = rollout.decide("w2", state, [], 1, out_of(seen, other), ZONE_A)
    assert decided.action == rollout.WAIT and decided.say == "w2 waits for a place held by w1"


def test_stuck_nodes_stop_only_when_they_alone_fill_the_limit():
    # zone a allows 2: w1 quarantined (stuck) and w3 in maintenance (finishes): w2 waits for w3
    seen = [run_lease(ME)] + held("w3", ME, 0, zone_budget=False)
    state = rollout.state_of(seen, ME, NOW)
    quarantined = node_obj("w1", cordoned=True, quarantined=True, ours=True)
    assert rollout.decide("w2", state, ["w3"], 2, out_of(seen, quarantined), "zone a").action == rollout.WAIT
    # a second stuck node fills it: stop, naming both
    admin = node_obj("w4", cordoned=True)
    decided = rollout.decide("w2", state, ["w3"], 2, out_of(seen, quarantined, admin), "zone a")
    assert decided.action == rollout.STOP and "w1 (quarantined" in decided.say and "w4 (cordoned by someone else" \
        in decided.say
    # a kept holder of a gone run beside an in-flight one: the free place comes, w2 waits
    seen = [run_lease(ME), run_lease(DEAD, alive=False)] + held("w1", DEAD, 0, False) + held("w3", ME, 1, False)
    state = rollout.state_of(seen, ME, NOW, records={"w1": failed_record(DEAD, failure.WORK)})
    assert rollout.decide("w2", state, ["w1", "w3"]).action == rollout.STOP  # no limit: the old rule
    assert rollout.decide("w2", state, ["w1", "w3"], 2, (), "the slots").action == rollout.WAIT
    assert rollout.decide("w2", state, ["w1"], 1, (), "the slots").say.startswith(
        "not started: it waits for a place that w1 holds, kept out of service")


# -- Ansible's workers (issue 41, item 1) --------------------------------------------------------------
@pytest.mark.parametrize("concurrency, forks, refused", [
    (1, 5, False), (5, 5, False), (8, 5, True), (8, 8, False), (6, 2, True), ("8", "5", True),
    (8, 0, False), (8, None, False), ("x", 5, False),  # forks unknown, or a concurrency the role refuses itself
])
def test_a_concurrency_above_the_forks_is_refused(concurrency, forks, refused):
    said = rollout.forks_refusal(concurrency, forks)
    assert bool(said) is refused
    if refused:
        want = int(concurrency)
        assert said.startswith(f"node_maintenance_concurrency {want} needs at least {want} Ansible forks, and this "
                               f"run has {int(forks)}")
        assert f"-f {want}" in said and f"ANSIBLE_FORKS={want}" in said and said.endswith("Nothing was written")


@pytest.mark.parametrize("concurrency, batch", [
    (1, 1), ("1", 1), (0, 1), ("x", 1), (None, 1),  # one at a time: the linear strategy's batch of one
    (2, 2 * rollout.BATCH_TIMES), ("8", 8 * rollout.BATCH_TIMES),
])
def test_the_batch_is_a_bounded_multiple_of_the_concurrency(concurrency, batch):
    """Issue 41: the place a node leaves passes to the next node of the batch at once (host_pinned),
    so the batch is wider than the concurrency; one node at a time stays a batch of one, in order."""
    assert rollout.batch(concurrency) == batch


# -- a rollout of several runs (AWX job slices; model/rollout_record.py) -------------------------
SLICE_A, SLICE_B, LATE = "awx-101", "awx-102", "awx-103"
WORKFLOW = rollout_record.default_id(SLICE_A, 77)


def slice_lease(run: str, rollout_id: str = WORKFLOW, alive: bool = True) -> Dict[str, Any]:
    found = run_lease(run, alive=alive)
    found["metadata"]["annotations"][rollout_record.ROLLOUT_ANNOTATION] = rollout_id
    return found


def the_rollout(stopped_after: str = "", stopped_run: str = "") -> Dict[str, Any]:
    notes = {rollout.STOPPED_AFTER: stopped_after, rollout_record.STOPPED_RUN: stopped_run} if stopped_after else {}
    return lease(rollout_record.lease_name(WORKFLOW), rollout_record.HOLDER, annotations=notes,
                 duration=rollout_record.KEEP_SECONDS)


def test_the_rollout_of_a_slice_is_its_workflow_job_else_the_run_alone():
    assert WORKFLOW == "awx-wf-77" and rollout_record.default_id(SLICE_A) == SLICE_A
    assert rollout_record.shared(SLICE_A, WORKFLOW) and not rollout_record.shared(SLICE_A, SLICE_A)
    seen = [slice_lease(SLICE_A), the_rollout()]
    assert rollout_record.record_lease(seen, SLICE_A)["metadata"]["name"] == "nmo-rollout-awx-wf-77"
    alone = [run_lease(ME)]
    assert rollout_record.record_lease(alone, ME)["metadata"]["name"] == leases.RUN_LEASE_PREFIX + ME
    # the rollout's lease missing (deleted by hand): the run lease holds the run's own stop
    assert rollout_record.record_lease([slice_lease(SLICE_A)], SLICE_A)["metadata"]["name"].startswith("nmo-run-")


@pytest.mark.parametrize("me", [SLICE_B, LATE])
def test_a_failure_in_another_slice_stops_every_slice_and_fails_it(me):
    seen = [slice_lease(SLICE_A), slice_lease(SLICE_B), slice_lease(LATE), the_rollout("w1/work", SLICE_A)]
    verdict = decide(seen, "w3", 2, False, run=me)
    assert verdict.action == rollout.STOP and verdict.fails_run, verdict
    assert verdict.say == ("not started: rollout awx-wf-77 stopped after w1 failed (in the work phase, run awx-101, "
                           "another run of the rollout); no node of the rollout begins after a failure")
    # the slice whose node failed: its own stop, failed by that node
    own = decide(seen, "w2", 2, False, run=SLICE_A)
    assert own.action == rollout.STOP and not own.fails_run and own.say.startswith("not started: the run stopped")


def test_check_mode_sees_another_slices_stop_through_the_rollout_it_is_told():
    # check mode's run wrote no run lease: the rollout comes from nmo_run's answer (begin.yml)
    check = "check-1"
    seen = [slice_lease(SLICE_A), the_rollout("w1/work", SLICE_A)]
    told = rollout.state_of(seen, check, NOW, unwritten_rollout=WORKFLOW)
    told = replace(told, alive=told.alive | {check})  # as disruption.scheduled makes it in check mode
    verdict = rollout.decide("w3", told, [])
    assert verdict.action == rollout.STOP and verdict.fails_run and "rollout awx-wf-77 stopped after w1" in verdict.say
    # untold (or told its own id: a run alone) it sees no stop, as before
    for unwritten in ("", check):
        state = replace(rollout.state_of(seen, check, NOW, unwritten_rollout=unwritten), alive=frozenset({check}))
        assert rollout.decide("w3", state, []).action != rollout.STOP
    # a real run's rollout is the one its run lease names, whatever it is told
    real = rollout.state_of([slice_lease(SLICE_B, "awx-wf-5"), *seen], SLICE_B, NOW, unwritten_rollout=WORKFLOW)
    assert real.rollout == "awx-wf-5" and rollout.decide("w3", real, []).action != rollout.STOP


def test_a_blocker_that_failed_in_a_live_slice_stops_before_the_mark():
    # the failure path writes the record before the mark: a waiter woken in between stops too
    seen = [slice_lease(SLICE_A), slice_lease(SLICE_B), the_rollout(), *held("w1", SLICE_A, 0, False)]
    records = {"w1": failed_record(SLICE_A, "drain")}
    verdict = decide(seen, "w3", 1, False, run=SLICE_B, records=records)
    assert verdict.action == rollout.STOP and verdict.blocker == "w1" and verdict.fails_run, verdict
    # another rollout's runs are not this one's: its failed node is a holder like any other
    other = [slice_lease(SLICE_A, "awx-wf-5"), slice_lease(SLICE_B), the_rollout(), *held("w1", SLICE_A, 0, False)]
    assert decide(other, "w3", 1, False, run=SLICE_B, records=records).action == rollout.WAIT


def test_a_rollout_lease_is_removed_a_day_after_its_last_start_once_no_run_names_it():
    old = lease(rollout_record.lease_name(WORKFLOW), rollout_record.HOLDER, renewed=NOW - timedelta(days=2),
                duration=rollout_record.KEEP_SECONDS)
    assert rollout_record.removable(old, [old], NOW)
    assert not rollout_record.removable(old, [old, slice_lease(SLICE_A)], NOW)
    assert not rollout_record.removable(the_rollout("w1/work", SLICE_A), [], NOW)
    assert not rollout_record.removable(run_lease(ME, alive=False), [], NOW)


def test_status_says_where_each_rollout_stands():
    from ansible_collections.nmo.maintenance.plugins.filter.rollout_line import rollout_line
    from ansible_collections.nmo.maintenance.plugins.module_utils.model import blocked

    stopped = the_rollout("w1/work", SLICE_A)
    stopped["metadata"]["annotations"][blocked.BLOCKED] = "w2,w4"
    (entry,) = rollout_record.describe([stopped, slice_lease(SLICE_B), slice_lease(SLICE_A, alive=False),
                                        run_lease(ME)], NOW)
    assert entry["runs"] == [SLICE_B] and entry["blocked"] == ["w2", "w4"] and entry["stopped_run"] == SLICE_A
    assert entry["kept_until"] == "2026-12-04T12:00:00.000000Z", entry
    assert rollout_line(entry) == (
        "rollout awx-wf-77: STOPPED after w1 failed (in the work phase, run awx-101): no node of it begins; 1 live "
        "run(s): awx-102; blocked nodes counted: w2, w4; last run started 2026-12-03T12:00:00.000000Z, kept until "
        "2026-12-04T12:00:00.000000Z")
    (going,) = rollout_record.describe([the_rollout()], NOW)
    assert rollout_line(going).startswith("rollout awx-wf-77: going on; no live run; last run started")


def test_a_rerun_resumes_the_nodes_that_hold_places_before_those_that_lost_them():
    # found by the model explorer: w1 (lapsed) before w3 (holds the one slot) would wait for w3's lapse
    order = ["w1", "w2", "w3", "w4"]
    resumed = {"w1": True, "w3": True}
    assert rollout.places_first(order, resumed, {"w3": True}) == ["w3", "w2", "w1", "w4"]
    assert rollout.places_first(order, resumed, {"w1": True, "w3": True}) == order
    assert rollout.places_first(order, {}, {"w3": True}) == order
