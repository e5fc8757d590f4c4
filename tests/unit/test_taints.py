"""Taint list arithmetic: key+effect matching, user taints kept, no change when unchanged."""

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.errors import InputError
from ansible_collections.nmo.maintenance.plugins.module_utils.node.taints import (
    DRAIN_TAINT,
    MAINTENANCE_TAINTS,
    UNSCHEDULABLE_TAINT,
    guarded_patch,
    validate_taints,
    with_taints,
    without_taints,
)

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


def test_guarded_patch_tests_what_was_read():
    ops = guarded_patch([USER], [UNSCHEDULABLE_TAINT, DRAIN_TAINT, USER])
    assert ops[0] == {"op": "test", "path": "/spec/taints", "value": [USER]}
    assert ops[1]["op"] == "replace"


def test_guarded_patch_adds_when_node_had_no_taints_field():
    ops = guarded_patch(None, MAINTENANCE_TAINTS)
    assert ops[0]["value"] is None
    assert ops[1] == {"op": "add", "path": "/spec/taints", "value": MAINTENANCE_TAINTS}


@pytest.mark.parametrize("bad", [[{"effect": "NoSchedule"}], [{"key": "a", "effect": "Sometimes"}], ["a"]])
def test_bad_taints_are_refused(bad):
    with pytest.raises(InputError):
        validate_taints(bad)
