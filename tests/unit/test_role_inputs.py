"""The role's inputs as given (module_utils/role_inputs.py): the shapes the argument spec
converts away, the shortest lease, the window's format and zone, and what only later phases
use (the drain options as the drain checks them, the Ready and gate waits)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml

from ansible_collections.nmo.maintenance.plugins.module_utils import role_inputs, specs
from ansible_collections.nmo.maintenance.plugins.module_utils.errors import InputError
from ansible_collections.nmo.maintenance.plugins.modules import nmo_drain

ROOT = Path(__file__).resolve().parents[2]
ROLE = ROOT / "roles" / "node_maintenance"
SPEC = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
NOW = datetime(2026, 11, 29, 18, 0, 0, tzinfo=timezone.utc)
LIST_OPTIONS = sorted(name for name, option in SPEC.items() if option.get("type") == "list")


# every drain option as the modules take it, the role's timeout in place of theirs
ROLE_DRAIN = {**{name: option.get("default") for name, option in specs.DRAIN.items()}, **specs.ROLE_DRAIN}


def test_the_defaults_pass():
    problems, facts = role_inputs.check(SPEC, dict(DEFAULTS), NOW)
    assert problems == [] and facts == {"drain": ROLE_DRAIN, "refuse_not_ready": True}
    assert list(facts["drain"]) == list(specs.DRAIN), "complete: the modules take it as it is"


@pytest.mark.parametrize("skip_wait, refused", [(0, True), (None, True), ("0", True), (30, False), ("30", False),
                                                ("soon", True)])
def test_the_begin_refuses_a_node_not_ready_unless_the_drain_goes_on_without_its_kubelet(skip_wait, refused):
    """The pre-flight's readiness rule (model/marks.py), decided here for the begin: the role passes it."""
    drain = {} if skip_wait is None else {"skip_wait_for_delete_timeout": skip_wait}
    _problems, facts = role_inputs.check(SPEC, {**DEFAULTS, "node_maintenance_drain": drain}, NOW)
    assert facts["refuse_not_ready"] is refused
    _problems, deprecated = role_inputs.check(
        SPEC, {**DEFAULTS, "node_maintenance_drain_skip_wait_for_delete_timeout": skip_wait}, NOW)
    assert deprecated["refuse_not_ready"] is refused


def test_every_list_option_of_the_role_is_known():
    assert LIST_OPTIONS == ["node_maintenance_budgets", "node_maintenance_hooks_after", "node_maintenance_hooks_before_drain",
                            "node_maintenance_hooks_work", "node_maintenance_notify"]


@pytest.mark.parametrize("name", LIST_OPTIONS)
@pytest.mark.parametrize("value, given", [("flash.yml", "a string was given ('flash.yml')"),
                                          ({"a": "b.yml"}, "a dict was given"),
                                          (3, "a number was given")])
def test_a_list_option_given_otherwise_is_named_with_the_type_given(name, value, given):
    problems, _facts = role_inputs.check(SPEC, {**DEFAULTS, name: value}, NOW)
    assert len(problems) == 1 and problems[0].startswith(f"{name}: {given}") and "a list is needed" in problems[0]


def test_a_string_for_a_list_of_paths_says_how_to_give_one_file():
    problems, _facts = role_inputs.check(SPEC, {**DEFAULTS, "node_maintenance_hooks_work": "flash.yml"}, NOW)
    assert problems[0].endswith("a list is needed (for one file: ['flash.yml'])")


@pytest.mark.parametrize("given", ["a.yml\nb.yml", "a.yml\nb.yml\n", "- a.yml\n- b.yml\n"])
def test_a_multi_line_string_for_a_list_of_paths_offers_the_list_of_its_lines(given):
    problems, _facts = role_inputs.check(SPEC, {**DEFAULTS, "node_maintenance_hooks_work": given}, NOW)
    assert problems[0].endswith("a list is needed (for these 2 files, one a line: ['a.yml', 'b.yml'])")


def test_a_list_element_that_is_not_a_path():
    problems, _facts = role_inputs.check(SPEC, {**DEFAULTS, "node_maintenance_hooks_work": ["a.yml", ["b.yml"]]}, NOW)
    assert problems == ["node_maintenance_hooks_work[1]: a list was given (['b.yml']), a string is needed (a file path)"]


@pytest.mark.parametrize("name, value", [("node_maintenance_gate", ["gate.yml"]), ("node_maintenance_gate", {"a": 1}),
                                         ("node_maintenance_drain_pod_selector", {"app": "web"}),
                                         ("node_maintenance_etcd_pod_selector", ["component=etcd"]),
                                         ("node_maintenance_concurrency", [1]),
                                         ("node_maintenance_wait_ready", {"yes": True})])
def test_a_scalar_option_given_a_list_or_a_dict(name, value):
    problems, _facts = role_inputs.check(SPEC, {**DEFAULTS, name: value}, NOW)
    assert len(problems) == 1 and problems[0].startswith(f"{name}: a ") and "is needed" in problems[0]


def test_every_problem_at_once():
    given = {**DEFAULTS, "node_maintenance_hooks_work": "a.yml", "node_maintenance_hooks_after": "b.yml",
             "node_maintenance_lease_duration": 5}
    problems, _facts = role_inputs.check(SPEC, given, NOW)
    assert [p.split(":")[0] for p in problems] == ["node_maintenance_hooks_work", "node_maintenance_hooks_after",
                                                   "node_maintenance_lease_duration"]


@pytest.mark.parametrize("value", [5, "5", 29, "29"])
def test_a_lease_shorter_than_the_heartbeat_keeps(value):
    problems, _facts = role_inputs.check(SPEC, {**DEFAULTS, "node_maintenance_lease_duration": value}, NOW)
    assert len(problems) == 1
    assert problems[0].startswith(f"node_maintenance_lease_duration: {int(value)} is shorter than the 30 s")


@pytest.mark.parametrize("value", [30, "30", 3600])
def test_a_lease_the_heartbeat_keeps(value):
    assert role_inputs.check(SPEC, {**DEFAULTS, "node_maintenance_lease_duration": value}, NOW)[0] == []


# -- the window ----------------------------------------------------------------------------------
@pytest.mark.parametrize("given, utc", [
    ("2026-11-29T18:00:00+01:00", "2026-11-29T17:00:00Z"),
    ("2026-11-29T18:00:00Z", "2026-11-29T18:00:00Z"),
    ("2026-11-29T18:00:00.5-0530", "2026-11-29T23:30:00Z"),
    ("2026-11-29 18:00:00+00:00", "2026-11-29T18:00:00Z"),
])
def test_a_window_end_with_a_zone(given, utc):
    assert role_inputs.window_end(given).astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ") == utc


def test_an_empty_window_end_is_no_window():
    assert role_inputs.window_end("") is None and role_inputs.window_end(None) is None


@pytest.mark.parametrize("given, message", [
    ("2026-11-29T18:00:00", "node_maintenance_window_end: '2026-11-29T18:00:00' has no time zone: add Z (UTC)"),
    ("tomorrow", "node_maintenance_window_end: 'tomorrow' is not a date and time in ISO 8601"),
    ("2026-11-29T18:00", "node_maintenance_window_end: '2026-11-29T18:00' is not a date and time in ISO 8601"),
    ("2026-13-29T18:00:00Z", "node_maintenance_window_end: '2026-13-29T18:00:00Z' is not a valid date and time"),
    (1764439200, "node_maintenance_window_end: a number was given (1764439200), a date and time is needed"),
])
def test_a_bad_window_end_names_the_option(given, message):
    with pytest.raises(InputError) as caught:
        role_inputs.window_end(given)
    assert caught.value.message.startswith(message), caught.value.message


def test_the_window_facts_say_whether_it_ended():
    _problems, facts = role_inputs.check(SPEC, {**DEFAULTS, "node_maintenance_window_end": "2026-11-29T18:30:00+01:00"}, NOW)
    assert facts["window_end"] == {"at": "2026-11-29T17:30:00Z", "given": "2026-11-29T18:30:00+01:00",
                                   "timestamp": datetime(2026, 11, 29, 17, 30, tzinfo=timezone.utc).timestamp(),
                                   "ended": True}
    _problems, later = role_inputs.check(SPEC, {**DEFAULTS, "node_maintenance_window_end": "2026-11-29T20:00:00Z"}, NOW)
    assert later["window_end"]["ended"] is False


def test_the_role_checks_every_option_of_its_argument_spec():
    """tasks/check_files.yml hands every option to the input check, as given, by the names
    meta/argument_specs.yml has: read from there at run time, not listed by hand."""
    task = yaml.safe_load((ROLE / "tasks" / "check_files.yml").read_text())[0]
    inputs = task["nmo.maintenance.nmo_check_files"]["inputs"]
    names = task["vars"]["node_maintenance_options"]
    assert isinstance(inputs, str) and "query('ansible.builtin.vars', *node_maintenance_options)" in inputs
    assert "role_path ~ '/meta/argument_specs.yml'" in names and ".argument_specs.main.options | list" in names


def test_the_drain_dict_is_the_roles_defaults_then_the_deprecated_variables_then_its_keys():
    values = {**DEFAULTS, "node_maintenance_drain": {"kubevirt": "migrate", "parallelism": 4},
              "node_maintenance_drain_parallelism": 8, "node_maintenance_drain_retry_delay": "2",
              "node_maintenance_kubevirt": "wait"}
    problems, facts = role_inputs.check(SPEC, values, NOW)
    assert problems == []
    assert facts["drain"] == {**ROLE_DRAIN, "kubevirt": "migrate", "parallelism": 4, "retry_delay": "2"}
    assert facts["deprecations"] == [
        "node_maintenance_drain_parallelism is deprecated, give it as the key parallelism of node_maintenance_drain"
        " (node_maintenance_drain: {parallelism: ...}); ignored here: node_maintenance_drain.parallelism is given",
        "node_maintenance_drain_retry_delay is deprecated, give it as the key retry_delay of node_maintenance_drain"
        " (node_maintenance_drain: {retry_delay: ...})",
        "node_maintenance_kubevirt is deprecated, give it as the key kubevirt of node_maintenance_drain"
        " (node_maintenance_drain: {kubevirt: ...}); ignored here: node_maintenance_drain.kubevirt is given"]


def test_a_deprecated_timeout_replaces_the_roles_own():
    _problems, facts = role_inputs.check(SPEC, {**DEFAULTS, "node_maintenance_drain_timeout": 3}, NOW)
    assert facts["drain"] == {**ROLE_DRAIN, "timeout": 3} and len(facts["deprecations"]) == 1


@pytest.mark.parametrize("given, problem", [
    ({"parallelism": [1]}, "node_maintenance_drain.parallelism: a list was given ([1]), a whole number is needed"),
    ({"paralelism": 1}, "node_maintenance_drain.paralelism: not an option of node_maintenance_drain (it takes"),
    ("kubevirt=migrate", "node_maintenance_drain: a string was given ('kubevirt=migrate'), a dict is needed"),
])
def test_the_drain_dict_is_checked_key_by_key_as_given(given, problem):
    problems, _facts = role_inputs.check(SPEC, {**DEFAULTS, "node_maintenance_drain": given}, NOW)
    assert len(problems) == 1 and problems[0].startswith(problem), problems


@pytest.mark.parametrize("given, problem", [
    ({"node_maintenance_on_blocked": "cordon"}, "node_maintenance_on_blocked must be one of stop, skip, quarantine"),
    ({"node_maintenance_max_blocked": -1}, "node_maintenance_max_blocked must be a whole number, 0 or more, got -1"),
    ({"node_maintenance_max_blocked": "two"}, "node_maintenance_max_blocked must be a whole number"),
])
def test_a_bad_policy_for_blocked_nodes_is_named(given, problem):
    problems, _facts = role_inputs.check(SPEC, {**DEFAULTS, **given}, NOW)
    assert [p for p in problems if p.startswith(problem)], problems


@pytest.mark.parametrize("bound", [0, 3, "0", "3"])
def test_a_bound_of_blocked_nodes_as_given(bound):
    given = {**DEFAULTS, "node_maintenance_on_blocked": "quarantine", "node_maintenance_max_blocked": bound}
    assert role_inputs.check(SPEC, given, NOW)[0] == []


# -- what only later phases use, checked before any node is touched (what tasks/inputs.yml did for each node) --
@pytest.mark.parametrize("given, problem", [
    ({"node_maintenance_drain": {"timeout": -1}},
     "node_maintenance_drain: timeout: -1.0 must be between 0 and 604800 seconds"),
    ({"node_maintenance_drain": {"timeout": 0}}, "node_maintenance_drain: timeout: 0.0 must be more than 0 seconds"),
    ({"node_maintenance_drain_timeout": "-1"}, "node_maintenance_drain: timeout: -1.0 must be between 0 and 604800"),
    ({"node_maintenance_drain": {"retry_dealy": 2}},
     "node_maintenance_drain.retry_dealy: not an option of node_maintenance_drain (it takes"),
    ({"node_maintenance_drain": {"pod_selector": "app in (web"}},
     "node_maintenance_drain: pod_selector: 'app in (web' is not a valid label selector"),
    ({"node_maintenance_drain": {"kubevirt": "evict"}},
     "value of kubevirt must be one of: wait, migrate, got: evict found in node_maintenance_drain"),
    ({"node_maintenance_drain": {"timeout": "soon"}},
     "argument 'timeout' is of type str found in 'node_maintenance_drain'. and we were unable to convert to float"),
    ({"node_maintenance_drain": {"rules": [{"selector": "app=web", "action": "evict"}]}},
     "value of action must be one of: drain, skip, wait-completed, got: evict found in node_maintenance_drain -> rules"),
    ({"node_maintenance_progress_interval": -1},
     "node_maintenance_progress_interval: -1.0 must be between 0 and 604800 seconds"),
    ({"node_maintenance_progress_interval": "often"},
     "argument 'node_maintenance_progress_interval' is of type str and we were unable to convert to float"),
    ({"node_maintenance_volume_detach_timeout": -1},
     "node_maintenance_volume_detach_timeout: -1 must be between 0 (no wait) and 604800 seconds (a week)"),
    ({"node_maintenance_ready_timeout": -1}, "node_maintenance_ready_timeout: -1 must be between 0 and 604800 seconds"),
    ({"node_maintenance_ready_timeout": "604801"},
     "node_maintenance_ready_timeout: 604801 must be between 0 and 604800 seconds (a week)"),
    ({"node_maintenance_gate_timeout": -5}, "node_maintenance_gate_timeout: -5 must be between 0 and 604800 seconds"),
    ({"node_maintenance_gate_delay": -1}, "node_maintenance_gate_delay: -1 must be between 0 and 604800 seconds (a week)"),
], ids=["drain-timeout", "drain-timeout-0", "deprecated-timeout", "unknown-key", "pod-selector", "kubevirt", "type",
        "rule-action", "progress-interval", "progress-interval-type", "volume-wait", "ready-timeout", "ready-timeout-text",
        "gate-timeout", "gate-delay"])
def test_an_option_a_later_phase_uses_is_refused_naming_the_variable(given, problem):
    problems, _facts = role_inputs.check(SPEC, {**DEFAULTS, **given}, NOW)
    assert len(problems) == 1 and problems[0].startswith(problem), problems


def test_several_bad_drain_options_are_said_at_once():
    given = {**DEFAULTS, "node_maintenance_drain": {"parallelism": 0, "retry_delay": 0}, "node_maintenance_gate_delay": -1}
    problems, _facts = role_inputs.check(SPEC, given, NOW)
    assert problems == ["node_maintenance_drain: parallelism: 0 must be between 1 and 500 requests; "
                        "retry_delay: 0.0 must be between 0.1 and 3600 seconds",
                        "node_maintenance_gate_delay: -1 must be between 0 and 604800 seconds (a week)"]


@pytest.mark.parametrize("given", [{"node_maintenance_ready_timeout": 0, "node_maintenance_gate_delay": "0"},
                                   {"node_maintenance_gate_timeout": 604800, "node_maintenance_progress_interval": "0"},
                                   {"node_maintenance_drain": {"timeout": "30", "parallelism": "4", "kubevirt": "migrate"}}])
def test_the_bounds_themselves_and_values_as_e_gives_them_pass(given):
    assert role_inputs.check(SPEC, {**DEFAULTS, **given}, NOW)[0] == []


def test_the_drain_check_is_the_modules_own():
    """The same code as nmo_drain's validate_only: its options object and its argument spec's options."""
    assert role_inputs.DrainOptions is nmo_drain.DrainOptions
    assert role_inputs._DRAIN_TASK_SPEC[role_inputs.DRAIN]["options"] is nmo_drain.ARGUMENT_SPEC["drain"]["options"]
    assert role_inputs._DRAIN_TASK_SPEC[role_inputs.PROGRESS_INTERVAL] == nmo_drain.ARGUMENT_SPEC["progress_interval"]


def test_no_task_of_the_role_checks_the_drain_options_again():
    """They are checked once, before any node is touched (tasks/check_files.yml)."""
    for path in sorted((ROLE / "tasks").glob("*.yml")):
        text = path.read_text()
        assert "validate_only" not in text and "inputs.yml" not in text, path.name
