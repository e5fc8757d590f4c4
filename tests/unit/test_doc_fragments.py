"""Documentation several files share is written once.

The notification targets, in plugins/doc_fragments/notify.py, for nmo_notify's ``targets`` and
nmo_run's ``notify.targets``: the fragment's two literals agree with each other and with
module_utils/specs.py, and the modules take them from it.

The return values the adapter adds (``api_requests``, ``api_requests_by``), in
plugins/doc_fragments/api_requests.py: every module the adapter runs holds that text in its
RETURN, as hack/shared_docs.py writes it (ansible-core merges no RETURN fragment).
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from typing import Any, Dict

import pytest
import shared_docs  # hack/shared_docs.py (tests/conftest.py puts hack/ on the path)
import yaml

from ansible_collections.nmo.maintenance.plugins.module_utils import specs

PACKAGE = "ansible_collections.nmo.maintenance.plugins"
FRAGMENT = importlib.import_module(f"{PACKAGE}.doc_fragments.notify").ModuleDocFragment


def module(name: str) -> Any:
    return importlib.import_module(f"{PACKAGE}.modules.{name}")


def without_description(option: Dict[str, Any]) -> Dict[str, Any]:
    return {key: value for key, value in option.items() if key != "description"}


def test_both_literals_document_the_same_targets_as_the_spec() -> None:
    notify_targets = yaml.safe_load(FRAGMENT.DOCUMENTATION)["options"]["targets"]
    run_targets = yaml.safe_load(FRAGMENT.RUN)["options"]["notify"]["suboptions"]["targets"]
    assert without_description(run_targets) == without_description(notify_targets)
    spec = specs.NOTIFY_TARGETS
    assert (notify_targets["type"], notify_targets["elements"], notify_targets["default"]) == \
        (spec["type"], spec["elements"], spec["default"])
    assert sorted(notify_targets["suboptions"]) == sorted(spec["options"])
    for name, option in spec["options"].items():
        documented = notify_targets["suboptions"][name]
        assert documented["type"] == option.get("type", "str"), name
        assert documented.get("default") == option.get("default"), name
        assert documented.get("choices") == option.get("choices"), name
        assert documented.get("required", False) == option.get("required", False), name


def test_the_run_fragment_documents_every_option_of_nmo_runs_notify() -> None:
    documented = yaml.safe_load(FRAGMENT.RUN)["options"]["notify"]["suboptions"]
    spec = module("nmo_run").ARGUMENT_SPEC["notify"]["options"]
    assert sorted(documented) == sorted(spec)
    assert spec["targets"] is specs.NOTIFY_TARGETS
    for name, option in spec.items():
        assert documented[name]["type"] == option.get("type", "str"), name


def test_the_modules_name_the_fragment_and_do_not_document_the_targets_again() -> None:
    notify_doc = yaml.safe_load(module("nmo_notify").DOCUMENTATION)
    assert "nmo.maintenance.notify" in notify_doc["extends_documentation_fragment"]
    assert "targets" not in notify_doc["options"]
    assert module("nmo_notify").ARGUMENT_SPEC["targets"] is specs.NOTIFY_TARGETS
    run_doc = yaml.safe_load(module("nmo_run").DOCUMENTATION)
    assert "nmo.maintenance.notify.run" in run_doc["extends_documentation_fragment"]
    assert "suboptions" not in run_doc["options"]["notify"]


REGENERATE = "run hack/shared_docs.py to write it again"
ADAPTER_MODULES = shared_docs.adapter_modules()


def return_of(path: Path) -> Dict[str, Any]:
    """A module's RETURN as ansible-doc reads it: the literal, parsed, without importing it."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "RETURN":
            return yaml.safe_load(node.value.value)
    raise AssertionError(f"{path.name} has no RETURN")


def test_the_adapter_modules_are_found() -> None:
    names = {path.stem for path in ADAPTER_MODULES}
    assert {"nmo_drain", "nmo_maintenance", "nmo_recover", "nmo_settle"} <= names
    assert not names & {"nmo_run", "nmo_notify", "nmo_check_files", "nmo_rollout_report"}


@pytest.mark.parametrize("path", ADAPTER_MODULES, ids=lambda path: path.stem)
def test_each_module_the_adapter_runs_documents_what_it_adds_as_the_fragment_says(path: Path) -> None:
    text = path.read_text()
    where = f"plugins/modules/{path.name}"
    assert shared_docs.RETURN_BEGIN in text, \
        f"{where}: its RETURN lacks the api_requests of plugins/doc_fragments/api_requests.py: {REGENERATE}"
    assert shared_docs.module_return(text) == text, \
        f"{where}: its api_requests and api_requests_by are not plugins/doc_fragments/api_requests.py's: {REGENERATE}"
    shared = yaml.safe_load(shared_docs.shared_return())
    documented = return_of(path)
    assert {key: documented[key] for key in shared} == shared, where


def test_a_module_the_adapter_does_not_run_does_not_document_what_it_adds() -> None:
    for path in sorted(shared_docs.MODULES.glob("nmo_*.py")):
        if path not in ADAPTER_MODULES:
            assert not {"api_requests", "api_requests_by"} & set(return_of(path) or {}), path.name


def test_nmo_runs_targets_and_the_roles_are_what_hack_shared_docs_writes() -> None:
    for path, render in ((shared_docs.NOTIFY, shared_docs.notify_fragment),
                         (shared_docs.ROLE_SPECS, shared_docs.role_notify)):
        text = path.read_text()
        assert render(text) == text, f"{path.relative_to(shared_docs.ROOT)} is out of date: {REGENERATE}"


def test_the_roles_notify_targets_are_the_fragments_with_the_specs_no_log() -> None:
    role = yaml.safe_load(shared_docs.ROLE_SPECS.read_text())
    options = role["argument_specs"]["main"]["options"]["node_maintenance_notify"]["options"]
    documented = yaml.safe_load(FRAGMENT.DOCUMENTATION)["options"]["targets"]["suboptions"]
    assert {name: without_no_log(option) for name, option in options.items()} == documented
    assert {name for name, option in options.items() if option.get("no_log")} == \
        {name for name, option in specs.NOTIFY_TARGETS["options"].items() if option.get("no_log")} == {"url", "secret"}


def without_no_log(option: Dict[str, Any]) -> Dict[str, Any]:
    return {key: value for key, value in option.items() if key != "no_log"}
