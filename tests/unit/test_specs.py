"""One place for each shared option (module_utils/specs.py): the doc fragments document the
specs' own defaults and types, the modules use the groups whole, the core's options objects
agree, and the role's defaults, argument spec and README are the modules' except where the
role says why (specs.ROLE_DRAIN, ROLE_DIFFERS)."""

from __future__ import annotations

import importlib
from dataclasses import fields
from pathlib import Path
from typing import Any, Dict

import pytest
import role_docs  # hack/role_docs.py (tests/conftest.py puts hack/ on the path)
import yaml

from ansible_collections.nmo.maintenance.plugins.module_utils import role_inputs, specs
from ansible_collections.nmo.maintenance.plugins.module_utils.model import drain_spec, leases
from ansible_collections.nmo.maintenance.plugins.module_utils.model.pod_filters import SelectionOptions
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import etcd_guard
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows.disruption import Request
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows.drain import DrainOptions
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows.preflight import PreflightOptions

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "ansible_collections.nmo.maintenance.plugins"
GROUPS = {"connection": specs.CONNECTION, "lease": specs.LEASE, "events": specs.EVENTS}
USERS = {"lease": ["nmo_lease", "nmo_maintenance"], "events": ["nmo_crd", "nmo_maintenance"]}
DRAIN_USERS = ["nmo_drain", "nmo_preflight"]
# nmo_drain's options that are the run's or the task's, not how the node is drained
DRAIN_TASK_OPTIONS = {"node", "maintenance", "run_id", "held_leases", "progress_interval", "validate_only", "operator",
                      "volume_detach_timeout", "settle", "node_conditions"}
# role variable -> (module, option), the role's default must be the module's: the lease group's
# options the role takes under their own name, derived; the few named otherwise, by hand
ROLE_RENAMED = {"node_maintenance_lease_duration": ("nmo_maintenance", "duration"),
                "node_maintenance_label_key": ("nmo_maintenance", "label_key"),
                "node_maintenance_progress_interval": ("nmo_drain", "progress_interval")}
# where the role differs on purpose; its argument_specs must say so ("on purpose")
ROLE_DIFFERS = {"node_maintenance_lease_timeout": ("nmo_maintenance", "timeout")}
# the lease options the role has no variable for, or makes its own value of (the run's id)
# the role's node_maintenance_rollout is nmo_run's (the begin is told the run's, in check mode)
ROLE_NOT_LEASE = {"wait", "timeout", "duration", "run_id", "rollout"}


def role_to_module() -> Dict[str, Any]:
    derived = {f"node_maintenance_{name}": ("nmo_maintenance", name) for name in specs.LEASE
               if name not in ROLE_NOT_LEASE}
    return {**derived, **ROLE_RENAMED}


def fragment(name: str) -> Dict[str, Any]:
    doc = importlib.import_module(f"{PACKAGE}.doc_fragments.{name}").ModuleDocFragment.DOCUMENTATION
    return yaml.safe_load(doc)["options"]


def module_spec(name: str) -> Dict[str, Any]:
    return {**specs.CONNECTION, **importlib.import_module(f"{PACKAGE}.modules.{name}").ARGUMENT_SPEC}


def role_specs() -> Dict[str, Any]:
    doc = yaml.safe_load((ROOT / "roles/node_maintenance/meta/argument_specs.yml").read_text())
    return doc["argument_specs"]["main"]["options"]


def role_defaults() -> Dict[str, Any]:
    return yaml.safe_load((ROOT / "roles/node_maintenance/defaults/main.yml").read_text())


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_each_fragment_documents_its_spec(group: str) -> None:
    assert_documents(fragment(group), GROUPS[group])


def assert_documents(documented: Dict[str, Any], spec: Dict[str, Any]) -> None:
    assert sorted(documented) == sorted(spec)
    for name, option in spec.items():
        assert documented[name]["type"] == option.get("type", "str"), name
        assert documented[name].get("default") == option.get("default"), name
        assert documented[name].get("choices") == option.get("choices"), name
        assert sorted(documented[name].get("aliases", [])) == sorted(option.get("aliases", [])), name


def test_the_drain_fragment_documents_drain_and_the_same_options_at_the_top_level() -> None:
    documented = fragment("drain")
    assert documented["drain"]["type"] == "dict"
    assert_documents(documented["drain"]["suboptions"], specs.DRAIN)
    assert_documents({name: option for name, option in documented.items() if name != "drain"}, specs.FLAT_DRAIN)
    assert all("default" not in option for option in specs.FLAT_DRAIN.values()), "a flat value is one given"


@pytest.mark.parametrize("group", sorted(USERS))
def test_the_modules_take_a_group_whole_and_name_its_fragment(group: str) -> None:
    for module in USERS[group]:
        spec = module_spec(module)
        assert all(spec[name] is option for name, option in GROUPS[group].items()), (module, group)
        doc = yaml.safe_load(importlib.import_module(f"{PACKAGE}.modules.{module}").DOCUMENTATION)
        assert f"nmo.maintenance.{group}" in doc["extends_documentation_fragment"], module
        assert not set(doc["options"]) & set(GROUPS[group]), f"{module} documents {group} options again"


@pytest.mark.parametrize("module", DRAIN_USERS)
def test_the_drain_modules_take_drain_whole_and_name_its_fragment(module: str) -> None:
    spec = module_spec(module)
    assert spec["drain"] is specs.DRAIN_OPTION["drain"] and spec["drain"]["options"] is specs.DRAIN
    assert all(spec[name] is option for name, option in specs.FLAT_DRAIN.items()), module
    doc = yaml.safe_load(importlib.import_module(f"{PACKAGE}.modules.{module}").DOCUMENTATION)
    assert "nmo.maintenance.drain" in doc["extends_documentation_fragment"], module
    assert not set(doc["options"]) & ({"drain"} | set(specs.DRAIN)), f"{module} documents drain options again"


def test_every_drain_option_is_the_cores_and_nothing_else_is() -> None:
    """A drain option is a field of DrainOptions and a key of specs.DRAIN, both or neither;
    the selection is PreflightOptions' too, and the pod selection SelectionOptions'."""
    drain_fields = {f.name for f in fields(DrainOptions)}
    assert drain_fields - DRAIN_TASK_OPTIONS == set(specs.DRAIN)
    assert set(module_spec("nmo_drain")) - set(specs.CONNECTION) == DRAIN_TASK_OPTIONS | {"drain"} | set(specs.DRAIN)
    # the node itself (names, etcd guard) is judged by options of its own, not drain options
    node_own = {"nodes", "concurrency", "maintenance_names", "etcd"}
    assert {f.name for f in fields(PreflightOptions)} - node_own == set(specs.SELECTION)
    # what the filters need beside the options: the time, the parsed selector, rules and namespaces
    filters_own = {"now", "selector", "rules", "namespace_labels"}
    assert {f.name for f in fields(SelectionOptions)} - filters_own == set(drain_spec.POD_SELECTION)
    assert set(drain_spec.POD_SELECTION) < set(specs.SELECTION) < set(specs.DRAIN)


@pytest.mark.parametrize("options, spec", [(DrainOptions, specs.DRAIN), (PreflightOptions, specs.SELECTION),
                                           (SelectionOptions, drain_spec.POD_SELECTION)])
def test_the_cores_drain_defaults_are_the_specs(options: Any, spec: Dict[str, Any]) -> None:
    for name, option in spec.items():
        default = options.__dataclass_fields__[name].default
        assert default == option.get("default"), (options.__name__, name)
    assert SelectionOptions().pod_selector == "" and not SelectionOptions().selector, "unset: every pod"


def test_the_cores_lease_defaults_are_the_specs() -> None:
    for name in ("concurrency", "duration", "slot_prefix", "wait", "timeout"):
        assert specs.LEASE[name]["default"] == Request.__dataclass_fields__[name].default, name
    assert specs.LEASE["slot_prefix"]["default"] is leases.SLOT_PREFIX, "the slot prefix is the lease module's"
    etcd = etcd_guard.Options()
    assert specs.LEASE["etcd_guard"]["choices"] == list(etcd_guard.FLAVOURS)
    assert [specs.LEASE[name]["default"] for name in ("etcd_guard", "etcd_pod_selector", "etcd_pod_namespace",
                                                      "etcd_guard_namespace")] == [
        etcd.flavour, etcd.member_selector, etcd.pod_namespace, etcd.guard_namespace]


def test_a_timeout_is_a_float_everywhere() -> None:
    for module in ("nmo_lease", "nmo_maintenance"):
        assert module_spec(module)["timeout"]["type"] == "float", module
    assert specs.DRAIN["timeout"]["type"] == "float"


def test_drain_given_wins_whole_and_says_which_top_level_options_it_ignores() -> None:
    given = {name: option.get("default") for name, option in specs.DRAIN.items()}  # as Ansible fills it
    params, warnings = specs.drain_params({"node": "w1", "drain": {**given, "timeout": 30.0},
                                           "force": False, "timeout": 5.0, "parallelism": None})
    assert params["timeout"] == 30.0 and params["force"] is True and params["node"] == "w1"
    assert warnings == ["force is ignored: drain is given, so drain.force applies (give it there)",
                        "timeout is ignored: drain is given, so drain.timeout applies (give it there)"]


def test_without_drain_the_top_level_options_given_apply_and_the_rest_default() -> None:
    flat = {name: None for name in specs.FLAT_DRAIN}
    params, warnings = specs.drain_params({**flat, "node": "w1", "drain": None, "force": False, "retry_delay": 2.0})
    assert warnings == []
    opts = DrainOptions.from_params(params)  # unset: the options object's default, the spec's
    assert opts.force is False and opts.retry_delay == 2.0
    assert opts.timeout == specs.DRAIN["timeout"]["default"] and opts.grace_period is None
    assert specs.pool_size({**flat, "drain": {"parallelism": 8}}) == 10
    assert specs.pool_size({**flat, "drain": None, "parallelism": 4}) == 6
    assert specs.pool_size({**flat, "drain": None}) == specs.DRAIN["parallelism"]["default"] + 2


def test_the_roles_drain_dict_is_taken_as_it_is() -> None:
    """The role hands every drain option (role_inputs.drain): the module merges nothing in."""
    given = {name: option.get("default") for name, option in specs.DRAIN.items()}
    params, warnings = specs.drain_params({"node": "w1", "drain": {**given, "timeout": 1800.0}})
    assert warnings == [] and {name: params[name] for name in specs.DRAIN} == {**given, "timeout": 1800.0}


def test_role_defaults_are_the_modules() -> None:
    defaults, documented = role_defaults(), role_specs()
    pairs = role_to_module()
    assert "node_maintenance_slot_prefix" in pairs and "node_maintenance_etcd_guard" in pairs
    for var, (module, option) in pairs.items():
        wanted = module_spec(module)[option].get("default")
        assert defaults[var] == wanted, (var, defaults[var], wanted)
        assert documented[var].get("default") == wanted, var
        assert "-1" not in str(documented[var]["description"]), f"{var}: no -1 sentinels, null is unset"


def role_drain_default(name: str) -> Any:
    return specs.ROLE_DRAIN.get(name, specs.DRAIN[name].get("default"))


def test_the_roles_drain_dict_is_the_modules_drain_option() -> None:
    documented = role_specs()["node_maintenance_drain"]
    assert documented["type"] == "dict" and documented["default"] == {} == role_defaults()["node_maintenance_drain"]
    options = documented["options"]
    assert sorted(options) == sorted(specs.DRAIN)
    for name, option in specs.DRAIN.items():
        assert options[name]["type"] == option["type"], name
        assert options[name].get("choices") == option.get("choices"), name
        assert options[name].get("default") == role_drain_default(name), name
        assert "-1" not in str(options[name]["description"]), f"{name}: no -1 sentinels, null is unset"


def test_where_the_roles_drain_differs_it_says_why() -> None:
    options = role_specs()["node_maintenance_drain"]["options"]
    for name, value in specs.ROLE_DRAIN.items():
        assert value != specs.DRAIN[name]["default"], f"the role's drain {name} no longer differs: drop it"
        assert "on purpose" in " ".join(options[name]["description"]), name


def test_the_roles_readme_shows_the_drain_dict_as_the_spec_has_it() -> None:
    readme = (ROOT / "roles/node_maintenance/README.md").read_text()
    table = readme.split("### The drain (`node_maintenance_drain`)", 1)[1].split("| key | default |", 1)[1]
    rows = [line.split(" | ") for line in table.split("\n<!--", 1)[0].splitlines()[2:]]
    shown = {cells[0].strip("| `"): cells[1].strip("`") for cells in rows}
    assert sorted(shown) == sorted(specs.DRAIN)
    for name, text in shown.items():
        assert yaml.safe_load(text) == role_drain_default(name), (name, text)


def test_the_roles_readme_shows_every_variable_with_its_default() -> None:
    readme = (ROOT / "roles/node_maintenance/README.md").read_text()
    rows = [line.split(" | ") for line in readme.split("## Variables", 1)[1].split("\n\n")[1].splitlines()[2:]]
    shown = {cells[0].strip("| `"): cells[1].strip("`") for cells in rows}
    defaults = role_defaults()
    current = {name for name in role_specs() if name not in role_inputs.DEPRECATED_DRAIN}
    assert sorted(shown) == sorted(current)
    for name, text in shown.items():
        assert (yaml.safe_load(text) if not text.startswith("{{") else text) == defaults[name], (name, text)


@pytest.mark.parametrize("path, render", role_docs.targets(), ids=lambda value: getattr(value, "name", ""))
def test_what_is_made_of_the_drain_spec_is_what_hack_role_docs_writes(path: Path, render: Any) -> None:
    """The fragment's top-level drain options, argument_specs.yml's sub-options and deprecated
    variables, the defaults' deprecated variables and the README's table of node_maintenance_drain
    are written from model/drain_spec.py and the fragment's sub-options: a change there and not
    here fails, naming the file and the command."""
    text = path.read_text()
    assert render(text) == text, f"{path.relative_to(ROOT)} is out of date: run {role_docs.COMMAND}"


def test_the_deprecated_drain_variables_are_null_and_name_their_key() -> None:
    defaults, documented = role_defaults(), role_specs()
    flat = {name for name in documented if name.startswith("node_maintenance_drain_")} | {"node_maintenance_kubevirt"}
    assert flat == set(role_inputs.DEPRECATED_DRAIN)
    for var, key in role_inputs.DEPRECATED_DRAIN.items():
        assert key in specs.DRAIN, var
        assert defaults[var] is None and "default" not in documented[var], f"{var}: null, so a value is one given"
        assert documented[var]["type"] == specs.DRAIN[key]["type"], var
        assert f"O(node_maintenance_drain.{key})" in documented[var]["description"], var


def test_where_the_role_differs_it_says_why() -> None:
    defaults, documented = role_defaults(), role_specs()
    for var, (module, option) in ROLE_DIFFERS.items():
        assert defaults[var] != module_spec(module)[option]["default"], f"{var} no longer differs: move it up"
        assert "on purpose" in " ".join(documented[var]["description"]), var
        assert documented[var]["type"] == module_spec(module)[option]["type"], var


def test_wait_has_one_default() -> None:
    assert module_spec("nmo_lease")["wait"] is module_spec("nmo_maintenance")["wait"]
