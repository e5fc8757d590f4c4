#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

# The work is done by the action plugin of the same name (plugins/action/nmo_rollout_report.py),
# on the controller, where the run reports are; this file documents it.

from __future__ import annotations

DOCUMENTATION = r"""
module: nmo_rollout_report
short_description: Write one report for a rollout of several runs (AWX job slices) from its runs' reports
version_added: "0.2.0"
description:
  - The runs of a rollout of several (C(node_maintenance_rollout); the slice jobs of an AWX sliced job
    template) each write the report of their own share in a folder of their own, C(<dir>/<run id>). This
    merges every such C(report.json) of the rollout into one report (C(report.json), C(report.xml),
    C(report.html)) in O(dir) itself, with every node once (where two runs reported one, the one that took it
    furthest), the runs' span, the worst outcome, the requests added up.
  - Each run of the rollout writes this report itself as it ends, with the reports there by then (the last
    to end writes it whole); this rebuilds it, for instance once the runs' folders were gathered into one.
  - It never talks to the cluster.
author:
  - nmo.maintenance maintainers (@nmo-maintenance)
attributes:
  check_mode:
    support: full
    description: Merges and says whether the report would change; writes nothing.
  diff_mode:
    support: full
    description: The runs, the outcome and each node's outcome, before and after.
  action:
    support: full
    description: Runs on the controller, as an action plugin.
options:
  rollout:
    description: The rollout's id (C(awx-wf-<workflow job id>) for AWX job slices).
    type: str
    required: true
  dir:
    description:
      - The folder holding the runs' folders (C(node_maintenance_report_dir) as the runs were given it),
        relative to the working directory unless absolute. Empty, C(nmo-reports/<rollout>).
    type: str
    default: ""
notes:
  - Runs on the controller whatever the host's connection.
"""

EXAMPLES = r"""
- name: One report for AWX workflow job 1207's slices
  nmo.maintenance.nmo_rollout_report:
    rollout: awx-wf-1207
    dir: /var/lib/awx/projects/reports
"""

RETURN = r"""
path:
  description: The rollout report's page (C(report.json) and C(report.xml) beside it).
  returned: success
  type: str
rollout:
  description: The rollout.
  returned: success
  type: str
runs:
  description: The runs whose reports were merged, the earliest start first.
  returned: success
  type: list
  elements: str
nodes:
  description: How many nodes the report holds (each once).
  returned: success
  type: int
outcome:
  description: The rollout's outcome, V(succeeded), V(partial) or V(failed).
  returned: success
  type: str
notes:
  description: A run report that could not be read, one line each.
  returned: always
  type: list
  elements: str
"""
