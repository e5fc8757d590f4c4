"""The per-node request total: the begin's requests as the node's record keeps them, and the
calls that follow (adapter.added; the filter requests_added the role's summary uses)."""

from __future__ import annotations

from ansible_collections.nmo.maintenance.plugins.filter.requests_added import requests_added
from ansible_collections.nmo.maintenance.plugins.module_utils.adapter import added
from ansible_collections.nmo.maintenance.plugins.module_utils.model.record import Record
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows.lifecycle import recorded_requests


def test_the_calls_requests_are_summed_kind_by_kind():
    begin = {"create nodemaintenances": 1, "list leases": 2}
    drain = {"create pods/eviction": 5, "list leases": 1}
    assert added([begin, drain, {}, {"delete nodemaintenances": 1}]) == {
        "create nodemaintenances": 1, "create pods/eviction": 5, "delete nodemaintenances": 1, "list leases": 3}


def test_nothing_given_is_nothing():
    assert added([]) == {} and added([{}, None]) == {}  # a skipped task has no counts


def test_the_record_gives_this_runs_begin_only():
    kept = Record(run="r1").with_requests({"list leases": 2})
    assert recorded_requests(kept, "r1") == {"list leases": 2}
    assert recorded_requests(kept, "r2") == {}  # another run's begin is not this node's cost here
    assert recorded_requests(None, "r1") == {} and recorded_requests(kept, "") == {}


def test_the_finishing_call_counts_once_and_skipped_tasks_none():
    drained = {"api_requests_by": {"create pods/eviction": 5}}
    ended = {"api_requests_by": {"delete nodemaintenances": 1},
             "node_api_requests_by": {"delete nodemaintenances": 1, "create nodemaintenances": 1}}
    skipped = {"skipped": True, "changed": False}
    assert requests_added([drained, skipped, ended, {}, "x"]) == {
        "create nodemaintenances": 1, "create pods/eviction": 5, "delete nodemaintenances": 1}
