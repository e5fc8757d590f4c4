"""The filter nmo.maintenance.report_paths: where a run's report is written (and its rollout's)."""

from __future__ import annotations

from typing import Any, Dict

from ansible_collections.nmo.maintenance.plugins.plugin_utils.report_merge import report_dirs

DOCUMENTATION = r"""
name: report_paths
short_description: Where a maintenance run writes its report, and its rollout's
version_added: 0.2.0
description:
  - The run report's folder and files as the report callback C(nmo.maintenance.nmo_report) writes them, from
    C(node_maintenance_report_dir) as given (relative to the playbook's working directory unless absolute).
  - A run alone writes to the folder given, else C(nmo-reports/<run id>). A run of a rollout of several
    (AWX job slices, C(node_maintenance_rollout)) writes to C(<folder>/<run id>), where the folder is the
    one given, else C(nmo-reports/<rollout>), and the rollout's report, merged from every run's, to the
    folder itself.
options:
  _input:
    description: C(node_maintenance_report_dir) (empty for the default).
    type: str
    required: true
  run:
    description: The run's id.
    type: str
    required: true
  rollout:
    description: The rollout the run is part of (empty or the run's id when alone).
    type: str
    default: ""
author:
  - nmo.maintenance contributors
"""

EXAMPLES = r"""
- name: Where the report goes
  ansible.builtin.debug:
    msg: "{{ node_maintenance_report_dir | nmo.maintenance.report_paths(run_id, rollout_id) }}"
"""

RETURN = r"""
_value:
  description: C(dir), C(html), C(json), C(junit) and C(run); C(rollout_dir) and C(rollout_html) for a run of a
    rollout of several.
  type: dict
"""


def report_paths(given: Any, run: str, rollout: str = "") -> Dict[str, str]:
    directory, base = report_dirs(str(given or ""), run, rollout or "")
    paths = {"dir": str(directory), "html": str(directory / "report.html"), "json": str(directory / "report.json"),
             "junit": str(directory / "report.xml"), "run": run}
    if base is not None:
        paths.update(rollout_dir=str(base), rollout_html=str(base / "report.html"))
    return paths


class FilterModule:
    """The collection's filter of the run report's paths."""

    def filters(self):
        return {"report_paths": report_paths}
