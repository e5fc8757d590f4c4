#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: nmo_preflight
short_description: Find what would block the maintenance of nodes, before any node is touched
version_added: "0.1.0"
description:
  - Read-only. For each node of O(nodes), tells whether its maintenance would go through, and why not.
    Writes nothing, not even an event.
  - The pods of each node are sorted exactly as M(nmo.maintenance.nmo_drain) sorts them, with the same
    options, as to evict, to delete, already terminating, skipped (with why), or refused because a drain
    option is off (naming the option that would allow them).
  - Every pod to evict gets a server-side dry-run eviction (C(dryRun=All) on the C(pods/eviction)
    subresource, run in parallel), answered allowed now, or refused with the server's message and the
    PodDisruptionBudget named.
  - A PodDisruptionBudget that refuses and can never allow an eviction without outside help
    (C(minAvailable) as large as the number of pods it selects, as for a VM alone behind
    C(minAvailable 1); C(maxUnavailable 0); a percentage that rounds to no disruption; a budget the
    disruption controller cannot compute) is a blocker. One that only allows no disruption right now is
    a warning, since the drain waits for it.
  - Capacity, judged without the scheduler. The nodes are taken O(concurrency) at a time, in the order
    given (the role's batches). While a batch is out, the replacements of its evicted pods (pods with a
    controller other than a DaemonSet) are placed on the other nodes that stay schedulable, that is not
    cordoned, Ready, matching the pod's node selector and required node affinity (C(matchExpressions) with C(In),
    C(NotIn), C(Exists), C(DoesNotExist), C(Gt), C(Lt); C(matchFields) on C(metadata.name)), with every
    C(NoSchedule) and C(NoExecute) taint tolerated, and with room for the pod's CPU, memory and pod-count
    requests next to what is already requested there. Pods that fit nowhere would stay Pending, a blocker.
    Pod affinity, pod anti-affinity and topology spread constraints are not judged (a warning names the
    pods that have them). Every batch is judged against the cluster as it is now.
  - What is read scales with the nodes judged, not with the cluster. One judged node, or up to 20 that
    are a small share of the cluster, are read one by one; every node is listed (paginated, each kept
    as its scheduling fields only) when more are judged or when capacity must be judged.
    PodDisruptionBudgets are listed once. The pods of the judged
    nodes are one C(fieldSelector=spec.nodeName) list per node, or one paginated list of every pod when
    the judged nodes are a large share of the cluster. The pods a budget selects are counted with one
    C(labelSelector) list, only for the budgets guarding a pod to evict.
  - For capacity, the pods of candidate nodes (those whose labels, taints, cordon and readiness could
    take a replacement) are read only when a replacement needs a home, in growing chunks, and at most
    the share of nodes the scheduler itself scores by default (every node below 100 nodes, 10% of
    5,000). A node whose pods were not read is never counted as room, so the answer errs towards
    V(no-go) ("not judged (their pods were not read)"), never towards V(go).
  - Drain rules (O(drain.rules)) are judged per node as M(nmo.maintenance.nmo_drain) applies them, the same
    pod labels included. A pod annotated do-not-disrupt makes its node V(no-go); a pod waited for until it
    completes is a warning; a drain label that cannot be read makes the node V(no-go), naming the pod.
  - A node is V(no-go) when it has a blocker, V(warn) when it has only warnings, V(go) otherwise.
  - With O(drain.kubevirt=migrate), a KubeVirt virt-launcher pod whose eviction a PodDisruptionBudget refuses is
    judged as M(nmo.maintenance.nmo_drain) will treat it. Its VirtualMachineInstance (one list of them, only
    when such a pod exists) is C(LiveMigratable), so the drain migrates it, and the node is V(go (migrate))
    when nothing else stops it; or it is not, and the node is V(no-go) with the VMI's reason and message.
author:
  - nmo.maintenance maintainers (@nmo-maintenance)
extends_documentation_fragment:
  - nmo.maintenance.connection
  - nmo.maintenance.drain
attributes:
  check_mode:
    support: full
    description: The module never writes; it runs the same in check mode (dry-run evictions included).
  diff_mode:
    support: none
    description: Nothing changes, so there is no diff.
options:
  nodes:
    description:
      - The nodes about to be maintained, usually every host of the play, in the order the maintenance
        takes them.
    type: list
    elements: str
    required: true
  concurrency:
    description: How many nodes are out at once (the role's C(node_maintenance_concurrency)).
    type: int
    default: 1
  on_blocked:
    description:
      - The role's C(node_maintenance_on_blocked). With V(skip) or V(quarantine), a V(no-go) node whose only
        blockers are its drain's (RV(drain_blocked)) is left to that policy - RV(go) stays true as long as
        they are no more than O(max_blocked) and no node has another blocker (docs/design.md §18.4).
    type: str
    choices: [stop, skip, quarantine]
    default: stop
  max_blocked:
    description: With O(on_blocked) V(skip) or V(quarantine), how many such nodes RV(go) lets through.
    type: int
    default: 1
  maintenance_names:
    description:
      - The NodeMaintenance name of each node that does not take the default C(maintenance-<node>)
        (the role's C(node_maintenance_name)), keyed by node. The names the begin would make are judged
        as the begin judges them; an empty value means the default name.
    type: dict
  etcd_guard:
    description:
      - The etcd quorum guard that the begin applies to control-plane nodes (as in M(nmo.maintenance.nmo_maintenance)).
        A node that can never pass it (the only etcd member) is V(no-go); one that must wait for another
        member, V(warn). V(none) skips it.
    type: str
    choices: [auto, kubeadm, openshift, none]
    default: auto
  etcd_pod_selector:
    description: Label selector of the etcd pods (kubeadm flavour).
    type: str
    default: component=etcd
  etcd_pod_namespace:
    description: Namespace of the etcd pods (kubeadm flavour).
    type: str
    default: kube-system
  etcd_guard_namespace:
    description: Namespace of the OpenShift etcd guard PodDisruptionBudget.
    type: str
    default: openshift-etcd
"""

EXAMPLES = r"""
- name: What would block the maintenance of the play's nodes
  nmo.maintenance.nmo_preflight:
    nodes: "{{ ansible_play_hosts_all }}"
  delegate_to: localhost
  run_once: true
  register: preflight

- name: Show one line per node
  ansible.builtin.debug:
    msg: "{{ preflight.table }}"
  run_once: true

- name: Stop when a node is blocked
  ansible.builtin.fail:
    msg: "{{ preflight.summary }}"
  when: not preflight.go
  run_once: true
"""

RETURN = r"""
go:
  description:
    - True when no node is V(no-go), or, with O(on_blocked) V(skip) or V(quarantine), when every V(no-go)
      node is in RV(drain_blocked) and they are no more than O(max_blocked).
  returned: always
  type: bool
summary:
  description: One line for all the nodes, naming the blocked ones.
  returned: always
  type: str
blocked:
  description: Names of the V(no-go) nodes.
  returned: always
  type: list
  elements: str
drain_blocked:
  description:
    - The V(no-go) nodes whose only blockers are their drain's (pods the options refuse, a budget that never
      allows, do-not-disrupt, pods that come back); the others have a blocker the begin refuses before any
      write (a name, readiness, the etcd guard) or replacements that would not fit.
  returned: always
  type: list
  elements: str
reasons:
  description:
    - Every reason (blockers, warnings, VM pods to live-migrate) of each node that is not a plain V(go),
      keyed C(node (verdict)); empty when every node is a plain V(go).
  returned: always
  type: dict
  sample: {"node-worker-02 (no-go)": ["w-demo/web-0 needs ..."]}
table:
  description: A header line, then one line per node with its verdict and the first reason.
  returned: always
  type: list
  elements: str
nodes:
  description:
    - One entry per node, in the order given, with C(node), C(found), C(verdict) (V(go), V(go (migrate)), V(warn), V(no-go)),
      C(migrations),
      C(summary) (the node's line), C(blockers) and C(warnings) (sentences).
    - C(to_evict) (each with C(dry_run) V(allowed), V(refused), V(error) or V(gone), C(message), C(pdbs)),
      C(to_delete), C(to_wait), C(skipped_pods), C(refused) (with C(options)).
    - Drain rules (O(drain.rules)), C(batches) (the order batches, lowest first, each with C(order) and the
      C(pods) in it), C(to_wait_completed) (pods waited for until they complete, a warning) and
      C(do_not_disrupt) (pods annotated C(karpenter.sh/do-not-disrupt=true) or
      C(nmo.maintenance/do-not-disrupt=true), each with C(annotation); each one a blocker).
    - C(pdbs), the budgets guarding pods to evict (C(budget), C(selected_pods), C(disruptions_allowed),
      C(never_allows), C(why)).
    - C(capacity) (C(batch), C(replacements), C(requests), C(fits), C(pending) with C(reason), C(placed)
      with the C(node) each replacement would likely go to).
  returned: always
  type: list
  elements: dict
elapsed:
  description: Seconds the pre-flight took.
  returned: always
  type: float
reads:
  description:
    - How the cluster was read. C(pods_of_judged_nodes) V(per node) or V(whole list);
      C(every_node_listed) (false when few nodes were judged and no replacement needed a home, or
      when the first pages of the node list held enough candidate homes);
      C(nodes_read), the nodes read (judged and listed); C(candidate_nodes_read), the nodes whose pods
      were read to judge capacity, at most C(candidate_read_limit) (0 when the nodes were not listed).
  returned: always
  type: dict
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
from ansible_collections.nmo.maintenance.plugins.module_utils.model import blocked
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows.preflight import PreflightOptions, preflight


def core(client, params):
    params, warnings = specs.drain_params(params)
    result = preflight(client, PreflightOptions.from_params(params))
    if params["on_blocked"] != blocked.STOP:  # docs/design.md §18.4: drain blocks left to the policy
        go, said = blocked.preflight_goes(params["on_blocked"], params["max_blocked"], result["blocked"],
                                          result["drain_blocked"])
        result["go"] = go
        result["summary"] += f"; {said}" if said else ""
    if warnings:
        result["warnings"] = warnings + list(result.get("warnings") or [])
    return result


ARGUMENT_SPEC = {
    "nodes": {"type": "list", "elements": "str", "required": True},
    "concurrency": {"type": "int", "default": 1},
    "on_blocked": {"type": "str", "choices": list(blocked.POLICIES), "default": blocked.STOP},
    "max_blocked": {"type": "int", "default": 1},
    "maintenance_names": {"type": "dict"},
    **{k: v for k, v in specs.LEASE.items() if k.startswith("etcd_")},
    **specs.DRAIN_OPTION,
    **specs.FLAT_DRAIN}


def main():
    run(ARGUMENT_SPEC, core, pool_size=specs.pool_size)


if __name__ == "__main__":
    main()
