# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run this collection's modules inside Ansible's worker process when they would run on the controller.

Every Kubernetes call of the role is a task delegated to localhost. Shipped as a module, each
such task starts a new Python that unpacks and imports Ansible's module code before it makes
a single request: about half a second a task, most of a node's orchestration time. When the
task runs on the controller anyway (local connection, no become, no async, no task
environment), the action plugin validates the arguments against the module's own argument
spec and calls the same core function here, in the worker Ansible already forked for the
task. Anything else, or the environment variable NMO_MAINTENANCE_IN_PROCESS=false, runs the
module as usual. Both paths share ``module_utils.adapter.execute``, so they return the same.
"""

from __future__ import annotations

import importlib
import os

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.common.parameters import remove_values
from ansible.module_utils.errors import UnsupportedError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible.utils.vars import merge_hash

COLLECTION = "nmo.maintenance"
PACKAGE = "ansible_collections.nmo.maintenance.plugins"
SWITCH = "NMO_MAINTENANCE_IN_PROCESS"


def in_process_allowed(environ=None):
    """False when the operator turned the in-process path off (NMO_MAINTENANCE_IN_PROCESS=false)."""
    return boolean((environ if environ is not None else os.environ).get(SWITCH, "true"), strict=False)


class NmoAction(ActionBase):
    """Base of the collection's action plugins; a subclass names its module."""

    _supports_check_mode = True
    _supports_async = True
    module = ""

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        anchor = os.getppid()  # the ansible-playbook process that forked this worker
        done = self.run_here(anchor) if self.on_controller() else None
        if done is None:
            done = self.run_module(task_vars)
        if os.getppid() != anchor:
            # ansible-playbook died while this task ran: nobody reads the result, and handing
            # it to the dead parent's queue would block this worker forever
            os._exit(1)  # pylint: disable=protected-access
        return merge_hash(result, done)

    def on_controller(self):
        return (in_process_allowed() and self._connection.transport == "local" and not self._task.async_val
                and not self._play_context.become and not any(self._task.environment or []))

    def run_module(self, task_vars):
        wrap_async = self._task.async_val and not self._connection.has_native_async
        done = self._execute_module(module_name=f"{COLLECTION}.{self.module}", task_vars=task_vars,
                                    wrap_async=wrap_async)
        if not wrap_async:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return done

    def check_args(self):
        """(module, validation result) of this task's arguments against the module's own spec,
        environment fallbacks applied. ImportError when the controller's Python lacks what the
        module needs (urllib3)."""
        module = importlib.import_module(f"{PACKAGE}.modules.{self.module}")
        adapter = importlib.import_module(f"{PACKAGE}.module_utils.adapter")
        spec = {**adapter.CONNECTION_SPEC, **module.ARGUMENT_SPEC}
        checked = ArgumentSpecValidator(spec, **getattr(module, "MODULE_KWARGS", {})).validate(dict(self._task.args))
        return module, checked

    def run_here(self, anchor):
        """The module's result computed in this process, or None to run the module instead."""
        try:
            module, checked = self.check_args()
            adapter = importlib.import_module(f"{PACKAGE}.module_utils.adapter")
            client_utils = importlib.import_module(f"{PACKAGE}.module_utils.api.client")
            errors = importlib.import_module(f"{PACKAGE}.module_utils.errors")
            run = importlib.import_module(f"{PACKAGE}.module_utils.guards.run")
        except ImportError:
            return None  # ship the module: it runs with the interpreter the inventory gives
        run.set_local_anchor(anchor)  # waits and writes stop when this controller process is gone
        if checked.error_messages:
            msg = checked.errors.msg
            if isinstance(checked.errors[0], UnsupportedError):
                msg = f"Unsupported parameters for ({COLLECTION}.{self.module}) module: {msg}"
            return {"failed": True, "msg": msg}
        params = checked.validated_parameters
        pool_size = getattr(module, "pool_size", None)
        client = None
        if not isinstance(params.get("kubeconfig"), dict):
            try:
                client = client_utils.connect(client_utils.ConnectionOptions.from_params(params),
                                              pool_size(params) if pool_size else 16)
            except errors.ConnectionConfigError as exc:
                if isinstance(exc.__cause__, ImportError):
                    return None  # an exec or auth-provider kubeconfig needs the kubernetes package
                return {"failed": True, "msg": exc.message}
        result = adapter.execute(params, module.core, bool(self._task.check_mode), bool(self._task.diff),
                                 pool_size, client=client)
        result.setdefault("invocation", {"module_args": params})  # as AnsibleModule reports it (-vvv)
        secrets = checked._no_log_values  # pylint: disable=protected-access  # what AnsibleModule masks too
        if secrets:
            kept = {k: v for k, v in result.items() if v is None or isinstance(v, bool)}
            result = {**remove_values(result, secrets), **kept}
        return result
