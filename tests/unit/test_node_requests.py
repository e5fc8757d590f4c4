"""The per-node request total the call that finishes a node returns (adapter.added)."""

from __future__ import annotations

from ansible_collections.nmo.maintenance.plugins.module_utils.adapter import added


def test_the_calls_requests_are_summed_kind_by_kind():
    begin = {"create nodemaintenances": 1, "list leases": 2}
    drain = {"create pods/eviction": 5, "list leases": 1}
    assert added([begin, drain, {}, {"delete nodemaintenances": 1}]) == {
        "create nodemaintenances": 1, "create pods/eviction": 5, "delete nodemaintenances": 1, "list leases": 3}


def test_nothing_given_is_nothing():
    assert added([]) == {} and added([{}, None]) == {}  # a skipped task has no counts
