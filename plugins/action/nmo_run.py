# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nmo_run: always in Ansible's worker on the controller, whose parent is the ansible-playbook
process the run's heartbeat is tied to."""

from __future__ import annotations

import importlib

from ansible.plugins.action import ActionBase

from ansible_collections.nmo.maintenance.plugins.plugin_utils import arguments
from ansible_collections.nmo.maintenance.plugins.plugin_utils.in_process import PACKAGE, controller_pid


class ActionModule(ActionBase):
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        if self._connection.transport != "local" or self._play_context.become:
            result.update(failed=True, msg="nmo_run must run on the controller: delegate it to localhost "
                                           "with a local connection and become: false")
            return result
        # The module and the core are imported by name when the task runs, not when Ansible loads
        # this plugin: the way in_process.py loads the modules it runs in the worker.
        module = importlib.import_module(f"{PACKAGE}.modules.nmo_run")
        checked = arguments.check(module.ARGUMENT_SPEC, self._task.args)
        if checked.error_messages:
            result.update(failed=True, msg=checked.errors.msg)
            return result
        params = checked.validated_parameters
        client_utils = importlib.import_module(f"{PACKAGE}.module_utils.api.client")
        errors = importlib.import_module(f"{PACKAGE}.module_utils.errors")
        run_start = importlib.import_module(f"{PACKAGE}.module_utils.workflows.run_start")
        del module
        try:
            options = client_utils.ConnectionOptions.from_params(params)
            client = client_utils.connect(options, 2)
            client.dry_run = bool(self._task.check_mode)
            if params["state"] == "stopped":
                done = run_start.stop(client, params)
            else:
                # the run lives as long as the ansible-playbook process that forked this worker
                done = run_start.start(client, options, params, controller_pid())
        except errors.NmoError as exc:
            result.update(failed=True, msg=exc.message)
            return result
        result.update(done)
        return result
