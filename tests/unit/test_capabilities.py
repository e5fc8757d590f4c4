"""The probe of what the in-process path needs of ansible-core (plugin_utils/capabilities.py),
and the action's fallback to shipping when something is missing."""

from __future__ import annotations

import importlib
import json
import types
from typing import Any, Dict

import pytest
from ansible.module_utils import basic
from ansible.module_utils.common import warnings as module_warnings
from ansible.plugins import loader as plugin_loaders
from ansible.plugins.action import ActionBase
from ansible.release import __version__ as core_version

from ansible_collections.nmo.maintenance.plugins.plugin_utils import capabilities, in_process

try:
    from ansible.vars.clean import remove_internal_keys
except ImportError:  # ansible-core 2.21
    remove_internal_keys = None


class Action(ActionBase):
    def run(self, tmp=None, task_vars=None):
        return {}


def probe(action_class: type = Action, core_basic: Any = basic, cleaner: Any = remove_internal_keys,
          warnings: Any = module_warnings) -> capabilities.Capabilities:
    return capabilities.probe(action_class, core_basic, warnings, plugin_loaders, cleaner)


def test_this_ansible_core_has_everything() -> None:
    found = probe()
    assert found.usable, found.missing
    assert found.takes_profile == (tuple(map(int, core_version.split(".")[:2])) >= (2, 19))
    assert in_process.CORE.usable and in_process.why_shipped() == ""


def test_a_missing_name_is_named_and_nothing_raises() -> None:
    no_args = types.SimpleNamespace()  # a basic.py without _ANSIBLE_ARGS
    found = probe(core_basic=no_args)
    assert found.missing == ("ansible.module_utils.basic._ANSIBLE_ARGS",)
    assert not found.usable
    assert found.why_shipped("2.99.1") == \
        "ansible-core 2.99.1: ansible.module_utils.basic._ANSIBLE_ARGS missing; modules are shipped"


def test_every_missing_name_is_listed() -> None:
    class Bare:  # an action base without the underscored methods
        pass

    found = probe(action_class=Bare, warnings=types.SimpleNamespace(_global_warnings=[]))
    assert found.missing == ("ansible.module_utils.common.warnings._global_deprecations",
                             "ActionBase._update_module_args(module_name, module_args, task_vars)",
                             "ActionBase._parse_returned_data")


def test_a_changed_signature_is_missing() -> None:
    class Renamed(Action):
        def _update_module_args(self, name, args, variables):  # pylint: disable=arguments-renamed
            pass

    assert probe(action_class=Renamed).missing == ("ActionBase._update_module_args(module_name, module_args, task_vars)",)


def test_a_dict_result_without_the_cleaner_is_missing() -> None:
    """ansible-core 2.21 took remove_internal_keys out of ansible.vars.clean: a parse that still
    gives a dict then has nothing to clean it with."""
    class DictParse(Action):
        def _parse_returned_data(self, res, profile=None):
            return json.loads(res["stdout"])

    assert probe(action_class=DictParse, cleaner=None).missing == ("ansible.vars.clean.remove_internal_keys",)


class Result:
    """A result object as ansible-core 2.21's parse gives one (UnifiedTaskResult)."""

    def __init__(self, data: Dict[str, Any]) -> None:
        self.data = data
        self.cleaned = False

    def remove_internal_keys(self) -> None:
        self.data = {k: v for k, v in self.data.items() if not k.startswith("_ansible_")}
        self.cleaned = True

    def as_result_dict(self, *, for_round_trip: bool = False) -> Dict[str, Any]:
        assert self.cleaned and for_round_trip
        return dict(self.data)


def test_a_result_object_is_cleaned_and_made_a_dict() -> None:
    class ObjectParse(Action):
        def _parse_returned_data(self, res, profile):
            return Result({**json.loads(res["stdout"]), "_ansible_parsed": True})

    found = probe(action_class=ObjectParse, cleaner=None)
    assert found.usable and found.takes_profile
    assert found.finish(Result({"changed": True, "_ansible_parsed": True})) == {"changed": True}


def parse_without_stdout(self, res):
    raise KeyError("stdout")


@pytest.mark.parametrize("parse, named", [
    (lambda self, res: 42, "int.remove_internal_keys/as_result_dict"),
    (parse_without_stdout, "ActionBase._parse_returned_data as before (KeyError"),
    (lambda self, res: {"changed": False}, "the parse of a module's output as before"),
])
def test_a_parse_that_behaves_otherwise_is_missing(parse, named) -> None:
    odd = type("Odd", (Action,), {"_parse_returned_data": parse})
    (missing,) = probe(action_class=odd).missing
    assert missing.startswith(named), missing


class Task:
    def __init__(self) -> None:
        self.async_val, self.environment = 0, []


def local_action() -> Any:
    """What on_controller reads of an action: a local task with no become."""
    return types.SimpleNamespace(_connection=types.SimpleNamespace(transport="local"), _task=Task(),
                                 _play_context=types.SimpleNamespace(become=False))


def test_the_action_ships_when_the_core_lacks_a_name(monkeypatch) -> None:
    action = local_action()
    assert in_process.NmoAction.on_controller(action)
    lacking = capabilities.Capabilities(("ansible.module_utils.basic._ANSIBLE_ARGS",))
    monkeypatch.setattr(in_process, "CORE", lacking)
    assert not in_process.NmoAction.on_controller(action), "a core without what the path needs: shipped"
    assert in_process.why_shipped(lacking, {}) == \
        f"ansible-core {core_version}: ansible.module_utils.basic._ANSIBLE_ARGS missing; modules are shipped"
    assert in_process.why_shipped(lacking, {in_process.SWITCH: "false"}) == "", \
        "no warning when the operator ships the modules anyway"


def test_the_action_loads_without_remove_internal_keys(monkeypatch) -> None:
    """What broke every task on ansible-core 2.21: an import of a name it no longer has."""
    import ansible.vars.clean

    warned = []
    try:
        monkeypatch.delattr(ansible.vars.clean, "remove_internal_keys", raising=False)
        monkeypatch.setattr(in_process.display, "warning", warned.append)
        reloaded = importlib.reload(in_process)
        parse_gives_dict = remove_internal_keys is not None  # up to 2.20 the parse gives a dict
        assert reloaded.CORE.usable is not parse_gives_dict
        if parse_gives_dict:
            assert reloaded.CORE.missing == ("ansible.vars.clean.remove_internal_keys",)
            assert warned == [f"ansible-core {core_version}: ansible.vars.clean.remove_internal_keys missing; "
                              "modules are shipped"], "one warning when the plugin is loaded"
    finally:
        monkeypatch.undo()
        importlib.reload(in_process)
    assert in_process.CORE.usable
