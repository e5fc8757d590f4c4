# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nmo_rollout_report: one report for a rollout of several runs (AWX job slices), merged from
the report each of its runs wrote (plugin_utils/report_merge.py; design §18.6).

Each run of a shared rollout ends by writing this report itself, with what is there by then;
this rebuilds it on demand (``playbooks/report.yml -e rollout=<id>``), for instance after the
runs' folders were gathered from the execution nodes into one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Optional

from ansible.plugins.action import ActionBase

from ansible_collections.nmo.maintenance.plugins.module_utils.errors import InputError
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows.run import validate_id
from ansible_collections.nmo.maintenance.plugins.plugin_utils import report_merge, report_render

ARGUMENT_SPEC = {
    "rollout": {"type": "str", "required": True},
    "dir": {"type": "str", "default": ""},
}


def summary_lines(report: Optional[Dict[str, Any]]) -> str:
    """What the diff shows: the runs, then a line a node (its outcome)."""
    if report is None:
        return ""
    lines = [f"runs: {', '.join(report['run'].get('runs') or [report['run'].get('id', '')])}",
             f"outcome: {report['run'].get('outcome', '')}"]
    lines += [f"{n.get('name')}: {n.get('outcome')}" for n in report.get("nodes") or []]
    return "\n".join(lines) + "\n"


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp: Optional[str] = None, task_vars: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        result = super().run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        try:
            rollout = validate_id(args["rollout"])
        except InputError as exc:
            return {**result, "failed": True, "msg": f"rollout: {exc.message}"}
        base = report_merge.base_dir(args["dir"], rollout)
        reports, notes = report_merge.run_reports(base, rollout)
        if not reports:
            return {**result, "failed": True, "changed": False, "notes": notes,
                    "msg": (f"no run report of rollout {rollout} in {base}/*/report.json: each run of the rollout "
                            "writes its report in a folder of its own there (node_maintenance_report_dir, by default "
                            f"nmo-reports/{rollout}); give dir= the folder that holds them")}
        merged = report_merge.merge(reports, rollout, notes)
        text = report_render.to_json(merged)
        target = Path(base) / "report.json"
        before_text = target.read_text(encoding="utf-8") if target.exists() else ""
        changed = before_text != text
        if changed and not self._task.check_mode:
            report_render.write_report(Path(base), merged)
        result.update(changed=changed, rollout=rollout, path=str(Path(base) / "report.html"),
                      runs=merged["run"]["runs"], nodes=len(merged["nodes"]), outcome=merged["run"]["outcome"],
                      notes=notes)
        if self._task.diff and changed:
            try:
                before = json.loads(before_text) if before_text else None
            except ValueError:
                before = None
            result["diff"] = {"before": summary_lines(before), "after": summary_lines(merged),
                              "before_header": str(target), "after_header": str(target)}
        return result
