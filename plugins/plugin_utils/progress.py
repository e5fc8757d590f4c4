# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The progress lines of nmo_drain and nmo_settle, printed every progress_interval seconds
while they run.

Beside the drain (in process or shipped), a thread on the controller reads the node's
NodeMaintenance (the status the drain keeps current) and prints where the drain stands:
the operator watching the play sees progress without a second task polling an async job,
which would cost an Ansible task (about half a second) a round. Beside the settle, it reads
the node's settle snapshot and its workloads (workflows/settle.py ``progress``).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Dict, Optional

from ansible.utils.display import Display

from ansible_collections.nmo.maintenance.plugins.plugin_utils import arguments

display = Display()
DEFAULT_INTERVAL = 10.0  # nmo_drain's default progress_interval


class Nothing:
    """No line to print."""

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass


class ProgressPrinter(threading.Thread):
    """Prints the drain's progress line until stopped; never fails the task."""

    def __init__(self, node: str, params: Optional[Dict[str, Any]], interval: float) -> None:
        super().__init__(name="nmo-drain-progress", daemon=True)
        self.node = node
        self.params = params  # the checked module arguments; None: the progress cannot be read
        self.interval = interval
        self.stopped = threading.Event()
        self.started_at = time.monotonic()
        self.client = None
        self.unreadable = None if params is not None else "the controller cannot load the module's code"

    def stop(self) -> None:
        self.stopped.set()
        if self.is_alive():
            self.join(timeout=5)

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            display.display(self.line())

    # what the line says the node is doing, and what a failure to read it may never fail
    doing = "draining"

    def line(self) -> str:
        elapsed = time.monotonic() - self.started_at
        if self.unreadable is None:
            try:
                from ansible_collections.nmo.maintenance.plugins.module_utils.api import client

                if self.client is None:
                    self.client = client.connect(client.ConnectionOptions.from_params(self.params), 1)
                return self.read(elapsed)
            except Exception as exc:  # pylint: disable=broad-exception-caught  # progress must never fail the task
                self.unreadable = str(exc) or type(exc).__name__
                return (f"{self.node}: {self.doing} for {elapsed:.0f} s (its progress cannot be read from the "
                        f"controller: {self.unreadable})")
        return f"{self.node}: {self.doing} for {elapsed:.0f} s"

    def read(self, elapsed: float) -> str:
        """The drain's line, from the node's NodeMaintenance."""
        from ansible_collections.nmo.maintenance.plugins.module_utils.stores import maintenance

        name = self.params.get("maintenance")
        nm = maintenance.get(self.client, name) if name else maintenance.find(self.client, self.node)
        return maintenance.progress_line(self.node, nm, elapsed)


class SettlePrinter(ProgressPrinter):
    """Prints the settle's progress line (which workloads, Ready of wanted, of before the
    drain) until stopped; never fails the task."""

    doing = "settling"

    def read(self, elapsed: float) -> str:
        from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import settle

        return settle.progress(self.client, self.node, elapsed)


def settle_printer(task: Any) -> Any:
    """The printer for this nmo_settle task, or Nothing (async, check mode, progress_interval 0,
    a timeout of 0, arguments the module will refuse at once)."""
    if task.async_val or task.check_mode:
        return Nothing()
    try:
        from ansible_collections.nmo.maintenance.plugins.modules import nmo_settle

        checked = arguments.check(nmo_settle.ARGUMENT_SPEC, task.args)
    except ImportError:  # the module is shipped: print how long it runs, at the default interval
        return SettlePrinter(str(task.args.get("node")), None, DEFAULT_INTERVAL)
    if checked.error_messages:
        return Nothing()
    params = checked.validated_parameters
    if not params["timeout"] or not 0 < params["progress_interval"] < float("inf"):
        return Nothing()
    return SettlePrinter(params["node"], params, params["progress_interval"])


def drain_printer(task: Any) -> Any:
    """The printer for this nmo_drain task, or Nothing when no line is to be printed (async, check
    mode, validate_only, progress_interval 0, or arguments the module will refuse at once)."""
    if task.async_val or task.check_mode:
        return Nothing()
    try:
        from ansible_collections.nmo.maintenance.plugins.modules import nmo_drain

        checked = arguments.check(nmo_drain.ARGUMENT_SPEC, task.args)
    except ImportError:  # the module is shipped: print how long it runs, at the default interval
        return ProgressPrinter(str(task.args.get("node")), None, DEFAULT_INTERVAL)
    if checked.error_messages:
        return Nothing()  # the module refuses its arguments at once
    params = checked.validated_parameters
    if params.get("validate_only") or not 0 < params["progress_interval"] < float("inf"):
        return Nothing()  # 0 prints none; nan, inf and negative values the module refuses
    return ProgressPrinter(params["node"], params, params["progress_interval"])
