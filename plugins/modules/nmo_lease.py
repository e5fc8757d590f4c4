#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: nmo_lease
short_description: Take or give back the right to disrupt a node (etcd guard, maintenance slot, medik8s lease)
version_added: "0.1.0"
description:
  - Answers one question for a maintenance, and records the answer where every other actor
    (another playbook run, an AWX job, Node Health Check, Self Node Remediation) sees it.
  - O(state=acquired), in order. For a control-plane node, the etcd quorum guard must allow
    the disruption. Then a maintenance slot, a Lease C(<slot_prefix>-<i>) in C(medik8s-leases)
    whose holder is the node; at most O(concurrency) slots are held at once across every run
    against the cluster (slots held by a run with a larger O(concurrency) count too). Then
    the node lease C(medik8s-leases/node-<node>), holder C(nmo.maintenance), in the wire
    format of medik8s, so Node Health Check leaves the node alone. It is not NMO's holder name
    C(node-maintenance), since a running Node Maintenance Operator would take such a lease for its own.
  - A lease held by someone else and still valid blocks; an expired one is taken over
    (C(leaseTransitions) + 1); our own is renewed. Every write is guarded by the
    C(resourceVersion) read, and a conflict means reading again.
  - An attempt is all or nothing. A rerun for the same node (after a crash) resumes with its
    own slot and lease.
  - While blocked, the node's NodeMaintenance (when there is one) stays C(Pending), with
    C(lastError) and a Warning event C(BlockedByNodeHealthCheck) naming the holder, or
    C(EtcdQuorumNotMaintained) with C(etcd quorum would not be kept while node X is
    in maintenance). When acquired, a C(LeaseAcquired) event.
  - O(state=released) deletes the node lease and the node's slots and budget places, each
    only when held by us; a lease held by anyone else is left in place and reported.
  - Topology budgets (O(budgets)) and the control plane's own limit
    (O(control_plane_concurrency)) take, after the slot, a place in every budget domain the
    node falls under (docs/design.md §5.6).
  - etcd guard, kubeadm flavour. Members are the etcd pods (O(etcd_pod_selector) in
    O(etcd_pod_namespace)); a member is healthy when its pod is Ready and its node is not
    under maintenance (cordoned, tainted C(medik8s.io/drain), named by another valid node
    lease, or holding an earlier maintenance slot). Allowed when the healthy members on
    other nodes are at least members // 2 + 1. With 1 or 2 members that can never be, so
    the module refuses at once.
  - etcd guard, OpenShift flavour. The single PodDisruptionBudget in O(etcd_guard_namespace)
    (C(etcd-guard-pdb), formerly C(etcd-quorum-guard)) must allow a disruption, or this
    node's guard pod must already be not Ready. No PDB, or several, means not allowed.
  - No etcd found (external etcd) means allowed, with a warning.
author:
  - nmo.maintenance maintainers (@nmo-maintenance)
extends_documentation_fragment:
  - nmo.maintenance.connection
  - nmo.maintenance.lease
attributes:
  check_mode:
    support: full
    description:
      - Reads the leases and the guard and reports what it would take or delete; writes nothing.
      - Where a real run would wait, it returns RV(would_wait) instead.
  diff_mode:
    support: full
    description: Shows the leases (slot and node lease) before and after.
options:
  node:
    description: Name of the node.
    type: str
    required: true
  state:
    description:
      - V(acquired) takes the guard, a slot and the node lease; V(released) gives back the
        node lease and the node's slots.
    type: str
    choices: [acquired, released]
    default: acquired
  maintenance:
    description:
      - Name of the node's NodeMaintenance, whose status and events tell the story while waiting.
      - Default is the NodeMaintenance whose C(spec.nodeName) is O(node), if any; without one,
        events go to the Node.
    type: str

notes:
  - Leases live in C(medik8s-leases), created when missing, as medik8s does.
  - Runs that use different O(concurrency) values each check their own limit against every
    slot held at the time they acquire.
"""

EXAMPLES = r"""
- name: May node-worker-01 be disrupted? Wait up to 30 minutes for our turn
  nmo.maintenance.nmo_lease:
    node: node-worker-01
    wait: true
    timeout: 1800
  delegate_to: localhost

- name: Two nodes at a time, across every run
  nmo.maintenance.nmo_lease:
    node: "{{ inventory_hostname }}"
    concurrency: 2
    wait: true
  delegate_to: localhost

- name: One node a zone, and at most a quarter of the GPU pool, across every run
  nmo.maintenance.nmo_lease:
    node: "{{ inventory_hostname }}"
    concurrency: 4
    budgets:
      - topology_key: topology.kubernetes.io/zone
        max: 1
      - selector: pool=gpu
        max: 25%
    wait: true
  delegate_to: localhost

- name: Give the leases back
  nmo.maintenance.nmo_lease:
    node: node-worker-01
    state: released
  delegate_to: localhost
"""

RETURN = r"""
acquired:
  description: The slot and the node lease held, each with its action (created, renewed, taken_over, held) and expiry.
  returned: state=acquired
  type: list
  elements: dict
released:
  description: The leases deleted.
  returned: state=released
  type: list
  elements: dict
not_released:
  description: Leases left in place because someone else holds them (kind, lease, holder, expires).
  returned: state=released
  type: list
  elements: dict
holders:
  description:
    - Every holder seen blocking this node (kind slot, budget, node or etcd; lease; holder; expires).
    - For a budget also C(budget) (the budget and its domain) and C(run), or C(disrupted) for a node
      of the domain counted as already down.
  returned: always
  type: list
  elements: dict
waited:
  description: Seconds spent before acquiring.
  returned: state=acquired
  type: float
expires:
  description: When the node lease lapses unless renewed (renewTime + leaseDurationSeconds).
  returned: when acquired
  type: str
slot:
  description: Name of the maintenance slot held.
  returned: when acquired
  type: str
places:
  description:
    - Names of the topology-budget places held, one a budget domain the node falls under
      (O(budgets), and C(<slot_prefix>-control-plane-<i>) for a control-plane node); empty for a
      node under no budget.
  returned: when acquired
  type: list
  elements: str
lease:
  description: The node lease (name, namespace, spec fields, expires).
  returned: when acquired
  type: dict
etcd:
  description:
    - The etcd guard's verdict for a control-plane node (allowed, flavour, reason, members,
      healthy, quorum); null for other nodes.
  returned: state=acquired
  type: dict
would_wait:
  description: In check mode, true when the run would have to wait; C(blocked) says why.
  returned: check mode with O(wait=true), when blocked
  type: bool
maintenance:
  description: Name of the NodeMaintenance told about waiting, if any.
  returned: state=acquired
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

from ansible_collections.nmo.maintenance.plugins.module_utils import specs
from ansible_collections.nmo.maintenance.plugins.module_utils.adapter import run
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import disruption


def core(client, params):
    req = disruption.Request.from_params(params, params["maintenance"])
    if params["state"] == "released":
        return disruption.release(client, req)
    return disruption.acquire(client, req)


ARGUMENT_SPEC = {
    "node": {"type": "str", "required": True},
    "state": {"type": "str", "choices": ["acquired", "released"], "default": "acquired"},
    "maintenance": {"type": "str"},
    **specs.LEASE}


def main():
    run(ARGUMENT_SPEC, core)


if __name__ == "__main__":
    main()
