#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: nmo_progress
short_description: Read a node's progress record, or say in it that a phase started
version_added: "0.3.0"
description:
  - Each node's maintenance keeps one progress record in the cluster (docs/design.md §18.5),
    in standalone mode C(status.progress) of its C(NodeMaintenance), in operator mode (where
    the status is the Node Maintenance Operator's) the same fields as JSON in the annotation
    C(nmo.maintenance/progress). It says the run, the phase reached, the begin steps done, the
    leases held, and once it failed the failure and its phase. The failure path
    (M(nmo.maintenance.nmo_maintenance) O(nmo.maintenance.nmo_maintenance#module:state=failed)),
    the summary and the report read it.
  - With O(phase), records that the phase started (the begin, the drain and the end write their
    own; the role calls this for the hooks, the Ready wait, the gate and the confirmation).
    Without, only reads it.
  - A node without a C(NodeMaintenance) has no record; nothing is written for it.
  - With O(phase) and O(run_id), a record of that same run on the C(NodeMaintenance) of the
    default name, in standalone mode, gets the phase in one request without being read first
    (a JSON patch whose tests the API server checks); the result then says C(changed), and the
    diff's before leaves the phase out (it was not read). Otherwise the record is read, then
    written when it changes.
author:
  - nmo.maintenance maintainers (@nmo-maintenance)
extends_documentation_fragment:
  - nmo.maintenance.connection
attributes:
  check_mode:
    support: full
    description: Reads the record and returns it as it would be; writes nothing.
  diff_mode:
    support: full
    description: The record before and after.
options:
  node:
    description: The node.
    type: str
    required: true
  phase:
    description: The phase that starts now. Omitted, the record is only read.
    type: str
    choices: [begin, before_drain, drain, work, ready, gate, confirm, end]
  run_id:
    description: The run the phase is part of (M(nmo.maintenance.nmo_run)); the record names it.
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: Progress | The work phase starts
  nmo.maintenance.nmo_progress:
    node: node-worker-01
    phase: work
    run_id: "{{ node_maintenance_current_run }}"
  delegate_to: localhost
"""

RETURN = r"""
record:
  description:
    - The record after the call (C(run), C(phase), C(reached), C(held), C(places), C(waited), C(failure),
      C(failedPhase), C(failedRun), C(requests)); empty when the node has no C(NodeMaintenance) or it carries none.
  returned: always
  type: dict
  sample: {run: 20261203-150102-a1b2c3, phase: work, reached: [maintenance, lease, taints, cordon], held: all,
           places: [nmo-maintenance-slot-0, node-node-worker-01], waited: 0.0, failure: "", failedPhase: "",
           failedRun: "", requests: {}}
maintenance:
  description: The name of the node's C(NodeMaintenance), empty when it has none.
  returned: always
  type: str
# written by hack/shared_docs.py from plugins/doc_fragments/api_requests.py (what the adapter adds): run it after a change there
api_requests:
  description:
    - Requests this task made to the API server; a watch counts as one.
  returned: success
  type: int
  sample: 14
api_requests_by:
  description:
    - The same requests by kind, as the API server's audit log names them (C(verb resource)), for
      example V(list pods), V(create pods/eviction), V(patch nodemaintenances/status), V(update leases).
  returned: success
  type: dict
  sample: {"get nodes": 1, "list pods": 2, "create pods/eviction": 11}
# end of what hack/shared_docs.py writes
"""

from ansible_collections.nmo.maintenance.plugins.module_utils.adapter import run
from ansible_collections.nmo.maintenance.plugins.module_utils.model import record, validation
from ansible_collections.nmo.maintenance.plugins.module_utils.stores import record as records
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import run as runs


def wire(found):
    return found.wire() if found is not None else {}


def core(client, params):
    validation.node_name(params["node"])
    if params["run_id"]:
        runs.validate_id(params["run_id"])
    if params["phase"]:  # the record of this run: the phase in one request, unread (model/record.py)
        nm, after = records.phase_only(client, params["node"], params["phase"], params["run_id"])
        if nm is not None:
            before = {k: v for k, v in wire(after).items() if k != "phase"}
            return {"changed": True, "record": wire(after), "maintenance": nm["metadata"]["name"],
                    "diff": {"before": {"record": before}, "after": {"record": wire(after)}}}
    nm, before = records.read(client, params["node"])
    after = before
    if params["phase"] and nm is not None:
        nm, after = records.started(client, params["node"], params["phase"], params["run_id"], nm=nm)
    return {"changed": after != before, "record": wire(after),
            "maintenance": (nm or {}).get("metadata", {}).get("name", ""),
            "diff": {"before": {"record": wire(before)}, "after": {"record": wire(after)}}}


ARGUMENT_SPEC = {
    "node": {"type": "str", "required": True},
    "phase": {"type": "str", "choices": list(record.PHASES)},
    "run_id": {"type": "str", "default": ""},
}


def main():
    run(ARGUMENT_SPEC, core)


if __name__ == "__main__":
    main()
