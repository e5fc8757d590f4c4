#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: nmo_taint
short_description: Add or remove a node's maintenance taints, keeping everyone else's
version_added: "0.1.0"
description:
  - Puts the two maintenance taints C(node.kubernetes.io/unschedulable:NoSchedule) and
    C(medik8s.io/drain:NoSchedule) (or the taints given) on a node, or takes them off.
  - Taints match by key and effect. Adding puts them first and keeps every other taint;
    removing drops exactly them. When nothing changes, no request is made.
  - The write is one JSON Patch that first tests that the taints are still as read, so a
    concurrent writer is never overwritten; the module then reads again and retries, up to
    5 times, before it fails.
  - Only a failed C(test) operation means someone else wrote the taints; any other refusal of
    the patch (C(422 Invalid)) fails at once with the API server's own message.
  - C(node.kubernetes.io/unschedulable:NoSchedule) follows the cordon. Kubernetes'
    node-lifecycle controller keeps that taint equal to C(spec.unschedulable), putting it back
    on a cordoned node and taking it off a schedulable one. So this module adds it only to a
    cordoned node and removes it only from a schedulable one; otherwise it leaves it, with a
    warning, instead of writing what the controller undoes (a second run would report
    C(changed) again). M(nmo.maintenance.nmo_cordon) writes it with the cordon. Called in
    any order, the two modules therefore end with the node as asked, and a second run of
    either changes nothing.
author:
  - nmo.maintenance maintainers (@nmo-maintenance)
extends_documentation_fragment:
  - nmo.maintenance.connection
attributes:
  check_mode:
    support: full
    description: Reads the node and reports the taints it would write; writes nothing.
  diff_mode:
    support: full
    description: Shows the taint list before and after.
options:
  node:
    description: Name of the node.
    type: str
    required: true
  state:
    description:
      - V(present) adds the taints, V(absent) removes them.
    type: str
    choices: [present, absent]
    default: present
  taints:
    description:
      - The taints to add or remove. Each needs C(key) (a qualified name, as a label key) and
        C(effect); C(value) is optional (a label value).
      - Defaults to the two maintenance taints.
    type: list
    elements: dict
"""

EXAMPLES = r"""
- name: Taint a node for maintenance
  nmo.maintenance.nmo_taint:
    node: node-worker-01
  delegate_to: localhost

- name: Remove the maintenance taints (user taints stay)
  nmo.maintenance.nmo_taint:
    node: node-worker-01
    state: absent
  delegate_to: localhost
"""

RETURN = r"""
taints_before:
  description: The node's taints as read.
  returned: always
  type: list
  elements: dict
taints_after:
  description: The node's taints after the change (or as they would be, in check mode).
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
from ansible_collections.nmo.maintenance.plugins.module_utils.model.node_state import Wanted
from ansible_collections.nmo.maintenance.plugins.module_utils.model.taints import MAINTENANCE_TAINTS
from ansible_collections.nmo.maintenance.plugins.module_utils.stores import nodes


def core(client, params):
    validation.node_name(params["node"])
    wanted = params["taints"] if params["taints"] is not None else MAINTENANCE_TAINTS
    validation.taints(wanted)
    change = Wanted(add=list(wanted)) if params["state"] == "present" else Wanted(remove=list(wanted))
    done = nodes.apply(client, params["node"], change)
    before, after = done.before["taints"], done.after["taints"]
    return {"changed": done.changed, "taints_before": before, "taints_after": after, "warnings": done.held,
            "diff": {"before": {"taints": before}, "after": {"taints": after}}}


ARGUMENT_SPEC = {
    "node": {"type": "str", "required": True},
    "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
    "taints": {"type": "list", "elements": "dict"}}


def main():
    run(ARGUMENT_SPEC, core)


if __name__ == "__main__":
    main()
