#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: nmo_drain
short_description: Drain a node in parallel, respecting PodDisruptionBudgets, with live progress
version_added: "0.1.0"
description:
  - Evicts the pods of a node the way C(kubectl drain --force --ignore-daemonsets --delete-emptydir-data)
    selects them, as the Node Maintenance Operator configures it; each of those defaults is an option.
  - Skipped are mirror pods of static pods, DaemonSet pods, pods not matching O(drain.pod_selector), and pods
    terminating for longer than O(drain.skip_wait_for_delete_timeout). Pods already terminating are waited for.
    Finished pods (Succeeded, Failed) are deleted. Unmanaged and emptyDir pods are evicted.
  - With O(drain.force), O(drain.delete_emptydir_data) or O(drain.ignore_daemonsets) off, the pods each of them guards make
    the module fail before anything is evicted; the message names every such pod and the option that
    would allow it.
  - The pods are listed once; evictions (C(policy/v1) C(pods/eviction)) run in parallel, at most
    O(drain.parallelism) at a time; one watch on the node's pods tells when each pod is gone (deleted, or
    replaced by a pod of the same name and another UID, as a StatefulSet does). The module returns
    when the pods are gone, not when their evictions were accepted.
  - A PodDisruptionBudget that refuses an eviction (HTTP 429) keeps the pod pending; the eviction is
    retried every O(drain.retry_delay) seconds and a Warning event C(DrainError) with the server's message
    is recorded once per pod and message (its count bumped at most every 30 s). A PDB is never bypassed
    unless O(drain.delete_fallback_after) is set. A pod selected by several PDBs (HTTP 500) fails the drain
    with the pod named.
  - When O(maintenance) names a NodeMaintenance, its status is kept current while the drain runs
    (C(totalpods), C(evictionPods), C(drainProgress), C(pendingPods), C(pendingPodsRefs), C(lastError),
    C(lastUpdate); at most one write a second, only when something changed) and ends with phase
    C(Succeeded) and C(drainProgress) 100. A failed or timed-out drain leaves phase C(Running) with
    C(lastError); the caller decides whether the maintenance failed.
  - The Node is watched too. When it is deleted during the drain, the drain stops at once and fails saying
    the node was deleted.
  - With O(drain.rules), the pods go in order batches, each gone before the next starts; rules or a pod's
    C(nmo.maintenance/drain) label can also skip pods or wait for them to complete. Pods annotated
    C(karpenter.sh/do-not-disrupt=true) are never evicted (see O(drain.rules)).
  - The module does not cordon the node; cordon it first (M(nmo.maintenance.nmo_cordon)).
author:
  - nmo.maintenance maintainers (@nmo-maintenance)
extends_documentation_fragment:
  - nmo.maintenance.connection
  - nmo.maintenance.drain
attributes:
  check_mode:
    support: full
    description: Lists and sorts the pods; returns what would be evicted, deleted, waited for and skipped,
      and asks the API server, with a dry-run eviction of each pod to evict (C(dryRun=All), nothing is
      written), whether its PodDisruptionBudget lets it go now (C(would_evict_now)). Evicts nothing and
      writes no status or event. Fails like a real run when an option guards a pod. A O(maintenance)
      that does not exist is taken for one that the begin's check mode only imagined.
  diff_mode:
    support: full
    description: In check mode, the pods on the node before and, after, the plan for each (evict, allowed
      now or refused by its budget with the server's message; delete; wait).
options:
  node:
    description: Name of the node to drain.
    type: str
    required: true
  maintenance:
    description:
      - Name of the NodeMaintenance whose status shows the drain's progress. It must name O(node).
      - Without it the drain writes no status and records no event; with O(run_id), the node's
        C(NodeMaintenance) (the one whose progress record the drain updates).
    type: str
  progress_interval:
    description:
      - Seconds between two progress lines in the playbook output while the drain runs (node,
        C(drainProgress), pending pods and last error, read from the NodeMaintenance by the
        controller). V(0) prints none. Not printed in check mode or when the task runs with C(async).
    type: float
    default: 10
  run_id:
    description:
      - The playbook run this drain is for (M(nmo.maintenance.nmo_run)). The drain stops, with
        no further eviction or status write, when that run is gone (its run lease deleted or
        expired, as when the controller died) or when another run adopted the NodeMaintenance.
    type: str
  held_leases:
    description:
      - Which leases the run O(run_id) must still hold for the node before each step, checked
        in the same look at the leases namespace as the run lease (one request). V(all), the
        node lease and the maintenance slot (what a standalone begin takes); V(slot), the slot
        only (operator mode, where the node lease is NMO's); V(none), no check.
      - A lease that lapsed, was deleted or is someone else's now stops the drain before any
        further eviction, saying when it lapsed and how late its renewal was (C(the node lease
        of X lapsed at T (renewal late by N s)), another run may hold the node); one renewed
        late by the run's heartbeat is a warning.
      - Omitted, with O(run_id) what the node's progress record says the begin of that run took
        (docs/design.md §18.5); otherwise V(none).
    type: str
    choices: [none, slot, all]
  validate_only:
    description:
      - Only check the options, with no request to the API server, and return, so a bad drain
        option stops a node with nothing written rather than after it was cordoned. The role
        checks its drain options the same way (the same code) in its input check, before any
        node is touched.
    type: bool
    default: false
  operator:
    description:
      - The Node Maintenance Operator drains the node (operator mode, see
        M(nmo.maintenance.nmo_maintenance) O(nmo.maintenance.nmo_maintenance#module:mode)). Evict
        nothing, and follow the C(NodeMaintenance) by watch until NMO sets it C(Succeeded), with
        the same progress lines; fail with NMO's C(lastError) when it sets C(Failed), or at
        O(drain.timeout) naming the pending pods.
      - Omitted, as the node's C(NodeMaintenance) says (its mode annotation), else as the run
        O(run_id) says (the mode its start wrote on the run lease); without O(run_id), V(false).
      - With O(run_id), the drain first writes in the node's progress record that the drain
        phase started (M(nmo.maintenance.nmo_progress)).
    type: bool
  volume_detach_timeout:
    description:
      - After the drain (or NMO's, in operator mode), wait up to this many seconds, in the same
        call, until the node's C(status.volumesAttached) is empty and no C(VolumeAttachment)
        (C(storage.k8s.io/v1)) names the node in C(spec.nodeName); the volumes of pods that stay
        on the node (O(drain.ignore_daemonsets), skipped pods) are not waited for. While it waits,
        the NodeMaintenance's C(lastError) names the volumes still attached (the progress line prints
        it) and a C(Drain) event says so; at the timeout the module fails naming them.
      - V(0) does not wait (the role's C(node_maintenance_volume_detach_timeout) is on by default,
        600 s).
      - In check mode, returns what would be waited for (C(would_wait_for) in RV(volumes)).
    type: float
    default: 0
  settle:
    description:
      - Before the drain evicts, take the snapshot of what must be whole again after the
        maintenance (see M(nmo.maintenance.nmo_settle)) - the Deployments, StatefulSets, ReplicaSets
        and KubeVirt VirtualMachines of the node's pods and the PodDisruptionBudgets covering
        them with their C(disruptionsAllowed), each workload with its Ready count then (one list
        per kind and namespace). It is kept as the Node's annotation
        C(nmo.maintenance/settle) (merged with one a killed run left) and returned as RV(settle).
        Not written in check mode.
    type: bool
    default: false
  node_conditions:
    description:
      - Set the node lifecycle condition C(DrainInProgress=True) on the Node's status before the drain
        evicts (removing a C(Drained) an earlier drain left), and when the drain is done,
        C(Drained=True) with what it did in its message, C(DrainInProgress) removed; one patch of
        C(nodes/status) each. A drain that fails leaves C(DrainInProgress); the end removes it.
      - For a server that knows the node lifecycle conditions. V(auto), when the node the drain reads
        anyway carries the C(MaintenanceInProgress) of this collection (its message begins with
        the collection's own prefix), which the begin sets where the server knows them
        (RV(nmo.maintenance.nmo_maintenance#module:node_conditions)); no request is added to tell it.
        In operator mode V(auto) writes none (NMO's conditions). V(true) or V(false) say it outright.
        A write the API server refuses is a warning, never a failure. Nothing is written in check mode.
    type: raw
    default: auto
"""

EXAMPLES = r"""
- name: Drain a cordoned node, keeping its NodeMaintenance status current
  nmo.maintenance.nmo_drain:
    node: node-worker-01
    maintenance: maintenance-worker-01
    drain:
      timeout: 900
  delegate_to: localhost

- name: Show what a drain would do
  nmo.maintenance.nmo_drain:
    node: node-worker-01
  check_mode: true
  register: plan

- name: Drain a KubeVirt node, live-migrating the VMs that a PodDisruptionBudget keeps there
  nmo.maintenance.nmo_drain:
    node: node-worker-02
    maintenance: maintenance-worker-02
    drain:
      kubevirt: migrate

- name: Drain in the background and poll
  nmo.maintenance.nmo_drain:
    node: node-worker-01
    maintenance: maintenance-worker-01
  async: 1200
  poll: 5
"""

RETURN = r"""
would_evict_now:
  description:
    - In check mode, the pods to evict (C(namespace/name)) that their PodDisruptionBudgets let go now
      (C(allowed)) and those they refuse now, or that could not be judged (C(refused)).
  returned: check mode
  type: dict
validated:
  description: True when O(validate_only) checked the options (nothing else is returned then).
  returned: with O(validate_only=true)
  type: bool
pods_found:
  description: Pods on the node when the drain started.
  returned: always
  type: int
skipped_pods:
  description:
    - Pods left alone, each with C(namespace), C(name) and C(reason) (for a pod a drain rule or its drain
      label skips, the reason names the rule or label, C(skipped by rule 1 (storage))).
    - (Not C(skipped), which Ansible reserves for skipped tasks.)
  returned: always
  type: list
  elements: dict
batches:
  description:
    - The order batches of the pods to evict, delete or wait for (O(drain.rules)), lowest first, each
      with C(order) and C(pods) (how many). One batch, order V(0), without rules.
  returned: always
  type: list
  elements: dict
  sample: [{"order": 0, "pods": 4}, {"order": 10, "pods": 2}]
do_not_disrupt:
  description:
    - Pods annotated C(karpenter.sh/do-not-disrupt=true) or C(nmo.maintenance/do-not-disrupt=true) when
      the drain started, never evicted, each with C(namespace), C(name), C(reason) and C(annotation).
  returned: always
  type: list
  elements: dict
wait_completed:
  description: Pods a drain rule or their label says to wait for until they complete (not evicted).
  returned: always
  type: list
  elements: dict
completed:
  description: Pods waited for until they completed (C(Succeeded), C(Failed)) or were gone.
  returned: success or failure after the drain started
  type: list
  elements: dict
evicted:
  description: Pods whose eviction was accepted and that are gone.
  returned: success or failure after the drain started
  type: list
  elements: dict
deleted:
  description: Pods deleted rather than evicted (finished pods, O(drain.disable_eviction), O(drain.delete_fallback_after)).
  returned: success or failure after the drain started
  type: list
  elements: dict
gone:
  description: Pods that left without a request of ours (already terminating, or removed meanwhile).
  returned: success or failure after the drain started
  type: list
  elements: dict
surged:
  description:
    - With O(drain.surge), the pods whose Deployment the drain restarted (surge-first), each with C(namespace),
      C(name), C(reason) and C(deployment). Such a pod goes by its Deployment's rollout once the new pod is Ready.
  returned: success or failure after the drain started
  type: list
  elements: dict
left_terminating:
  description:
    - Pods still terminating that the drain stopped waiting for after O(drain.skip_wait_for_delete_timeout)
      seconds, as C(kubectl drain) does, each with C(namespace), C(name) and C(reason) (why it did not leave,
      a finalizer, a node without its kubelet). A warning names them too.
  returned: success or failure after the drain started
  type: list
  elements: dict
pending:
  description: Pods not gone when the drain ended (on failure), each with C(last_error) and C(attempts).
  returned: success or failure after the drain started
  type: list
  elements: dict
blocker:
  description:
    - On failure, what kept the drain from finishing before the work, when that is a block (docs/design.md
      §18.4) - the pods refused by options that are off, or the timeout with the pods still pending (a
      PodDisruptionBudget that never allows the eviction, pods that never leave). Empty for other failures.
    - In operator mode, the pods the Node Maintenance Operator still lists in the NodeMaintenance's
      C(pendingPods) when the timeout ends the wait, with its C(lastError); empty when none is pending.
  returned: failure
  type: str
refused:
  description: On failure before any eviction, the pods guarded by options that are off, with C(options).
  returned: failure
  type: list
  elements: dict
would_evict:
  description: In check mode, the pods that would be evicted, with why.
  returned: check mode
  type: list
  elements: dict
would_delete:
  description: In check mode, the pods that would be deleted.
  returned: check mode
  type: list
  elements: dict
would_wait:
  description: In check mode, the pods already terminating that would be waited for.
  returned: check mode
  type: list
  elements: dict
would_wait_completed:
  description: In check mode, the pods that would be waited for until they complete (O(drain.rules)).
  returned: check mode
  type: list
  elements: dict
elapsed:
  description: Seconds the drain took.
  returned: always
  type: float
blocked:
  description:
    - The pods a PodDisruptionBudget refused for a while, each with C(namespace), C(name), C(reason) (the first
      refusal), C(since) and C(until) (epoch seconds, the first refusal and the accepted eviction or the drain's end),
      C(seconds) and C(still_refused). The run report shows them (docs/report.md).
  returned: success or failure after the drain started
  type: list
  elements: dict
eviction_retries:
  description: Evictions sent again after a refusal or a transient error.
  returned: success or failure after the drain started
  type: int
returned:
  description:
    - Pods that landed on the node after the drain began, each with C(namespace), C(name) and
      C(reason) (the toleration that let it in, for example
      C(tolerates medik8s.io/drain:NoSchedule and node.kubernetes.io/unschedulable:NoSchedule via) and the toleration).
  returned: success or failure after the drain started
  type: list
  elements: dict
status_writes:
  description: Writes of the NodeMaintenance status (at most one a second, plus the first and the last).
  returned: success or failure after the drain started
  type: int
migrations:
  description:
    - With O(drain.kubevirt=migrate), the VMs whose pod a budget refused, each with C(namespace), C(vmi), C(pod),
      C(state) (V(migrated), V(migrating), V(queued), V(failed), V(blocked), V(kubevirt)), C(migration) (the
      C(VirtualMachineInstanceMigration)), C(phase), C(targetNode), C(started) and C(message).
  returned: with O(drain.kubevirt=migrate) when the node has virt-launcher pods
  type: list
  elements: dict
migrations_created:
  description: C(VirtualMachineInstanceMigration) objects the drain created.
  returned: with O(drain.kubevirt=migrate) when the node has virt-launcher pods
  type: int
status:
  description: The NodeMaintenance as the drain left it (name, phase, drainProgress, pendingPods, lastError).
  returned: when O(maintenance) is given
  type: dict
volumes:
  description:
    - The volume wait (O(volume_detach_timeout)) - C(attached) (what still held the node at the
      end, empty on success), C(was_attached) (what the wait began with), C(ignored) (volumes
      of pods that stay), C(waited), C(elapsed), C(timeout), in check mode C(would_wait_for).
  returned: when O(volume_detach_timeout) is more than 0 and the drain finished
  type: dict
settle:
  description:
    - With O(settle), the snapshot - C(workloads) (each C(kind), C(namespace), C(name), for a
      Deployment its C(replicaset); C(ready), its Ready count before the drain, when it was read)
      and C(budgets) (each C(namespace), C(name), C(allowed), the C(disruptionsAllowed) before the drain).
  returned: with O(settle)
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

from dataclasses import replace

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.nmo.maintenance.plugins.module_utils import specs
from ansible_collections.nmo.maintenance.plugins.module_utils.adapter import run
from ansible_collections.nmo.maintenance.plugins.module_utils.errors import NmoError
from ansible_collections.nmo.maintenance.plugins.module_utils.model import record, validation
from ansible_collections.nmo.maintenance.plugins.module_utils.model.node_conditions import drained_message
from ansible_collections.nmo.maintenance.plugins.module_utils.stores import node_conditions
from ansible_collections.nmo.maintenance.plugins.module_utils.stores import record as records
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import operator, run_start, settle, volumes
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows.drain import DrainOptions, Seen, drain
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows.run import guard_for


def core(client, params):
    validation.seconds(params["progress_interval"], "progress_interval")
    params, warnings = specs.drain_params(params)
    opts = DrainOptions.from_params(params)
    volume_timeout = params["volume_detach_timeout"]
    if params["validate_only"]:
        validation.problems(opts.validate, lambda: validation.seconds(volume_timeout, "volume_detach_timeout"))
        result = {"changed": False, "node": opts.node, "validated": True}
    else:
        validation.problems(opts.validate, lambda: validation.seconds(volume_timeout, "volume_detach_timeout"))
        with_operator = params["operator"]
        nm = None
        if params["run_id"]:  # the node's progress record: the drain phase starts (model/record.py), and
            # what the role leaves unset is as it says: the NodeMaintenance, the leases held, the mode
            nm, progress = records.started(client, opts.node, record.DRAIN, params["run_id"],
                                           name=opts.maintenance)
            ours = progress if progress is not None and progress.run == params["run_id"] else None
            if nm is not None and opts.maintenance is None:
                opts = replace(opts, maintenance=nm["metadata"]["name"])
            if params["held_leases"] is None:
                opts = replace(opts, held_leases=ours.held if ours is not None else "none")
            if nm is not None and with_operator is None:
                with_operator = records.operated(nm)
        if with_operator is None:
            with_operator = run_start.run_mode(client, params["run_id"]) == operator.OPERATOR
        # docs/design.md §4.9.1: what must be whole again, known before anything is evicted
        taken = settle.take_snapshot(client, opts.node) if params["settle"] else None
        snap, pods = (taken.snap, taken.pods) if taken is not None else (None, None)
        # docs/design.md §4.11: DrainInProgress, then Drained, where the begin set MaintenanceInProgress
        # (auto: the node the drain reads anyway says it; in operator mode NMO's conditions, none of ours)
        wanted = None if str(params["node_conditions"]).lower() == "auto" else boolean(params["node_conditions"])
        seen = None
        try:
            if with_operator:
                lifecycle = bool(wanted) and not client.dry_run
                if lifecycle:
                    warnings += node_conditions.drain_started(client, opts.node)
                result = operator.follow_drain(client, opts)
            else:
                # the snapshot's node and pods are the drain's first look (no second read of either)
                seen = Seen(taken.node, taken.listing) if taken is not None else None
                result = drain(client, opts, wanted, nm, seen)
                lifecycle = bool(result.pop("node_conditions", False))
        except NmoError as exc:
            if snap is not None:
                exc.details["settle"] = snap
            raise
        if lifecycle:
            warnings += node_conditions.drained(client, opts.node, drained_message(
                opts.node, len(result.get("evicted") or []), len(result.get("deleted") or []),
                len(result.get("skipped_pods") or [])))
        if with_operator and opts.rules:
            warnings.append("drain.rules have no effect in operator mode: the Node Maintenance Operator drains")
        if snap is not None:
            result["settle"] = snap
        if volume_timeout > 0:  # docs/design.md §4.7.8: no volume holds the node before the work
            staying = None if with_operator else result.get("skipped_pods") or []
            try:
                guard = guard_for(client, opts.run_id, node=opts.node, held=opts.held_leases)
                result["volumes"] = volumes.wait_detached(client, opts.node, volume_timeout, staying,
                                                          result.get("maintenance") or opts.maintenance, pods, guard,
                                                          node_seen=seen.node if seen is not None else None)
            except volumes.VolumesAttached as exc:
                exc.details = {**result, **exc.details, "changed": True}
                raise
    if warnings:
        result["warnings"] = warnings + list(result.get("warnings") or [])
    return result


ARGUMENT_SPEC = {
    "node": {"type": "str", "required": True},
    "maintenance": {"type": "str"},
    **specs.DRAIN_OPTION,
    **specs.FLAT_DRAIN,
    "progress_interval": {"type": "float", "default": 10},
    "run_id": {"type": "str"},
    "held_leases": {"type": "str", "choices": ["none", "slot", "all"]},
    "validate_only": {"type": "bool", "default": False},
    "operator": {"type": "bool"},
    "volume_detach_timeout": {"type": "float", "default": 0},
    "settle": {"type": "bool", "default": False},
    "node_conditions": {"type": "raw", "default": "auto"}}


def main():
    run(ARGUMENT_SPEC, core, pool_size=specs.pool_size)


if __name__ == "__main__":
    main()
