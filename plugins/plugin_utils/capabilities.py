# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the in-process path needs of ansible-core, checked once: the probe.

Running a module's ``main()`` in Ansible's worker (``in_process``, ``module_call``) reaches
parts of ansible-core that are not a public API and change between releases: the argument
buffer of ``AnsibleModule`` (``basic._ANSIBLE_ARGS``), the module-side warning stores, the
action's ``_update_module_args`` and ``_parse_returned_data``, and the cleaning of a parsed
result (``ansible.vars.clean.remove_internal_keys`` up to 2.20, a result object with its own
``remove_internal_keys()`` from 2.21). None of them is imported unconditionally: ``probe``
looks each one up, and runs a sample module output through the same parse and cleaning the
tasks use, when the action plugin is loaded (in the ansible-playbook process, once a run; the
workers inherit the answer). When anything is missing or behaves otherwise, the in-process
path is off for the run and every module is shipped, which needs nothing of this; the
action says so once, naming what is missing.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from ansible_collections.nmo.maintenance.plugins.plugin_utils.module_call import PROFILE

# What a module prints, and what must come out of the parse and cleaning: the probe's sample.
SAMPLE = {"rc": 0, "stdout": '{"changed": true, "msg": "probe"}', "stderr": ""}
UPDATE_PARAMETERS = {"module_name", "module_args", "task_vars"}
Cleaner = Callable[[Dict[str, Any]], None]


class Missing(Exception):
    """What this ansible-core lacks, found on the way of a result (its name is the message)."""


@dataclass(frozen=True)
class Capabilities:
    """The probe's answer: what is missing (nothing: the in-process path works here), and how
    this ansible-core's parse is called and its result cleaned."""

    missing: Tuple[str, ...] = ()
    takes_profile: bool = False  # _parse_returned_data(res, profile): ansible-core 2.19 and later
    cleaner: Optional[Cleaner] = None  # ansible.vars.clean.remove_internal_keys, up to 2.20

    @property
    def usable(self) -> bool:
        return not self.missing

    def parse_args(self, result: Dict[str, Any]) -> Tuple[Any, ...]:
        """The arguments of _parse_returned_data for a finished command's result."""
        return (result, PROFILE) if self.takes_profile else (result,)

    def finish(self, parsed: Any) -> Dict[str, Any]:
        """A parsed module output as ActionBase._execute_module returns it: internal keys
        removed, a plain dict."""
        return finish(parsed, self.cleaner)

    def why_shipped(self, version: str) -> str:
        return f"ansible-core {version}: {', '.join(self.missing)} missing; modules are shipped"


def finish(parsed: Any, cleaner: Optional[Cleaner]) -> Dict[str, Any]:
    if isinstance(parsed, dict):  # ansible-core up to 2.20
        if cleaner is None:
            raise Missing("ansible.vars.clean.remove_internal_keys")
        parsed.pop("_ansible_suppress_tmpdir_delete", None)
        cleaner(parsed)
        return parsed
    # ansible-core 2.21: a task result object that cleans itself and becomes a dict
    remove = getattr(parsed, "remove_internal_keys", None)
    as_dict = getattr(parsed, "as_result_dict", None)
    if not (callable(remove) and callable(as_dict)):
        raise Missing(f"{type(parsed).__name__}.remove_internal_keys/as_result_dict")
    remove()
    done = as_dict(for_round_trip=True)
    if not isinstance(done, dict):
        raise TypeError(f"{type(parsed).__name__}.as_result_dict() gave a {type(done).__name__}")
    return done


def parameters(function: Any) -> List[str]:
    try:
        return list(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return []


def probe(action_class: type, basic: Any, module_warnings: Any, plugin_loaders: Any,
          cleaner: Optional[Cleaner]) -> Capabilities:
    """What of the in-process path's needs this ansible-core lacks (passed in, so a test can
    hand it a core without one of them). Never raises: whatever fails is named as missing."""
    missing: List[str] = []
    if not hasattr(basic, "_ANSIBLE_ARGS"):
        missing.append("ansible.module_utils.basic._ANSIBLE_ARGS")
    for store in ("_global_warnings", "_global_deprecations"):
        if not isinstance(getattr(module_warnings, store, None), (list, dict)):
            missing.append(f"ansible.module_utils.common.warnings.{store}")
    module_loader = getattr(plugin_loaders, "module_loader", None)
    if not callable(getattr(module_loader, "find_plugin_with_context", None)):
        missing.append("ansible.plugins.loader.module_loader.find_plugin_with_context")
    update = getattr(action_class, "_update_module_args", None)
    if not callable(update) or not set(parameters(update)) >= UPDATE_PARAMETERS:
        missing.append("ActionBase._update_module_args(module_name, module_args, task_vars)")

    parse = getattr(action_class, "_parse_returned_data", None)
    takes_profile = "profile" in parameters(parse)
    if not callable(parse):
        missing.append("ActionBase._parse_returned_data")
        return Capabilities(tuple(missing), takes_profile, cleaner)
    found = Capabilities((), takes_profile, cleaner)
    try:
        # the sample through the path of a task; the parse reads nothing of a new action's state
        done = found.finish(parse(object.__new__(action_class), *found.parse_args(dict(SAMPLE))))
        if done.get("changed") is not True or done.get("msg") != "probe":
            missing.append(f"the parse of a module's output as before (it gave {sorted(done)})")
    except Missing as exc:
        missing.append(str(exc))
    except Exception as exc:  # pylint: disable=broad-exception-caught  # any failure means: ship
        missing.append(f"ActionBase._parse_returned_data as before ({type(exc).__name__}: {exc})")
    return Capabilities(tuple(missing), takes_profile, cleaner)
