#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: nmo_waiting
short_description: The PreferNoSchedule taint of the nodes a run has still to maintain
version_added: "0.3.0"
description:
  - With O(state=present), puts C(nmo.maintenance/waiting=<run_id>:PreferNoSchedule) on each of
    O(nodes), so that the scheduler prefers other nodes for the pods the run drains from the
    first ones (kured's C(--prefer-no-schedule-taint)). The same call removes the waiting taint
    of any run that is not alive (its run lease lapsed or gone, as a killed run's is) from
    every other node.
  - With O(state=absent), removes O(run_id)'s waiting taint from every node (or from O(nodes)
    only); with O(dead_too), also that of every run that is not alive.
  - One node list (paginated) and one lease list, then one guarded patch per node that
    changes; other taints are kept as they are. Each node loses the taint anyway when its
    maintenance ends (M(nmo.maintenance.nmo_maintenance) removes it in the end's patch).
author:
  - nmo.maintenance maintainers (@nmo-maintenance)
extends_documentation_fragment:
  - nmo.maintenance.connection
attributes:
  check_mode:
    support: full
    description: Reads the nodes and reports what it would change; writes nothing.
  diff_mode:
    support: full
    description: The nodes tainted and untainted.
options:
  run_id:
    description: The run whose taint it is (M(nmo.maintenance.nmo_run)); the taint's value.
    type: str
    required: true
  nodes:
    description:
      - With O(state=present), the nodes to taint. With O(state=absent), the nodes to untaint
        (all when not given).
    type: list
    elements: str
  state:
    description: V(present) taints O(nodes), V(absent) untaints.
    type: str
    choices: [present, absent]
    default: present
  dead_too:
    description: With O(state=absent), also remove the waiting taints of runs that are not alive.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: The nodes still to be maintained repel pods
  nmo.maintenance.nmo_waiting:
    run_id: "{{ run.run }}"
    nodes: [node-worker-02, node-worker-03]
  delegate_to: localhost
  run_once: true

- name: The run is over, none of its waiting taints is left
  nmo.maintenance.nmo_waiting:
    run_id: "{{ run.run }}"
    state: absent
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
tainted:
  description: The nodes the taint was put on (would be, in check mode).
  returned: always
  type: list
  elements: str
untainted:
  description: The nodes a waiting taint was removed from (this run's, or a dead run's).
  returned: always
  type: list
  elements: str
taint:
  description: The taint, C(key), C(value) and C(effect).
  returned: always
  type: dict
  sample: {key: nmo.maintenance/waiting, value: 20261201-050102-a1b2c3, effect: PreferNoSchedule}
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
from ansible_collections.nmo.maintenance.plugins.module_utils.errors import InputError
from ansible_collections.nmo.maintenance.plugins.module_utils.model import validation
from ansible_collections.nmo.maintenance.plugins.module_utils.model.taints import waiting_taint
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import run as runs
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import waiting


def core(client, params):
    runs.validate_id(params["run_id"])
    names = params["nodes"]
    for name in names or []:
        validation.node_name(name)
    if params["state"] == "present":
        if names is None:
            raise InputError("nodes: give the nodes to taint (state=present)")
        done = waiting.mark(client, params["run_id"], names)
    else:
        done = waiting.clear(client, params["run_id"], names, params["dead_too"])
    return {"changed": bool(done["tainted"] or done["untainted"]), **done, "taint": waiting_taint(params["run_id"]),
            "diff": {"before": {"tainted": sorted(done["untainted"])}, "after": {"tainted": sorted(done["tainted"])}}}


ARGUMENT_SPEC = {
    "run_id": {"type": "str", "required": True},
    "nodes": {"type": "list", "elements": "str"},
    "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
    "dead_too": {"type": "bool", "default": False},
}


def main():
    run(ARGUMENT_SPEC, core)


if __name__ == "__main__":
    main()
