# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The action of every module of this collection: run the module in Ansible's worker when it
would run on the controller anyway, ship it otherwise.

Every Kubernetes call of the role is a task delegated to localhost. Shipped, each such task
starts a new Python that unpacks and imports Ansible's module code before it makes a single
request: about half a second a task, most of a node's orchestration time. When the task runs
on the controller anyway (local connection, no become, no async, no task environment), this
action loads the module through Ansible's plugin loader and calls the module's own ``main()``
here, in the worker Ansible already forked for the task (``module_call``): the real
``AnsibleModule`` takes the arguments Ansible would have sent, validates them, masks
``no_log`` values, collects warnings and deprecations, and its printed result is parsed as
a shipped module's is. Both paths therefore return the same thing.

The module is shipped instead when the environment variable NMO_MAINTENANCE_IN_PROCESS is
false, when the task does not run on the controller, when this ansible-core lacks what the
in-process path needs (``capabilities.probe``, checked once when the plugin is loaded; one
warning for the run names what is missing), or when the controller's Python lacks what the
module needs (a failed import, or the ``kubernetes`` package for an auth-provider kubeconfig):
then the inventory's interpreter may have it. Nothing this file imports unconditionally is
outside ansible-core's stable surface, so loading the action never fails.

One action serves every module (``plugins/action/nmo_maintenance.py``; the other modules'
action files are copies of it, each a class of NmoAction); the module it runs is the task's
own. Per module, only a companion differs: ``nmo_drain`` and ``nmo_settle`` print their
progress from a thread while they run (``progress``).
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
from typing import Any, Dict, Optional

from ansible.module_utils import basic
from ansible.module_utils.common import warnings as module_warnings
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins import loader as plugin_loaders
from ansible.plugins.action import ActionBase
from ansible.release import __version__ as core_version
from ansible.utils.display import Display
from ansible.utils.vars import merge_hash

from ansible_collections.nmo.maintenance.plugins.plugin_utils import capabilities, module_call

try:  # up to ansible-core 2.20; from 2.21 the parsed result cleans itself (capabilities.finish)
    from ansible.vars.clean import remove_internal_keys
except ImportError:
    remove_internal_keys = None

COLLECTION = "nmo.maintenance"
PACKAGE = "ansible_collections.nmo.maintenance.plugins"
SWITCH = "NMO_MAINTENANCE_IN_PROCESS"
# module -> what runs beside it (in progress.py)
COMPANIONS = {f"{COLLECTION}.nmo_drain": "drain_printer", f"{COLLECTION}.nmo_settle": "settle_printer"}

display = Display()


class Nothing:
    """The companion of a module that has none."""

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass


NOTHING = Nothing()


def in_process_allowed(environ: Optional[Dict[str, str]] = None) -> bool:
    """False when the operator turned the in-process path off (NMO_MAINTENANCE_IN_PROCESS=false)."""
    return boolean((environ if environ is not None else os.environ).get(SWITCH, "true"), strict=False)


def runs_on_controller(transport: str, async_val: Any, become: Any, environment: Any) -> bool:
    """Whether a shipped module would run in a plain Python on this controller, as this
    worker does: local connection, not async, no become, no task environment."""
    return transport == "local" and not async_val and not become and not any(environment or [])


def missing_import(result: Dict[str, Any]) -> bool:
    """Whether the module failed only because this Python lacks a package (the module says
    so with ``missing_library``); the inventory's interpreter may have it."""
    return bool(result.get("failed")) and bool(result.get("missing_library"))


def controller_pid() -> int:
    """The ansible-playbook process that forked this worker: the PID recorded at the fork.
    os.getppid() would name init (1) or a subreaper once that process is killed while the
    task runs, and a run or a guard anchored there would never see its controller go."""
    parent = multiprocessing.parent_process()
    return parent.pid if parent is not None and parent.pid else os.getppid()


class NmoAction(ActionBase):
    """Runs the task's module in this process, or ships it."""

    _supports_check_mode = True
    _supports_async = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        anchor = controller_pid()
        name = self.module_name()
        companion = self.companion(name)
        companion.start()
        try:
            done = self.run_here(name, task_vars, anchor) if self.on_controller() else None
            if done is None:
                done = self.run_shipped(name, task_vars)
        finally:
            companion.stop()
        if os.getppid() != anchor:
            # ansible-playbook died while this task ran: nobody reads the result, and handing
            # it to the dead parent's queue would block this worker forever
            os._exit(1)  # pylint: disable=protected-access
        return merge_hash(result, done)

    def module_name(self) -> str:
        """The module this task runs, fully qualified (a task may name it short, with the
        ``collections`` keyword); its action file has the module's name."""
        return self._task.resolved_action or self._task.action

    def companion(self, name: str) -> Any:
        """What runs beside the module (a thread with start() and stop()); imported only for
        the modules that have one: the collection loader compiles every file it imports, in
        every worker."""
        if name not in COMPANIONS:
            return NOTHING
        progress = importlib.import_module(f"{PACKAGE}.plugin_utils.progress")
        return getattr(progress, COMPANIONS[name])(self._task)

    def on_controller(self) -> bool:
        return in_process_allowed() and CORE.usable and runs_on_controller(
            self._connection.transport, self._task.async_val, self._play_context.become, self._task.environment)

    def run_shipped(self, name: str, task_vars: Dict[str, Any]) -> Dict[str, Any]:
        wrap_async = self._task.async_val and not self._connection.has_native_async
        done = self._execute_module(module_name=name, task_vars=task_vars, wrap_async=wrap_async)
        if not wrap_async:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return done

    def load_module(self, name: str) -> Any:
        """The module's Python module, found by Ansible's plugin loader, with a main(); None
        when it cannot be imported here (the controller's Python lacks a package it needs)."""
        found = plugin_loaders.module_loader.find_plugin_with_context(
            name, collection_list=self._task.collections)
        if not found.resolved:
            return None
        try:
            module = importlib.import_module(found.plugin_resolved_name)
        except ImportError as exc:
            display.vvv(f"{name}: shipped, this Python cannot import it ({exc})")
            return None
        return module if callable(getattr(module, "main", None)) else None

    def run_here(self, name: str, task_vars: Dict[str, Any], anchor: int) -> Optional[Dict[str, Any]]:
        """The module's result computed by its own main() in this process, or None to ship it."""
        module = self.load_module(name)
        if module is None:
            return None
        run = importlib.import_module(f"{PACKAGE}.module_utils.workflows.run")  # the core only: no extra package
        run.set_local_anchor(anchor)  # waits and writes stop when this controller process is gone
        args = dict(self._task.args)  # _update_module_args adds Ansible's own _ansible_* keys to it
        self._update_module_args(name, args, task_vars)
        display.vvv(f"{name}: running in Ansible's worker (set {SWITCH}=false to ship it)")
        output = module_call.call_main(module.main, args)
        if output.missing_import:
            display.vvv(f"{name}: shipped, this Python cannot import {output.missing_import}")
            return None
        done = self.parse(output)
        if missing_import(done):
            display.vvv(f"{name}: shipped, {done['missing_library']} is missing here")
            return None
        return done

    def parse(self, output: module_call.Output) -> Dict[str, Any]:
        """The module's output read as a shipped module's is (ActionBase._execute_module)."""
        return CORE.finish(self._parse_returned_data(*CORE.parse_args(output.as_result())))


# What this ansible-core offers the in-process path, found once: here, where the ansible-playbook
# process loads the plugin before it forks the workers, which inherit the answer.
CORE = capabilities.probe(NmoAction, basic, module_warnings, plugin_loaders, remove_internal_keys)


def why_shipped(core: Optional[capabilities.Capabilities] = None, environ: Optional[Dict[str, str]] = None) -> str:
    """Why every module of this run is shipped though the operator allows the in-process path;
    empty when it is not."""
    core = core or CORE
    if core.usable or not in_process_allowed(environ):
        return ""
    return core.why_shipped(core_version)


MODULES = ("nmo_taint", "nmo_cordon", "nmo_crd", "nmo_info", "nmo_plan", "nmo_lease", "nmo_drain", "nmo_preflight",
           "nmo_maintenance", "nmo_recover", "nmo_settle", "nmo_waiting", "nmo_silence", "nmo_notify", "nmo_progress")


def preload() -> None:
    """Import the modules and their core once, where this action plugin is first loaded.

    Ansible's strategy loads the action plugin in the ansible-playbook process (to read its
    class), then forks a worker for each task; what is imported here is inherited by every
    worker. The collection loader compiles each file it imports from source (no bytecode
    cache), so without this each in-process task imports and compiles the module, the core
    and urllib3 again: about 70 ms of CPU a task. A controller that cannot import them ships
    the modules as before (the workers find out for themselves).
    """
    if not in_process_allowed() or not CORE.usable:
        return
    for name in [f"{PACKAGE}.modules.{module}" for module in MODULES] + ["urllib3"]:
        try:
            importlib.import_module(name)
        except ImportError:
            return


if why_shipped():
    display.warning(why_shipped())  # once a run: the workers inherit this module, loaded
preload()
