# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nmo_drain, plus a progress line every progress_interval seconds while it works.

The drain runs as every module of the collection does (see plugin_utils/in_process.py).
Beside it, a thread on the controller reads the node's NodeMaintenance (the status the
drain keeps current) and prints where the drain stands:
the operator watching the play sees progress without a second task polling an async job,
which would cost an Ansible task (about half a second) a round.
"""

from __future__ import annotations

import os
import threading
import time

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.utils.display import Display

from ansible_collections.nmo.maintenance.plugins.plugin_utils.in_process import NmoAction

display = Display()


class ProgressPrinter(threading.Thread):
    """Prints the drain's progress line until stopped; never fails the task."""

    def __init__(self, args, interval):
        super().__init__(name="nmo-drain-progress", daemon=True)
        self.args = args
        self.interval = interval
        self.node = str(args.get("node"))
        self.stopped = threading.Event()
        self.started_at = time.monotonic()
        self.client = None
        self.unreadable = None

    def stop(self):
        self.stopped.set()
        self.join(timeout=5)

    def run(self):
        while not self.stopped.wait(self.interval):
            display.display(self.line())

    def line(self):
        elapsed = time.monotonic() - self.started_at
        if self.unreadable is None:
            try:
                from ansible_collections.nmo.maintenance.plugins.module_utils import maintenance

                client = self.client or self.connect()
                name = self.args.get("maintenance")
                nm = maintenance.get(client, name) if name else maintenance.find(client, self.node)
                return maintenance.progress_line(self.node, nm, elapsed)
            except Exception as exc:  # pylint: disable=broad-exception-caught  # progress must never fail the drain
                self.unreadable = str(exc) or type(exc).__name__
                return (f"{self.node}: draining for {elapsed:.0f} s (its progress cannot be read from the "
                        f"controller: {self.unreadable})")
        return f"{self.node}: draining for {elapsed:.0f} s"

    def connect(self):
        from ansible_collections.nmo.maintenance.plugins.module_utils.client import CONNECTION_ENV, ConnectionOptions, connect

        params = {}
        for name, env in CONNECTION_ENV.items():
            value = self.args.get(name)
            if value is None:
                value = os.environ.get(env)
            params[name] = value
        if params.get("validate_certs") is not None:
            params["validate_certs"] = boolean(params["validate_certs"])
        self.client = connect(ConnectionOptions.from_params(params), 1)
        return self.client


class ActionModule(NmoAction):
    module = "nmo_drain"

    def run(self, tmp=None, task_vars=None):
        try:
            interval = float(self._task.args.get("progress_interval", 10) or 0)
        except (TypeError, ValueError):
            interval = 0  # the module refuses the value itself, with its own message
        printer = None
        if interval > 0 and not self._task.async_val and not self._task.check_mode:
            printer = ProgressPrinter(self._task.args, interval)
            printer.start()
        try:
            return super().run(tmp, task_vars)
        finally:
            if printer is not None:
                printer.stop()
