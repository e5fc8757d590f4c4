"""The notification targets are documented once, in plugins/doc_fragments/notify.py, for
nmo_notify's ``targets`` and nmo_run's ``notify.targets``: the fragment's two literals agree
with each other and with module_utils/specs.py, and the modules take them from it."""

from __future__ import annotations

import importlib
from typing import Any, Dict

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
