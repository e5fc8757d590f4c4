# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nmo_drain, plus a progress line every progress_interval seconds while it works.

The drain runs as every module of the collection does (see plugin_utils/in_process.py).
Beside it, a thread on the controller reads the node's NodeMaintenance (the status the
drain keeps current) and prints where the drain stands:
the operator watching the play sees progress without a second task polling an async job,
which would cost an Ansible task (about half a second) a round.
"""

from __future__ import annotations

import threading
import time

from ansible.utils.display import Display

from ansible_collections.nmo.maintenance.plugins.plugin_utils.in_process import NmoAction

display = Display()
DEFAULT_INTERVAL = 10.0  # the module's default progress_interval


class ProgressPrinter(threading.Thread):
    """Prints the drain's progress line until stopped; never fails the task."""

    def __init__(self, node, params, interval):
        super().__init__(name="nmo-drain-progress", daemon=True)
        self.node = node
        self.params = params  # the validated module arguments; None: the progress cannot be read
        self.interval = interval
        self.stopped = threading.Event()
        self.started_at = time.monotonic()
        self.client = None
        self.unreadable = None if params is not None else "the controller cannot load the module's code"

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
                from ansible_collections.nmo.maintenance.plugins.module_utils.api import client
                from ansible_collections.nmo.maintenance.plugins.module_utils.maintenance import record as maintenance

                if self.client is None:
                    self.client = client.connect(client.ConnectionOptions.from_params(self.params), 1)
                name = self.params.get("maintenance")
                nm = maintenance.get(self.client, name) if name else maintenance.find(self.client, self.node)
                return maintenance.progress_line(self.node, nm, elapsed)
            except Exception as exc:  # pylint: disable=broad-exception-caught  # progress must never fail the drain
                self.unreadable = str(exc) or type(exc).__name__
                return (f"{self.node}: draining for {elapsed:.0f} s (its progress cannot be read from the "
                        f"controller: {self.unreadable})")
        return f"{self.node}: draining for {elapsed:.0f} s"


class ActionModule(NmoAction):
    module = "nmo_drain"

    def run(self, tmp=None, task_vars=None):
        printer = self.progress_printer()
        if printer is not None:
            printer.start()
        try:
            return super().run(tmp, task_vars)
        finally:
            if printer is not None:
                printer.stop()

    def progress_printer(self):
        if self._task.async_val or self._task.check_mode:
            return None
        try:
            checked = self.check_args()[1]
        except ImportError:  # the module is shipped: print how long it runs, at the default interval
            return ProgressPrinter(str(self._task.args.get("node")), None, DEFAULT_INTERVAL)
        if checked.error_messages:
            return None  # the module refuses its arguments at once
        params = checked.validated_parameters
        if params.get("validate_only") or not 0 < params["progress_interval"] < float("inf"):
            return None  # 0 prints none; nan, inf and negative values the module refuses
        return ProgressPrinter(params["node"], params, params["progress_interval"])
