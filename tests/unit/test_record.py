"""A node's progress record: its wire form, both places it is kept, and what garbage reads as."""

from __future__ import annotations

import json

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.model import record
from ansible_collections.nmo.maintenance.plugins.module_utils.model.record import Record


def test_a_record_survives_its_wire_form():
    kept = Record(run="r1", phase="work", reached=("maintenance", "lease", "taints", "cordon"), held="all",
                  places=("nmo-maintenance-slot-0", "node-w1"), waited=12.5, failure="flash failed", failed_phase="work",
                  requests=(("get nodes", 3), ("patch leases", 1)))
    assert Record.parse(kept.wire()) == kept
    assert Record.parse(json.loads(record.annotation(kept))) == kept


def test_the_wire_form_has_every_key_so_a_merge_patch_leaves_nothing_older():
    assert set(Record().wire()) == set(record.keys())


@pytest.mark.parametrize("raw", [None, "work", 3, [], ["phase", "work"]])
def test_no_record_is_none(raw):
    assert Record.parse(raw) is None


def test_garbled_fields_take_their_empty_value():
    parsed = Record.parse({"run": 7, "phase": ["work"], "reached": "cordon", "held": "most",
                           "places": ["a", 3, None, ""], "failure": {"x": 1}, "failedPhase": None, "waited": "9",
                           "requests": {"get nodes": "3", "list pods": 2, "x": True, "y": -1}})
    assert parsed == Record(places=("a",), requests=(("list pods", 2),))
    assert not parsed.phase_known and not parsed.failed


def test_an_unknown_phase_is_kept_but_not_known():
    parsed = Record.parse({"phase": "firmware"})
    assert parsed.phase == "firmware" and not parsed.phase_known


def test_started_moves_the_phase_and_names_the_run():
    first = Record().started("begin", "r1")
    assert (first.phase, first.run) == ("begin", "r1")
    assert first.started("drain", "").run == "r1"
    assert first.started("drain", "r1") == Record(run="r1", phase="drain")


def test_a_run_that_takes_over_another_s_record_holds_none_of_its_leases():
    old = Record(run="r1", phase="work", held="all", places=("s-0",), reached=("maintenance",))
    assert old.started("ready", "r1").held == "all"
    taken = Record(run="r2", phase="ready", held="none", places=("s-0",), reached=("maintenance",))
    assert old.started("ready", "r2") == taken


def test_an_unknown_phase_cannot_start():
    with pytest.raises(ValueError, match="unknown phase 'flash'"):
        Record().started("flash", "r1")


def test_requests_add_up_kind_by_kind():
    total = Record().with_requests({"get nodes": 2}).with_requests({"get nodes": 1, "patch nodes": 1})
    assert total.requests_by() == {"get nodes": 3, "patch nodes": 1}


def test_standalone_reads_the_status_operator_mode_the_annotation():
    kept = Record(run="r1", phase="drain")
    nm = {"metadata": {"annotations": {record.ANNOTATION: record.annotation(Record(run="r2", phase="end"))}},
          "status": {"progress": kept.wire()}}
    assert record.of_maintenance(nm, operator=False) == kept
    assert record.of_maintenance(nm, operator=True) == Record(run="r2", phase="end")


@pytest.mark.parametrize("nm", [None, {}, {"metadata": {"annotations": {record.ANNOTATION: "{not json"}}},
                                {"metadata": {"annotations": {record.ANNOTATION: "[1]"}}}, {"status": {}}])
def test_a_maintenance_without_a_readable_record_has_none(nm):
    assert record.of_maintenance(nm, operator=True) is None
    assert record.of_maintenance(nm, operator=False) is None


def test_the_places_are_the_leases_the_begin_took():
    result = {"acquired": [{"role": "slot", "name": "s-0"}, {"role": "budget", "name": "zone-a-0"},
                           {"role": "node", "name": "node-w1"}, {"role": "node", "name": "node-w1"}, {"name": 3}]}
    assert record.places_of(result) == ("s-0", "zone-a-0", "node-w1")
    assert record.places_of({}) == ()


@pytest.mark.parametrize("raw, seconds", [(4, 4.0), (2.5, 2.5), (-1, 0.0), (True, 0.0), ("3", 0.0), (None, 0.0)])
def test_the_begins_wait_is_a_number_of_seconds_or_none(raw, seconds):
    assert Record.parse({"waited": raw}).waited == seconds


def test_the_run_a_failure_happened_in_survives_a_later_run_taking_the_record():
    failed = Record(run="r1", phase="work", failure="boom", failed_phase="work", failed_run="r1")
    assert Record.parse(failed.wire()) == failed and failed.wire()["failedRun"] == "r1"
    taken = failed.started("begin", "r2")
    assert taken.run == "r2" and taken.failed_run == "r1" and taken.failed
    assert Record.parse({"failedRun": 7}).failed_run == ""
