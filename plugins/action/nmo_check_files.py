# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nmo_check_files: are the task files the role will include there, readable, and task lists?

An ``include_tasks`` of a file that is missing, unreadable or not a task list fails in a
way a ``block``/``rescue`` does not catch in a play with ``max_fail_percentage: 0`` (the
play ends at once), and a YAML syntax error or an unknown module in it ends the whole
play. The role runs this check for every hook and gate file before any node is touched,
and again, as an ordinary task whose failure lands in the rescue, right before each
include. It runs on the controller (where ``include_tasks`` reads the files), finds a
relative path where ``include_tasks`` would, and loads the tasks as the include would,
without running them.

With ``concurrency`` above 1 (the free strategy the maintenance playbook then runs its nodes
with), a task of a file that bypasses the host loop (``ansible.builtin.pause``) is refused
too (plugin_utils/host_loop.py): the free strategy would fail it only when it reaches it,
in the work phase, after the node was drained.

With ``inputs`` it also checks the role's variables as given (module_utils/role_inputs.py):
the argument spec converts values only to validate them, so a list option given as a
string would pass it and fail a loop on a node already cordoned.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

from ansible.errors import AnsibleError
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

from ansible_collections.nmo.maintenance.plugins.module_utils import role_inputs
from ansible_collections.nmo.maintenance.plugins.plugin_utils import host_loop

ARGUMENT_SPEC = {
    "files": {"type": "dict", "default": {}},
    "inputs": {"type": "dict"},
    "inputs_spec": {"type": "dict"},
    "concurrency": {"type": "raw"},
}
ROLE_SPEC = os.path.join("meta", "argument_specs.yml")


def _concurrency(value: Any) -> int:
    """The concurrency as given (-e gives a string); one that is not a number is the input
    check's to name, and checks nothing here."""
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return 1


def _paths(value: Any) -> List[Any]:
    if value is None or value == "":
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp: Optional[str] = None, task_vars: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        result = super().run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        checked: List[Dict[str, Any]] = []
        problems: List[str] = []
        concurrency = _concurrency(args.get("concurrency"))
        shapes: List[str] = []
        facts: Dict[str, Any] = {}
        if args.get("inputs") is not None:
            shapes, facts = self._check_inputs(args["inputs"], args.get("inputs_spec"))
        for option, value in args["files"].items():
            if any(p.startswith((f"{option}:", f"{option}[")) for p in shapes):
                continue  # not a path or a list of paths: said once, by the input check
            for given in _paths(value):
                if not isinstance(given, str) or not given.strip():
                    problems.append(f"{option}: {given!r} is not a file name (give the path of a task file)")
                    continue
                path = self._resolve(given)
                tasks, reason, blocks = self._check(path)
                entry = {"option": option, "given": given, "path": path}
                if reason:
                    where = given if given == path else f"{given} (looked for {path})"
                    problems.append(f"{option}: {where}: {reason}")
                    entry["problem"] = reason
                else:
                    entry["tasks"] = tasks
                    if concurrency > 1:
                        refused = host_loop.bypassing(option, given, blocks)
                        problems += [bypass.message(concurrency) for bypass in refused]
                        if refused:
                            entry["problem"] = "; ".join(f"task '{b.task}' bypasses the host loop" for b in refused)
                checked.append(entry)
        result.update(changed=False, files=checked)
        what = "input check" if shapes else "task file check"
        if args.get("inputs") is not None:
            problems = shapes + problems
            deprecations = facts.pop("deprecations", [])
            result["inputs"] = {"checked": len(args["inputs"]), **facts}
            if deprecations:  # shown once a run: Ansible's display says a repeated one once
                result["deprecations"] = [{"msg": text, "version": role_inputs.REMOVED_IN,
                                           "collection_name": "nmo.maintenance"} for text in deprecations]
        if problems:
            result.update(failed=True, problems=problems,
                          msg=f"{what} failed, nothing was done to the node: " + " | ".join(problems))
        else:
            result["msg"] = f"{len(checked)} task file(s) found and loaded"
        return result

    def _check_inputs(self, values: Dict[str, Any], spec: Optional[Dict[str, Any]]) -> Tuple[List[str], Dict[str, Any]]:
        """The values as given against their argument spec (``inputs_spec``, else the options
        of the role's main entry point in its meta/argument_specs.yml)."""
        if spec is None:
            role = getattr(self._task, "_role", None)
            if role is None:
                return ["inputs: give inputs_spec, or run this in a role that has meta/argument_specs.yml"], {}
            loaded = self._loader.load_from_file(os.path.join(role._role_path, ROLE_SPEC), cache="none") or {}
            spec = ((loaded.get("argument_specs") or {}).get("main") or {}).get("options") or {}
        return role_inputs.check(spec, values)

    def _resolve(self, given: str) -> str:
        """Where include_tasks, in this role (or play), finds the file: the role's tasks
        folder first, then the playbook's folder, as loader.path_dwim_relative does."""
        role = getattr(self._task, "_role", None)
        if role is not None:
            return self._loader.path_dwim_relative(role._role_path, "tasks", given, is_role=True)
        return self._loader.path_dwim(given)

    def _check(self, path: str) -> Tuple[int, Optional[str], List[Any]]:
        """(number of tasks, None, the loaded blocks) when the file would load as a task list;
        else (0, why not, [])."""
        if not os.path.lexists(path):
            return 0, "not found", []
        if not os.path.exists(path):
            return 0, "a broken symbolic link", []
        if os.path.isdir(path):
            return 0, "a directory, not a task file", []
        try:
            with open(path, "rb") as handle:
                raw = handle.read()
        except OSError as exc:
            return 0, f"cannot be read: {exc.strerror or exc}", []
        if not raw.lstrip().startswith(b"$ANSIBLE_VAULT"):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                return 0, f"is not UTF-8 text (byte {exc.start}), so not a YAML task file", []
        try:
            data = self._loader.load_from_file(path, cache="none")
        except AnsibleError as exc:
            return 0, "is not valid YAML: " + _first_lines(exc), []
        except Exception as exc:  # pylint: disable=broad-except  # a loader error of any kind is the answer
            return 0, f"cannot be loaded: {exc}", []
        if data is None:
            return 0, None, []  # an empty file is an empty task list, as include_tasks reads it
        if not isinstance(data, list):
            return 0, f"is YAML but not a task list (a {_kind(data)} at the top, a list of tasks is needed)", []
        for index, item in enumerate(data, 1):
            if not isinstance(item, dict):
                return (0, f"item {index} is a {_kind(item)}, not a task (a mapping: name, a module and its arguments)",
                        [])
        try:
            blocks = self._load_tasks(data)
        except AnsibleError as exc:
            return 0, "is not a valid task list: " + _first_lines(exc), []
        return len(data), None, blocks

    def _load_tasks(self, data: List[Any]) -> List[Any]:
        """Load the tasks as include_tasks would (modules resolved, keywords checked), without running them."""
        from ansible.playbook.helpers import load_list_of_blocks

        play = self._task.get_play() if hasattr(self._task, "get_play") else None
        return load_list_of_blocks(data, play=play, role=getattr(self._task, "_role", None), loader=self._loader,
                                   variable_manager=None)


def _first_lines(exc: Exception, limit: int = 4) -> str:
    """The error's first lines, and where in the file when Ansible knows (2.19: the origin)."""
    text = to_text(getattr(exc, "message", None) or exc)
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    where = to_text(getattr(exc, "obj", None) or "")
    at = f" (at {where.rsplit('/', 1)[-1]})" if ":" in where and where.split(":")[-1].isdigit() else ""
    return " / ".join(lines[:limit]) + at


def _kind(value: Any) -> str:
    for cls, name in ((bool, "boolean"), (str, "string"), (dict, "mapping"), (list, "list"), (int, "number"),
                      (float, "number")):
        if isinstance(value, cls):
            return name
    return type(value).__name__
