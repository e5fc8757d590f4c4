#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: nmo_recover
short_description: End the maintenance of named nodes, or every maintenance of ours no live run holds
version_added: "0.2.0"
description:
  - What C(playbooks/recover.yml) does, in one call. For each node, the end of its maintenance as
    M(nmo.maintenance.nmo_maintenance) O(nmo.maintenance.nmo_maintenance#module:state=absent) does it
    (uncordon, remove the label and the maintenance taints, release our node lease and slot, delete the
    NodeMaintenance), leaving alone what was not ours (a cordon, a label or a C(medik8s.io/drain) taint
    the node had before, as the begin recorded on the node).
  - Which nodes are ended, and which are left and why, is one rule (C(module_utils/model/recovery.py)).
    A NodeMaintenance held by a live run (its run lease is being renewed) is that run's, never ended
    here. Everything else of this collection is. A node that carries the begin's marks
    (C(nmo.maintenance/maintained-by)) gets the end (uncordoned, untainted, unlabelled, but what it
    had before the begin stays, as the begin recorded it). A NodeMaintenance or leases of ours on a
    node the begin never marked (a begin that waited for a place) are released, the node left as it
    is.
  - Without O(nodes), every maintenance of this collection that no live run holds (a C(Failed)
    NodeMaintenance, a C(Pending) or C(Running) one of a run that is gone, our marks or leases
    without a NodeMaintenance, a deleted node's NodeMaintenance). It lists each node it leaves and
    why in RV(kept) and RV(said) (held by a live run; quarantined with C(nmo.maintenance/quarantined),
    which only a name lifts; a NodeMaintenance that names no run of this collection, made outside
    C(maintenance.yml)). A node cordoned or labelled by someone else is not looked at.
  - With O(nodes), those nodes whatever the phase of their NodeMaintenance (a name may be a
    NodeMaintenance's instead of its node's); a node held by a live run fails the module, naming that
    run. A quarantined node's quarantine is lifted (its label and annotation removed with the end's
    patch, the node uncordoned unless it was cordoned before the maintenance began). A node with no
    maintenance of ours (no NodeMaintenance, no mark, no lease of ours) is left as it is, and said so
    in RV(said), also when its cordon is one an administrator set before a maintenance whose end kept
    it. A name the cluster has neither as a node nor as a NodeMaintenance is reported in RV(unknown)
    and the others are still recovered; the module then fails naming it.
  - Slots. With O(slot_prefix), the node's slots of that prefix are released; without it, every
    maintenance slot the node holds (found by the collection's slot label,
    C(app.kubernetes.io/component=maintenance-slot)), whatever its prefix.
  - Waiting taints (C(nmo.maintenance/waiting:PreferNoSchedule), M(nmo.maintenance.nmo_waiting)) of runs
    that are not alive are removed from the nodes of O(nodes), or from every node without it (RV(waiting_untainted)).
  - Afterwards the nodes are read again. A lease of ours still held (RV(left)), a node whose end failed
    or a slot that could not be released fails the module, naming each.
author:
  - nmo.maintenance maintainers (@nmo-maintenance)
extends_documentation_fragment:
  - nmo.maintenance.connection
attributes:
  check_mode:
    support: full
    description: Chooses the nodes and asks every end and release in check mode; nothing is written and
      the nodes are not read again.
  diff_mode:
    support: full
    description: Per node, what its end would undo (as M(nmo.maintenance.nmo_maintenance)'s end shows it).
options:
  nodes:
    description:
      - The nodes (or NodeMaintenances) to recover; a comma-separated string is split. Blank names are
        dropped. Empty or unset, every node left behind (above).
    type: list
    elements: str
  slot_prefix:
    description: Release only the slots of this prefix. Unset, the node's slots of every prefix.
    type: str
  label_key:
    description: The label that excludes the node from remediation (removed when the begin added it).
    type: str
    default: remediation.medik8s.io/exclude-from-remediation
"""

EXAMPLES = r"""
- name: End the maintenance of two nodes left by a killed run
  nmo.maintenance.nmo_recover:
    nodes: node-worker-03,node-worker-05

- name: Show what recovering every left-behind node would undo
  nmo.maintenance.nmo_recover:
  check_mode: true
  diff: true
"""

RETURN = r"""
said:
  description: One line a node looked at, what was done (or, in check mode, would be) or why it was left,
    as C(node-x) followed by C(no maintenance of nmo.maintenance, left as it is).
  returned: always
  type: list
  elements: str
kept:
  description: The nodes left, each with C(node) and C(why) (the line of RV(said)).
  returned: always
  type: list
  elements: dict
recovered:
  description: The nodes whose maintenance was ended, released or lifted from quarantine (or, in check
    mode, would be).
  returned: always
  type: list
  elements: str
unknown:
  description: The names of O(nodes) the cluster has neither as a node nor as a NodeMaintenance.
  returned: always
  type: list
  elements: str
ended:
  description: Per node, the result of its end (as M(nmo.maintenance.nmo_maintenance) returns it).
  returned: always
  type: dict
failed_nodes:
  description: The nodes whose end failed, each with C(node) and C(msg).
  returned: always
  type: list
  elements: dict
waiting_untainted:
  description: The nodes a dead run's waiting taint was removed from.
  returned: always
  type: list
  elements: str
released_slots:
  description: The slots of another prefix released after the end, each with C(node), C(name), C(prefix), C(changed).
  returned: always
  type: list
  elements: dict
failed_slots:
  description: The slots that could not be released, each with C(node), C(name), C(prefix), C(msg).
  returned: always
  type: list
  elements: dict
left:
  description: Leases of ours still held afterwards, each as C(<node>) C(lease <name> (holder <holder>)).
  returned: always
  type: list
  elements: str
others:
  description: Leases of the nodes held by someone else, left in place.
  returned: always
  type: list
  elements: str
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
from ansible_collections.nmo.maintenance.plugins.module_utils.model.marks import EXCLUDE_FROM_REMEDIATION
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows.recover import RecoverOptions, recover


def core(client, params):
    return recover(client, RecoverOptions.from_params(params))


ARGUMENT_SPEC = {
    "nodes": {"type": "list", "elements": "str"},
    "slot_prefix": {"type": "str"},
    "label_key": {"type": "str", "default": EXCLUDE_FROM_REMEDIATION, "no_log": False}}


def main():
    run(ARGUMENT_SPEC, core)


if __name__ == "__main__":
    main()
