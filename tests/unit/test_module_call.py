"""A module's main() called in this process (plugin_utils/module_call.py), with the real AnsibleModule."""

from __future__ import annotations

import json
import sys

import pytest
from ansible.module_utils import _internal, basic
from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common import warnings as module_warnings

from ansible_collections.nmo.maintenance.plugins.plugin_utils import module_call

SPEC = {"count": {"type": "int", "default": 1}, "token": {"type": "str", "no_log": True},
        "verify": {"type": "bool", "aliases": ["verify_ssl"]}}
QUIET = {"_ansible_no_log": False, "_ansible_module_name": "nmo.maintenance.test"}


@pytest.fixture(autouse=True)
def module_side(monkeypatch) -> None:
    """Warnings collected for the result, as in a shipped module. In a worker of ansible-core
    2.19 (the controller), AnsibleModule hands them to Display instead and the task executor
    puts them in the result: tests/integration/test_parity.py checks that path."""
    monkeypatch.setattr(_internal, "is_controller", False)


def echo_main() -> None:
    module = AnsibleModule(argument_spec=SPEC, supports_check_mode=True)
    module.warn("careful")
    print("a library's own print")
    module.exit_json(changed=not module.check_mode, echoed=f"token is {module.params['token']}",
                     count=module.params["count"], diff_mode=module._diff)  # pylint: disable=protected-access


def result(output: module_call.Output) -> dict:
    """The module's JSON; warnings as their messages (ansible-core 2.19 sends them as summaries)."""
    done = json.loads(output.stdout.strip().splitlines()[-1])
    done["warnings"] = [w["event"]["msg"] if isinstance(w, dict) else w for w in done.get("warnings", [])]
    return done


def test_the_real_module_validates_masks_and_warns() -> None:
    output = module_call.call_main(echo_main, {"count": "3", "token": "s3cret", "verify": True, "verify_ssl": True,
                                               "_ansible_check_mode": True, "_ansible_diff": True, **QUIET})
    done = result(output)
    assert output.rc == 0
    assert done["count"] == 3 and done["changed"] is False and done["diff_mode"] is True
    assert done["echoed"] == "token is ********", "a no_log value must be masked in the result"
    assert done["invocation"]["module_args"]["token"] == "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"
    assert "careful" in done["warnings"]
    assert "Both option verify and its alias verify_ssl are set." in done["warnings"]
    assert "a library's own print" in output.stdout


def test_a_refused_argument_fails_with_exit_1() -> None:
    output = module_call.call_main(echo_main, {"count": "many", **QUIET})
    done = result(output)
    assert output.rc == 1 and done["failed"] is True
    assert "count" in done["msg"] and "many" in done["msg"]


def test_unknown_option_names_the_module() -> None:
    done = result(module_call.call_main(echo_main, {"bogus": 1, **QUIET}))
    assert done["msg"].startswith("Unsupported parameters for (nmo.maintenance.test) module: bogus")


def test_nothing_reaches_the_workers_streams(capsys) -> None:
    module_call.call_main(echo_main, {**QUIET})
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


def test_global_state_is_put_back() -> None:
    before_args = basic._ANSIBLE_ARGS  # pylint: disable=protected-access
    module_warnings.warn("left by someone else")
    try:
        done = result(module_call.call_main(echo_main, {**QUIET}))
        assert "left by someone else" not in done["warnings"], "another task's warning leaked in"
        assert basic._ANSIBLE_ARGS is before_args  # pylint: disable=protected-access
        assert "left by someone else" in module_warnings.get_warning_messages()
        assert "careful" not in module_warnings.get_warning_messages(), "this task's warning leaked out"
        again = result(module_call.call_main(echo_main, {"count": 5, **QUIET}))
        assert again["count"] == 5 and again["warnings"] == done["warnings"]
    finally:
        for name in module_call.WARNING_STORES:
            getattr(module_warnings, name).clear()


def test_an_exception_ends_as_a_shipped_python_would() -> None:
    def broken() -> None:
        raise ValueError("boom")

    output = module_call.call_main(broken, {})
    assert output.rc == 1 and output.stdout == ""
    assert "ValueError: boom" in output.stderr and "Traceback" in output.stderr


def test_a_late_import_error_is_named() -> None:
    def needs_a_package() -> None:
        import nmo_no_such_package  # noqa: F401  # pylint: disable=import-outside-toplevel,unused-import

    output = module_call.call_main(needs_a_package, {})
    assert output.rc == 1 and output.missing_import == "nmo_no_such_package"
    assert module_call.call_main(lambda: None, {}).missing_import == ""


def test_sys_exit_codes() -> None:
    assert module_call.call_main(sys.exit, {}).rc == 0
    assert module_call.call_main(lambda: sys.exit(3), {}).rc == 3
    said = module_call.call_main(lambda: sys.exit("no way"), {})
    assert said.rc == 1 and "no way" in said.stderr


def test_encoded_args_are_what_ansible_module_reads() -> None:
    encoded = json.loads(module_call.encode_args({"a": [1, "b"]}))
    assert encoded == {"ANSIBLE_MODULE_ARGS": {"a": [1, "b"]}}
