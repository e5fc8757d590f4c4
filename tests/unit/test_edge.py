"""The Ansible edge where its logic is pure: where a task runs (plugin_utils/in_process.py) and
what adapter.execute makes of a core function's outcome."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils import adapter
from ansible_collections.nmo.maintenance.plugins.module_utils.errors import ConnectionConfigError, InputError
from ansible_collections.nmo.maintenance.plugins.plugin_utils import in_process


@pytest.mark.parametrize("value, allowed", [(None, True), ("true", True), ("1", True), ("false", False),
                                            ("no", False), ("0", False), ("off", False), ("garbage", False)])
def test_the_switch(value, allowed) -> None:
    environ = {} if value is None else {in_process.SWITCH: value}
    assert in_process.in_process_allowed(environ) is allowed


@pytest.mark.parametrize("transport, async_val, become, environment, here", [
    ("local", 0, False, [], True),
    ("local", 0, False, [{}], True),  # an empty task environment changes nothing
    ("ssh", 0, False, [], False),
    ("local", 30, False, [], False),
    ("local", 0, True, [], False),
    ("local", 0, False, [{"HTTPS_PROXY": "http://p"}], False),
])
def test_where_a_task_runs(transport, async_val, become, environment, here) -> None:
    assert in_process.runs_on_controller(transport, async_val, become, environment) is here


def test_a_missing_library_ships_the_module() -> None:
    assert in_process.missing_import({"failed": True, "msg": "x", "missing_library": "kubernetes"})
    assert not in_process.missing_import({"failed": True, "msg": "x"})
    assert not in_process.missing_import({"changed": False, "missing_library": "kubernetes"})


class Connected:
    """What adapter.execute reads of a client besides handing it to the core: no requests."""

    def __init__(self, warnings: List[str]) -> None:
        self.warnings = warnings
        self.requests = 7
        self.requests_by: Dict[str, int] = {"get nodes": 7}

    def requests_since(self, mark: Dict[str, int]) -> Dict[str, int]:
        return {k: v - mark.get(k, 0) for k, v in self.requests_by.items() if v - mark.get(k, 0)}


def execute(core, diff: bool = True, warnings: List[str] = ()) -> Dict[str, Any]:
    return adapter.execute({"kubeconfig": None}, core, False, diff, client=Connected(list(warnings)))


def test_an_nmo_error_is_a_failure_with_its_details() -> None:
    def core(client: Any, params: Dict[str, Any]) -> Dict[str, Any]:
        raise InputError("node: '..' is not a valid node name", option="node", reached=None)

    assert execute(core) == {"failed": True, "msg": "node: '..' is not a valid node name", "option": "node"}


def test_a_missing_package_is_named_for_the_action() -> None:
    def core(client: Any, params: Dict[str, Any]) -> Dict[str, Any]:
        raise ConnectionConfigError("needs kubernetes", missing_library="kubernetes")

    assert in_process.missing_import(execute(core))


def test_diff_only_when_asked_and_connection_warnings_first() -> None:
    def core(client: Any, params: Dict[str, Any]) -> Dict[str, Any]:
        return {"diff": {"before": 1, "after": 2}, "warnings": ["from the core"]}

    shown = execute(core, diff=True, warnings=["api_key with a certificate"])
    assert shown["diff"] == {"before": 1, "after": 2} and shown["changed"] is False and shown["api_requests"] == 7
    assert shown["warnings"] == ["api_key with a certificate", "from the core"]
    assert "diff" not in execute(core, diff=False)


def test_the_core_sees_ansibles_check_mode_as_the_clients_dry_run() -> None:
    """The stores and workflows read the dry run from the client: the adapter sets it on every
    call, so a client kept from a check-mode call never makes the next real call a dry run."""
    seen: List[bool] = []

    def core(client: Any, params: Dict[str, Any]) -> Dict[str, Any]:
        seen.append(client.dry_run)
        return {}

    client = Connected([])
    for check_mode in (True, False):
        adapter.execute({"kubeconfig": None}, core, check_mode, False, client=client)
    assert seen == [True, False]


def test_a_kubeconfig_dict_is_refused() -> None:
    done = adapter.execute({"kubeconfig": {"apiVersion": "v1"}}, lambda *a: {}, False, False)
    assert done["failed"] and "kubeconfig as a dict" in done["msg"]


def test_the_preloaded_modules_are_those_the_one_action_serves() -> None:
    """in_process.MODULES (imported once in ansible-playbook) must name every module whose
    action is the shared one, and no other: a module added to the collection and not here
    would still work, only slower; one listed but gone would be silently skipped."""
    from pathlib import Path

    actions = Path(in_process.__file__).resolve().parents[1] / "action"
    # the shared action's files: a class of NmoAction's, nothing more (not symbolic links:
    # antsibull-docs would take each for a redirect to nmo_maintenance)
    shared = sorted(path.stem for path in actions.glob("nmo_*.py")
                    if "class ActionModule(NmoAction):" in path.read_text())
    assert not [path.name for path in actions.glob("*.py") if path.is_symlink()]
    assert sorted(in_process.MODULES) == shared
