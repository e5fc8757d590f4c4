#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: nmo_cordon
short_description: Cordon or uncordon a node and mark it excluded from remediation
version_added: "0.1.0"
description:
  - Sets C(spec.unschedulable) and the label that tells Node Health Check to leave the node
    alone (C(remediation.medik8s.io/exclude-from-remediation=true)), in one request, and
    only what differs. Nothing is written when the node is already as asked.
  - Cordon and the C(node.kubernetes.io/unschedulable:NoSchedule) taint are one thing;
    Kubernetes' node-lifecycle controller keeps that taint equal to C(spec.unschedulable).
    This module writes the taint in the same request as the cordon (added with it, removed
    with the uncordon), so nothing sees one without the other and nothing waits on the
    controller; every other taint is left to M(nmo.maintenance.nmo_taint). The two modules can
    be called in any order.
  - The request is a JSON Patch that tests what it changes as read (the taints, a label or
    annotation it removes), so a concurrent writer is never overwritten; the module reads
    again and retries, up to 5 times.
  - With O(maintenance), records a C(Cordon) event on that NodeMaintenance; uncordoning
    records C(UncordonNode) on the Node.
author:
  - nmo.maintenance maintainers (@nmo-maintenance)
extends_documentation_fragment:
  - nmo.maintenance.connection
attributes:
  check_mode:
    support: full
    description: Reads the node and reports what it would change; writes nothing.
  diff_mode:
    support: full
    description: Shows cordon, label and taints before and after.
options:
  node:
    description: Name of the node.
    type: str
    required: true
  state:
    description:
      - V(cordoned) makes the node unschedulable, V(uncordoned) schedulable again.
    type: str
    choices: [cordoned, uncordoned]
    default: cordoned
  label:
    description:
      - Whether to set the label with V(cordoned) and remove it with V(uncordoned).
    type: bool
    default: true
  label_key:
    description:
      - The label that excludes the node from remediation. Node Health Check reads the default.
    type: str
    default: remediation.medik8s.io/exclude-from-remediation
  maintenance:
    description:
      - Name of the NodeMaintenance to record the C(Cordon) event on.
    type: str
  annotations:
    description:
      - Node annotations to set in the same request (a null value removes one); only those
        that differ are written. The role uses it to mark a node done for a campaign.
    type: dict
"""

EXAMPLES = r"""
- name: Cordon a node and exclude it from remediation
  nmo.maintenance.nmo_cordon:
    node: node-worker-01
  delegate_to: localhost

- name: Back in service
  nmo.maintenance.nmo_cordon:
    node: node-worker-01
    state: uncordoned
  delegate_to: localhost
"""

RETURN = r"""
before:
  description: C(unschedulable) and C(label) (whether the label is set) as read.
  returned: always
  type: dict
after:
  description: C(unschedulable) and C(label) after the change (or as they would be).
  returned: always
  type: dict
taints_before:
  description: The node's taints as read.
  returned: always
  type: list
  elements: dict
taints_after:
  description: >-
    The node's taints after the change: C(node.kubernetes.io/unschedulable:NoSchedule) with the
    cordon, without it after the uncordon.
  returned: always
  type: list
  elements: dict
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
from ansible_collections.nmo.maintenance.plugins.module_utils.model import validation
from ansible_collections.nmo.maintenance.plugins.module_utils.model.marks import EXCLUDE_FROM_REMEDIATION
from ansible_collections.nmo.maintenance.plugins.module_utils.stores import events
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import lifecycle


def core(client, params):
    validation.node_name(params["node"])
    validation.qualified_name(params["label_key"], "label_key")
    if params["maintenance"] is not None:
        validation.dns_subdomain(params["maintenance"], "maintenance", "NodeMaintenance name")
    validation.annotations(params["annotations"])
    done = lifecycle.cordon(client, events.EventRecorder(client), params["node"],
                            params["state"] == "cordoned", params["label_key"], params["label"],
                            params["maintenance"], params["annotations"])
    return {"changed": done["changed"], "before": done["before"], "after": done["after"],
            "taints_before": done["taints_before"], "taints_after": done["taints_after"],
            "diff": {"before": {**done["before"], "taints": done["taints_before"]},
                     "after": {**done["after"], "taints": done["taints_after"]}}}


ARGUMENT_SPEC = {
    "node": {"type": "str", "required": True},
    "state": {"type": "str", "choices": ["cordoned", "uncordoned"], "default": "cordoned"},
    "label": {"type": "bool", "default": True},
    "label_key": {"type": "str", "default": EXCLUDE_FROM_REMEDIATION, "no_log": False},
    "maintenance": {"type": "str"},
    "annotations": {"type": "dict"}}


def main():
    run(ARGUMENT_SPEC, core)


if __name__ == "__main__":
    main()
