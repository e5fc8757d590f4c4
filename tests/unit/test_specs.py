"""One place for each shared option (module_utils/specs.py): the doc fragments document the
specs' own defaults and types, the modules use the groups whole, the core's options objects
agree, and the role's defaults are the modules' except where the role says why."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Dict

import pytest
import yaml

from ansible_collections.nmo.maintenance.plugins.module_utils import specs
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import etcd_guard
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows.disruption import Request
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows.drain import DrainOptions
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows.preflight import PreflightOptions

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "ansible_collections.nmo.maintenance.plugins"
GROUPS = {"connection": specs.CONNECTION, "lease": specs.LEASE, "selection": specs.SELECTION, "events": specs.EVENTS}
USERS = {"lease": ["nmo_lease", "nmo_maintenance"], "selection": ["nmo_drain", "nmo_preflight"],
         "events": ["nmo_crd", "nmo_maintenance"]}
# role variable -> (module, option); the role's default must be the module's
ROLE_TO_MODULE = {
    "node_maintenance_concurrency": ("nmo_maintenance", "concurrency"),
    "node_maintenance_lease_duration": ("nmo_maintenance", "duration"),
    "node_maintenance_slot_prefix": ("nmo_maintenance", "slot_prefix"),
    "node_maintenance_etcd_guard": ("nmo_maintenance", "etcd_guard"),
    "node_maintenance_etcd_pod_selector": ("nmo_maintenance", "etcd_pod_selector"),
    "node_maintenance_etcd_pod_namespace": ("nmo_maintenance", "etcd_pod_namespace"),
    "node_maintenance_etcd_guard_namespace": ("nmo_maintenance", "etcd_guard_namespace"),
    "node_maintenance_label_key": ("nmo_maintenance", "label_key"),
    "node_maintenance_drain_force": ("nmo_drain", "force"),
    "node_maintenance_drain_delete_emptydir_data": ("nmo_drain", "delete_emptydir_data"),
    "node_maintenance_drain_ignore_daemonsets": ("nmo_drain", "ignore_daemonsets"),
    "node_maintenance_drain_pod_selector": ("nmo_drain", "pod_selector"),
    "node_maintenance_drain_grace_period": ("nmo_drain", "grace_period"),
    "node_maintenance_drain_disable_eviction": ("nmo_drain", "disable_eviction"),
    "node_maintenance_drain_delete_fallback_after": ("nmo_drain", "delete_fallback_after"),
    "node_maintenance_drain_skip_wait_for_delete_timeout": ("nmo_drain", "skip_wait_for_delete_timeout"),
    "node_maintenance_drain_parallelism": ("nmo_drain", "parallelism"),
    "node_maintenance_drain_retry_delay": ("nmo_drain", "retry_delay"),
    "node_maintenance_drain_returning_pod_evictions": ("nmo_drain", "returning_pod_evictions"),
    "node_maintenance_progress_interval": ("nmo_drain", "progress_interval"),
}
# where the role differs on purpose; its argument_specs must say so ("on purpose")
ROLE_DIFFERS = {"node_maintenance_drain_timeout": ("nmo_drain", "timeout"),
                "node_maintenance_lease_timeout": ("nmo_maintenance", "timeout")}


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
    documented, spec = fragment(group), GROUPS[group]
    assert sorted(documented) == sorted(spec)
    for name, option in spec.items():
        assert documented[name]["type"] == option.get("type", "str"), name
        assert documented[name].get("default") == option.get("default"), name
        assert sorted(documented[name].get("aliases", [])) == sorted(option.get("aliases", [])), name


@pytest.mark.parametrize("group", sorted(USERS))
def test_the_modules_take_a_group_whole_and_name_its_fragment(group: str) -> None:
    for module in USERS[group]:
        spec = module_spec(module)
        assert all(spec[name] is option for name, option in GROUPS[group].items()), (module, group)
        doc = yaml.safe_load(importlib.import_module(f"{PACKAGE}.modules.{module}").DOCUMENTATION)
        assert f"nmo.maintenance.{group}" in doc["extends_documentation_fragment"], module
        assert not set(doc["options"]) & set(GROUPS[group]), f"{module} documents {group} options again"


@pytest.mark.parametrize("options", [DrainOptions, PreflightOptions])
def test_the_cores_selection_defaults_are_the_specs(options: Any) -> None:
    for name, option in specs.SELECTION.items():
        assert options.__dataclass_fields__[name].default == option.get("default", ""), (options.__name__, name)


def test_the_cores_drain_and_lease_defaults_are_the_specs() -> None:
    spec = module_spec("nmo_drain")
    for name in ("timeout", "retry_delay", "grace_period", "delete_fallback_after", "returning_pod_evictions"):
        assert spec[name].get("default") == DrainOptions.__dataclass_fields__[name].default, name
    for name in ("concurrency", "duration", "slot_prefix", "wait", "timeout"):
        assert specs.LEASE[name]["default"] == Request.__dataclass_fields__[name].default, name
    etcd = etcd_guard.Options()
    assert specs.LEASE["etcd_guard"]["choices"] == list(etcd_guard.FLAVOURS)
    assert [specs.LEASE[name]["default"] for name in ("etcd_guard", "etcd_pod_selector", "etcd_pod_namespace",
                                                      "etcd_guard_namespace")] == [
        etcd.flavour, etcd.pod_selector, etcd.pod_namespace, etcd.guard_namespace]


def test_a_timeout_is_a_float_everywhere() -> None:
    for module in ("nmo_drain", "nmo_lease", "nmo_maintenance"):
        assert module_spec(module)["timeout"]["type"] == "float", module


def test_role_defaults_are_the_modules() -> None:
    defaults, documented = role_defaults(), role_specs()
    for var, (module, option) in ROLE_TO_MODULE.items():
        wanted = module_spec(module)[option].get("default")
        assert defaults[var] == wanted, (var, defaults[var], wanted)
        assert documented[var].get("default") == wanted, var
        assert "-1" not in str(documented[var]["description"]), f"{var}: no -1 sentinels, null is unset"


def test_where_the_role_differs_it_says_why() -> None:
    defaults, documented = role_defaults(), role_specs()
    for var, (module, option) in ROLE_DIFFERS.items():
        assert defaults[var] != module_spec(module)[option]["default"], f"{var} no longer differs: move it up"
        assert "on purpose" in " ".join(documented[var]["description"]), var
        assert documented[var]["type"] == module_spec(module)[option]["type"], var


def test_wait_has_one_default() -> None:
    assert module_spec("nmo_lease")["wait"] is module_spec("nmo_maintenance")["wait"]
