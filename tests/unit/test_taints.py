"""Taint list arithmetic: key+effect matching, user taints kept, no change when unchanged."""

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.errors import InputError
from ansible_collections.nmo.maintenance.plugins.module_utils.model.taints import (
    DRAIN_TAINT,
    MAINTENANCE_TAINTS,
    UNSCHEDULABLE_TAINT,
    guarded_patch,
    validate_taints,
    with_taints,
    without_taints,
)

from .node_patch import PatchTestFailed, apply

USER = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
USER_EXEC = {"key": "medik8s.io/drain", "effect": "NoExecute"}  # same key, other effect: not ours


def test_add_puts_maintenance_taints_first_and_keeps_user_taints():
    assert with_taints([USER], MAINTENANCE_TAINTS) == [UNSCHEDULABLE_TAINT, DRAIN_TAINT, USER]


def test_add_to_empty_list():
    assert with_taints([], MAINTENANCE_TAINTS) == MAINTENANCE_TAINTS


def test_add_is_unchanged_when_present_in_any_order():
    current = [USER, DRAIN_TAINT, UNSCHEDULABLE_TAINT]
    assert with_taints(current, MAINTENANCE_TAINTS) == current


def test_add_keeps_time_added_of_a_matching_taint():
    stamped = dict(UNSCHEDULABLE_TAINT, timeAdded="2026-01-01T00:00:00Z")
    assert with_taints([stamped], MAINTENANCE_TAINTS) == [stamped, DRAIN_TAINT]


def test_add_replaces_a_valued_taint_with_the_empty_value():
    valued = dict(DRAIN_TAINT, value="draining")
    assert with_taints([valued], MAINTENANCE_TAINTS) == MAINTENANCE_TAINTS


def test_same_key_other_effect_is_a_user_taint():
    assert with_taints([USER_EXEC], MAINTENANCE_TAINTS) == MAINTENANCE_TAINTS + [USER_EXEC]
    assert without_taints(MAINTENANCE_TAINTS + [USER_EXEC], MAINTENANCE_TAINTS) == [USER_EXEC]


def test_remove_keeps_user_taints_in_order():
    current = [USER, UNSCHEDULABLE_TAINT, dict(DRAIN_TAINT, value="draining"), USER_EXEC]
    assert without_taints(current, MAINTENANCE_TAINTS) == [USER, USER_EXEC]


def test_remove_when_absent_is_unchanged():
    assert without_taints([USER], MAINTENANCE_TAINTS) == [USER]


def test_guarded_patch_writes_the_new_list_over_the_one_read():
    node = {"spec": {"taints": [USER]}}
    ops = guarded_patch([USER], [UNSCHEDULABLE_TAINT, DRAIN_TAINT, USER])
    assert ops == [{"op": "test", "path": "/spec/taints", "value": [USER]},
                   {"op": "replace", "path": "/spec/taints", "value": [UNSCHEDULABLE_TAINT, DRAIN_TAINT, USER]}]
    assert apply(node, ops)["spec"]["taints"] == [UNSCHEDULABLE_TAINT, DRAIN_TAINT, USER]


def test_guarded_patch_fails_when_someone_wrote_the_taints_since_they_were_read():
    ops = guarded_patch([USER], without_taints([USER], [USER]))
    with pytest.raises(PatchTestFailed):
        apply({"spec": {"taints": [USER, USER_EXEC]}}, ops)


def test_guarded_patch_adds_the_field_to_a_node_that_had_none():
    ops = guarded_patch(None, MAINTENANCE_TAINTS)
    assert apply({"spec": {}}, ops)["spec"] == {"taints": MAINTENANCE_TAINTS}
    with pytest.raises(PatchTestFailed):  # someone put taints on it meanwhile: not overwritten
        apply({"spec": {"taints": [USER]}}, ops)


@pytest.mark.parametrize("bad", [[{"effect": "NoSchedule"}], [{"key": "a", "effect": "Sometimes"}], ["a"]])
def test_bad_taints_are_refused(bad):
    with pytest.raises(InputError):
        validate_taints(bad)
