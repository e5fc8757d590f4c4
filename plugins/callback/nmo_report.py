# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The run report of playbooks/maintenance.yml (docs/report.md)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: nmo_report
type: aggregate
short_description: write the run report (JSON, JUnit, HTML) of a maintenance run
description:
  - Collects the result and timing of every task of a run of C(playbooks/maintenance.yml) (or of the
    C(nmo.maintenance.node_maintenance) role) and, when the playbook ends, whatever ended it (a failed
    node, a partial run), writes C(report.json), C(report.xml) (JUnit) and C(report.html) to
    C(node_maintenance_report_dir) (by default C(nmo-reports/<run id>) in the working directory; V(none) for no report).
  - It needs no configuration for C(playbooks/maintenance.yml), whose C(callback_plugins/) folder enables it;
    elsewhere enable it as C(nmo.maintenance.nmo_report) in C(callbacks_enabled).
  - A playbook without a maintenance run (no C(nmo.maintenance.nmo_run) task) gets no report.
  - A task's phase is the C(node_maintenance_phase) variable that the role's include of its phase file
    gives it (a hook's and a gate's own tasks inherit it), never the task's name.
notes:
  - The report reads the cluster once at the end (a few list requests with the run's connection) for where the
    evicted pods' replacements landed and for the events of NodeMaintenances an earlier run began.
"""

import getpass
import socket
import time

from ansible.plugins.callback import CallbackBase
from ansible.utils.display import Display

from ansible_collections.nmo.maintenance.plugins.plugin_utils import report_merge, report_model, report_reads, report_render

display = Display()
CONNECTION_ARGS = ("kubeconfig", "context", "host", "api_key", "validate_certs", "ca_cert", "client_cert",
                   "client_key", "proxy")


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "nmo.maintenance.nmo_report"
    CALLBACK_NEEDS_ENABLED = False  # loaded from playbooks/callback_plugins/ without configuration
    written = set()  # run ids written by this process: the plugin may be loaded twice (adjacent and enabled)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.starts = {}
        self.connection = {}
        self.awx_job_id = None
        self.collector = report_model.Collector(time.time())

    def v2_playbook_on_start(self, playbook):
        self.collector.started = time.time()
        self.collector.playbook = str(getattr(playbook, "_file_name", "") or "")

    def v2_runner_on_start(self, host, task):
        self.starts[(host.get_name(), task._uuid)] = time.time()

    def _record(self, result, status):
        try:
            host, task = result._host.get_name(), result._task
            now = time.time()
            res = dict(result._result) if isinstance(result._result, dict) else {}
            action = str(task.action or "")
            if action.startswith("nmo.maintenance."):
                args = (res.get("invocation") or {}).get("module_args") or {}
                if not self.connection and any(args.get(k) for k in CONNECTION_ARGS):
                    self.connection = {k: args.get(k) for k in CONNECTION_ARGS}
                if action == report_model.RUN_TASK and args.get("awx_job_id"):
                    self.awx_job_id = str(args["awx_job_id"])
            start = self.starts.pop((host, task._uuid), now)
            # the role's phase: the node_maintenance_phase its include gave the task, not its name
            self.collector.add(report_model.TaskRecord(host, task.get_name(), action, start, now, status, res,
                                                       report_model.phase_of(task), getattr(task, "run_once", None) is True))
        except Exception as exc:  # a report must never fail the run
            display.warning(f"nmo_report: a task result was not recorded: {type(exc).__name__}: {exc}")

    def v2_runner_on_ok(self, result):
        self._record(result, "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._record(result, "ignored" if ignore_errors else "failed")

    def v2_runner_on_skipped(self, result):
        self._record(result, "skipped")

    def v2_runner_on_unreachable(self, result):
        self._record(result, "unreachable")

    def v2_playbook_on_stats(self, stats):
        collector = self.collector
        run_id = collector.run.get("run") or collector.settings.get("run")
        if not run_id or run_id in CallbackModule.written:
            return
        CallbackModule.written.add(run_id)
        where = str(collector.settings.get("dir") or "")
        if where.lower() == "none":
            return
        try:
            collector.who = {"user": getpass.getuser(), "host": socket.gethostname(), "awx_job_id": self.awx_job_id}
            cluster = report_reads.read(self.connection, report_model.moved_pods(collector),
                                        report_model.adopted_maintenances(collector))
            report = collector.build(time.time(), cluster)
            rollout = report["run"].get("rollout") or run_id
            # a run of a rollout of several (AWX job slices): its report beside its siblings', the
            # rollout's from all of them one folder up (plugin_utils/report_merge.py)
            directory, base = report_merge.report_dirs(where, run_id, rollout)
            page = report_render.write_report(directory, report)
            display.display(f"nmo.maintenance run report: {page.resolve()} "
                            f"(and report.json, report.xml; run {report['run']['outcome']})")
            if base is not None:
                merged, _notes = report_merge.write_rollout_report(base, rollout)
                if merged is not None:
                    display.display(f"nmo.maintenance rollout report: {(base / 'report.html').resolve()} (rollout "
                                    f"{rollout}, {len(merged['run']['runs'])} run(s) so far, "
                                    f"{len(merged['nodes'])} node(s); {merged['run']['outcome']})")
        except Exception as exc:  # a report must never fail the run
            display.warning(f"nmo_report: the run report was not written: {type(exc).__name__}: {exc}")
