#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: nmo_maintenance
short_description: Put a node in maintenance, or take it out, in one call
version_added: "0.1.0"
description:
  - The begin and the end of a node's maintenance, each as one module call, so a rolling
    maintenance spends one Ansible task (not four) on each. The steps are those of
    M(nmo.maintenance.nmo_crd), M(nmo.maintenance.nmo_lease), M(nmo.maintenance.nmo_taint)
    and M(nmo.maintenance.nmo_cordon), with the same guarantees and events.
  - O(state=present), in order. The node's C(NodeMaintenance) (phase C(Pending),
    C(BeginMaintenance)); the etcd quorum guard for a control-plane node, a maintenance slot
    and the medik8s node lease (waiting for them with O(wait=true)); the maintenance taints
    C(node.kubernetes.io/unschedulable:NoSchedule) and C(medik8s.io/drain:NoSchedule),
    keeping every other taint; cordon and the exclude-from-remediation label (C(Cordon)).
  - O(state=absent), in order. Uncordon, remove the label and the maintenance taints and set
    O(annotations), in one request (C(UncordonNode)); release our node lease and slots;
    record O(events) on the C(NodeMaintenance), then delete it (C(RemovedMaintenance)).
  - O(state=failed), the maintenance failed with O(error). The C(NodeMaintenance) keeps the
    story (phase C(Failed), C(lastError), C(FailedMaintenance); in operator mode the status is
    NMO's). Then, as O(policy) decides for the O(phase) that failed, the node returns to
    service (the steps of O(reached) are undone as by O(state=absent), and the
    C(NodeMaintenance) is kept as the record; in operator mode it is deleted, which is how NMO
    is told to let the node go), or stays in maintenance, its leases held, for a later run to
    resume. C(message) says what was done and where the node stands. When the record or the
    rollback is refused (RBAC revoked, say), the failure's C(msg) says what the node is left
    with as far as the call knows, and what to run. A maintenance that another run, alive,
    holds now is left to it (C(left_to)); nothing is recorded or undone.
  - Each call stops at the first error. The failure carries C(reached), the steps that were
    done; O(state=failed) with that O(reached) undoes exactly those.
  - A rerun does only what is missing; a node already as asked gives C(changed=false),
    except that O(state=present) renews the leases it holds.
author:
  - nmo.maintenance maintainers (@nmo-maintenance)
extends_documentation_fragment:
  - nmo.maintenance.connection
  - nmo.maintenance.lease
  - nmo.maintenance.events
attributes:
  check_mode:
    support: full
    description:
      - Reads, and reports what each step would write; writes nothing, not even events.
      - Where a real run would wait for the leases, the result says so in C(lease.would_wait).
  diff_mode:
    support: full
    description: Shows the NodeMaintenance, the leases, the taints, cordon and label before and after.
options:
  node:
    description: Name of the node.
    type: str
    required: true
  state:
    description:
      - V(present) puts the node in maintenance (everything before the drain); V(absent)
        returns it to service and deletes its C(NodeMaintenance); V(failed) records a failure
        and rolls back (O(rollback)).
    type: str
    choices: [present, absent, failed]
    default: present
  name:
    description:
      - Name of the C(NodeMaintenance). Default C(maintenance-) plus the node name without a
        C(node-) prefix; an existing one for the node is used whatever its name.
    type: str
  reason:
    description: C(spec.reason) of a new C(NodeMaintenance).
    type: str
    default: ""
  install_crd:
    description: With O(state=present), install or upgrade the NodeMaintenance CRD first.
    type: bool
    default: false
  refuse_not_ready:
    description:
      - With O(state=present), refuse a node that is not Ready (NotReady, or unreachable when no kubelet
        posts its status) before anything is written, as M(nmo.maintenance.nmo_preflight) refuses it, since
        its drain would wait for evictions that no kubelet carries out. The role sets it unless the drain's
        options (M(nmo.maintenance.nmo_drain)) let it stop waiting for pods still terminating, so that it goes
        on without the kubelet.
      - A node already in maintenance is never refused for it (a node powered off in its work is resumed).
    type: bool
    default: false
  node_conditions:
    description:
      - With O(state=present), set the node lifecycle condition C(MaintenanceInProgress=True) (reason
        C(MaintenanceWindow), the O(reason) in its message) on the Node's status, where the API server
        knows the node lifecycle conditions (Kubernetes 1.37 or later with the feature gate
        C(NodeLifecycleConditions) on, as its C(/metrics) says; reading it needs C(get) on the
        non-resource URL C(/metrics)). Elsewhere nothing is written and nothing fails; RV(node_conditions)
        says why. Not set again when ours is there. Not in operator mode.
      - With O(state=absent) and O(state=failed), the lifecycle conditions this collection set
        (C(MaintenanceInProgress), C(DrainInProgress), C(Drained)) are removed whatever this says.
    type: bool
    default: true
  label_key:
    description: The label that excludes the node from remediation. Node Health Check reads the default.
    type: str
    default: remediation.medik8s.io/exclude-from-remediation
  annotations:
    description:
      - With O(state=absent), node annotations to set in the uncordon request (a null value
        removes one). The role marks a node done for a campaign with it.
    type: dict
  error:
    description:
      - With O(state=failed), what failed, for C(lastError) (cut at 1000 characters) and the
        C(FailedMaintenance) event.
    type: str
    default: ""
  reached:
    description:
      - With O(state=failed), the begin steps that were done; only those are undone. Omitted,
        the node's progress record says them (C(status.progress) of its C(NodeMaintenance), in
        operator mode its annotation C(nmo.maintenance/progress)), that is the steps the begin of
        run O(run_id) recorded while it went, all of them once the node got past its begin;
        without a record of this run, the C(NodeMaintenance) (and in operator mode the slot)
        if this run made them, else none.
    type: list
    elements: str
    choices: [maintenance, lease, taints, cordon]
  rollback:
    description:
      - With O(state=failed) and no O(policy), V(true) returns the node to service whatever
        the phase; V(false) keeps it in maintenance.
    type: bool
    default: true
  policy:
    description:
      - With O(state=failed), the failure policy, which decides from the O(phase) that failed.
        V(auto) rolls back a node that failed before its work began (phases V(begin),
        V(before_drain), V(drain)) or in the V(end), and keeps out of service, cordoned and
        tainted with its leases held, a node whose work failed (V(work), V(ready), V(gate),
        V(confirm)). V(rollback) and V(keep) apply to every phase. Overrides O(rollback).
    type: str
    choices: [auto, rollback, keep]
  phase:
    description:
      - With O(state=failed), the phase that failed. Omitted, the phase the node's progress
        record says it reached (every phase writes it as it starts; M(nmo.maintenance.nmo_progress)
        for the hooks, the gate and the confirmation). A record that is missing or names no
        known phase is taken as V(work), the earliest phase where the machine may be half-done,
        and the message says so.
    type: str
    choices: [begin, before_drain, drain, work, ready, gate, confirm, end]
  on_blocked:
    description:
      - With O(state=failed), what a node whose drain could not finish (O(blocker) given, phase
        V(drain)) gets. V(stop), the failure path as for any failure (the rollout stops).
        V(skip), returned to service as it was found, its NodeMaintenance deleted, and the
        rollout goes on. V(quarantine), kept cordoned and tainted with the label and annotation
        C(nmo.maintenance/quarantined) naming the blocker, its leases and NodeMaintenance
        released, and the rollout goes on. Omitted, blocks are not looked at.
      - The nodes of the run skipped or quarantined are counted on its run lease; one more than
        O(max_blocked) takes the failure path and stops the rollout (docs/design.md §18.4).
    type: str
    choices: [stop, skip, quarantine]
  max_blocked:
    description: With O(on_blocked), how many nodes of the run may be skipped or quarantined.
    type: int
    default: 1
  blocker:
    description:
      - With O(on_blocked), what kept the drain from finishing, as M(nmo.maintenance.nmo_drain)
        returns it in RV(nmo.maintenance.nmo_drain#module:blocker). Empty, the failure is not a block.
    type: str
    default: ""
  mode:
    description:
      - V(standalone), this collection does the node's work. V(operator), a running Node
        Maintenance Operator (NMO) does it. With O(state=present), a maintenance slot (and
        the etcd guard) is taken first, then the C(NodeMaintenance) is created without a status,
        and NMO takes the node lease, label, taints and cordon, and drains; follow it with
        M(nmo.maintenance.nmo_drain) and O(nmo.maintenance.nmo_drain#module:operator=true). With
        O(state=absent), the C(NodeMaintenance) is deleted and the call waits until NMO has let
        the node go (its finalizer), then releases the slot.
      - In operator mode a C(NodeMaintenance) that this collection did not make is never
        adopted, and the ones NMO works on for others count against O(concurrency).
      - M(nmo.maintenance.nmo_run) tells which mode applies (the role's C(node_maintenance_mode)).
        Omitted, the mode of the run O(run_id) as its start wrote it on the run lease (what
        M(nmo.maintenance.nmo_run) found, when the lease says none, as in check mode); without
        O(run_id), V(standalone).
    type: str
    choices: [standalone, operator]
  when_owned:
    description:
      - With O(state=present), what to do when the node's C(NodeMaintenance) is held by another
        run that is alive (or, in operator mode, was made by someone else for NMO), the same
        rule M(nmo.maintenance.nmo_plan) applies before. V(fail), the task fails and says so
        (RV(owner_run)). V(skip), nothing is written and the task succeeds, unchanged, with
        RV(left_to), RV(plan) V(skip-owned), RV(say) and RV(outcome). A run that took the
        node after the look is answered as the look would have.
    type: str
    choices: [fail, skip]
    default: fail
  held_leases:
    description:
      - With O(state=absent), which leases the run O(run_id) must still hold for the node before
        the end. V(all), the node lease and the maintenance slot; V(slot), the slot only
        (operator mode); V(none), no check. One that lapsed, was deleted or is someone else's
        now fails the end with nothing written (C(the node lease of X lapsed at T (renewal late
        by N s)), another run may hold the node), since another run may have had the node
        or its slot meanwhile, so the maintenance is not reported done. One renewed late is a
        warning.
      - Omitted, what the node's progress record says this run holds (what its begin took).
      - O(state=present) returns in RV(held_leases) what it took, and keeps it in the record.
    type: str
    choices: [none, slot, all]
notes:
  - The single-purpose modules remain for playbooks that want one step at a time.
"""

EXAMPLES = r"""
- name: Put node-worker-01 in maintenance, waiting up to 30 minutes for our turn
  nmo.maintenance.nmo_maintenance:
    node: node-worker-01
    reason: Hardware memory upgrade
    install_crd: true
    wait: true
    timeout: 1800
  delegate_to: localhost
  register: begun

- name: Back in service, and the NodeMaintenance says it went well before it goes
  nmo.maintenance.nmo_maintenance:
    node: node-worker-01
    state: absent
    events:
      - reason: SucceedMaintenance
  delegate_to: localhost
"""

RETURN = r"""
reached:
  description:
    - The steps done, in order. V(maintenance), V(lease), V(taints), V(cordon) for
      O(state=present); V(uncordon), V(taints), V(lease), V(maintenance) for O(state=absent)
      and for the rollback of O(state=failed).
  returned: always, and with a failure
  type: list
  elements: str
recorded:
  description: Whether the failure was written to the NodeMaintenance's status.
  returned: state=failed
  type: bool
rolled_back:
  description: Whether the node was returned to service.
  returned: state=failed
  type: bool
node_conditions:
  description:
    - With O(state=present), the node lifecycle conditions of the begin - C(active) (the node carries our
      C(MaintenanceInProgress), so the drain writes C(DrainInProgress) and C(Drained), see
      O(nmo.maintenance.nmo_drain#module:node_conditions)), C(changed), C(set) (the types written, or
      that would be in check mode) and C(why_not) (why none is written on this server).
  returned: state=present, standalone mode
  type: dict
node_conditions_removed:
  description: The node lifecycle conditions of ours removed (or that would be in check mode).
  returned: state=absent, state=failed with a rollback
  type: list
  elements: str
node_deleted:
  description:
    - True when the node was not in the cluster any more (deleted during its maintenance). Nothing was
      patched on it; with O(state=failed) its leases were released whatever O(rollback) says (there is no
      node to keep out of service) and the NodeMaintenance kept as C(Failed), which O(state=absent)
      (C(playbooks/recover.yml)) deletes.
  returned: when the node is gone (state=absent, state=failed)
  type: bool
left_to:
  description:
    - The run, alive, that holds the maintenance now; nothing was done for it. Empty for a
      C(NodeMaintenance) that NMO maintains for someone else (O(state=present), operator mode).
  returned: state=failed; state=present with O(when_owned=skip) when the node is another's
  type: str
plan:
  description:
    - V(skip-owned), the node is another's (M(nmo.maintenance.nmo_plan)'s plan for it).
    - V(stopped), the rollout scheduler said the node does not begin (docs/design.md §18) - the run stopped
      after one of its nodes failed, or the place it waits for is held by a node kept out of service after
      a failure. Nothing is left of the begin - a NodeMaintenance it made is removed (RV(removed)).
  returned: state=present with O(when_owned=skip) when the node is another's; state=present when stopped
  type: str
say:
  description:
    - Why the node is left alone, as M(nmo.maintenance.nmo_plan) says it, or why it did not begin
      (C(not started - the run stopped after node-X failed), as the scheduler words it).
  returned: state=present with O(when_owned=skip) when the node is another's; state=present when stopped
  type: str
outcome:
  description: The node's result for a run's summary (C(skipped (in maintenance by run X, alive)), C(not started (...))).
  returned: state=present with O(when_owned=skip) when the node is another's; state=present when stopped
  type: str
stopped_after:
  description: The node whose failure stopped this one (the run's first failed node, or the kept node holding its place).
  returned: state=present when stopped
  type: str
fails_run:
  description:
    - Whether this node, stopped, fails the run - true when the place it waits for is held by a node kept
      out of service by a run that is gone (nothing else in this run would fail); false when the run stopped
      after one of its own nodes failed, which fails it.
  returned: state=present when stopped
  type: bool
removed:
  description: Whether the begin removed the C(Pending) NodeMaintenance it had made, the node being stopped while it waited.
  returned: state=present when stopped
  type: bool
owner_run:
  description: With O(when_owned=fail), the live run that holds the node (the task fails).
  returned: failure, when the node is another's
  type: str
kept:
  description: Whether the node was kept out of service (cordoned, tainted, its leases held) by the policy.
  returned: state=failed
  type: bool
blocked:
  description:
    - With O(on_blocked) and a drain that could not finish, what was done about the block - C(action)
      (V(skip), V(quarantine), or V(fail) for the failure path), C(why) and C(blocker). Empty otherwise.
  returned: state=failed with O(on_blocked)
  type: dict
phase:
  description: The phase that failed.
  returned: state=failed
  type: str
policy:
  description: The failure policy applied.
  returned: state=failed
  type: str
message:
  description:
    - The failed node's last line, for the operator. What failed, what was done about it and why
      (the policy and the phase), where the node stands now as read after it (cordoned, tainted,
      the NodeMaintenance's phase, the leases held and for how long) and the command that ends it.
  returned: state=failed
  type: str
maintenance:
  description: The NodeMaintenance (name, phase, drainProgress, pendingPods, lastError).
  returned: always
  type: dict
created:
  description: Whether the NodeMaintenance was created by this call.
  returned: state=present
  type: bool
deleted:
  description: Whether the NodeMaintenance was deleted by this call.
  returned: state=absent, state=failed
  type: bool
lease:
  description: The slot and node lease held (slot, lease, expires, waited, etcd, holders, acquired).
  returned: state=present
  type: dict
held_leases:
  description:
    - The leases this run holds for the node now, for the later steps' O(nmo.maintenance.nmo_drain#module:held_leases)
      (and this module's O(held_leases) at the end) to check. V(all) (node lease and slot), V(slot)
      (operator mode), V(none) (check mode, or outside a run).
  returned: state=present
  type: str
waited:
  description:
    - Seconds spent waiting for the leases. With O(run_id), O(state=absent) and O(state=failed)
      say how long this run's begin waited, as the node's progress record keeps it.
  returned: state=present; state=failed; state=absent with run_id
  type: float
mode:
  description:
    - Who does the node work in this run, V(standalone) or V(operator) (O(mode), or as the run lease of
      O(run_id) says), for the later steps of the same node to pass on instead of reading the run lease again.
  returned: state=present
  type: str
released:
  description: The leases deleted.
  returned: state=absent
  type: list
  elements: dict
not_released:
  description: Leases left in place because someone else holds them.
  returned: state=absent
  type: list
  elements: dict
taints:
  description: The node's taints afterwards (or as they would be, in check mode).
  returned: always
  type: list
  elements: dict
cordon:
  description: C(unschedulable) and C(label) afterwards.
  returned: always
  type: dict
ready:
  description: Whether the node's C(Ready) condition was C(True) when it was last read.
  returned: always
  type: bool
events:
  description: The events recorded (reason, object, count).
  returned: always
  type: list
  elements: dict
node_api_requests:
  description:
    - With O(run_id), O(state=absent) or O(state=failed) (the call that finishes a node), the
      requests of the node's begin in this run, as its progress record keeps them (the begin
      writes them in its own record write), and this call's.
  returned: state=failed, or state=absent with run_id
  type: int
node_api_requests_by:
  description: The same by kind (C(verb resource)).
  returned: state=failed, or state=absent with run_id
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

from ansible_collections.nmo.maintenance.plugins.module_utils import specs
from ansible_collections.nmo.maintenance.plugins.module_utils.adapter import run
from ansible_collections.nmo.maintenance.plugins.module_utils.errors import InputError
from ansible_collections.nmo.maintenance.plugins.module_utils.model import blocked as blocked_rule
from ansible_collections.nmo.maintenance.plugins.module_utils.model import failure, plan
from ansible_collections.nmo.maintenance.plugins.module_utils.model.marks import EXCLUDE_FROM_REMEDIATION
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import blocked, disruption, lifecycle, operator, run_start
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import run as runs


def begin(client, opts, when_owned):
    """The begin; with when_owned=skip, a node another live run holds (found as it begins: the
    same rule as the plan, at the moment of the write) is a clean answer, not a failure."""
    try:
        return lifecycle.begin(client, opts)
    except runs.OwnedByLiveRun as exc:
        # only the refusal before any write names the owner (a lost adoption race does not)
        if when_owned != "skip" or "owner_run" not in exc.details or exc.details.get("reached"):
            raise
        left = plan.owned_by(opts.node, exc.details["owner_run"] or "")
        return {"changed": False, "node": opts.node, "state": "present", "run": opts.run_id, "reached": [],
                "maintenance": {}, "left_to": left.owner,
                "plan": left.plan, "say": left.say, "outcome": left.outcome, "held_leases": runs.HELD_NONE,
                "waited": 0.0, "events": [], "diff": {"before": {}, "after": {}}}


def core(client, params):
    mark = dict(client.requests_by)  # the begin keeps its call's requests in the node's record
    opts = lifecycle.Options(node=params["node"], lease=disruption.Request.from_params(params), name=params["name"],
                             reason=params["reason"], install_crd=params["install_crd"], label_key=params["label_key"],
                             annotations=params["annotations"], end_events=params["events"],
                             run_id=params["run_id"] or "", mode=params["mode"] or operator.STANDALONE,
                             held_leases=params["held_leases"], refuse_not_ready=params["refuse_not_ready"],
                             node_conditions=params["node_conditions"])
    if params["state"] == "failed" and params["reached"] is None:
        try:
            opts.validate()
        except InputError:
            # the begin refused these same options (a name too long, say) before its first
            # write: there is nothing of this run on the node, and no record to read
            params = {**params, "reached": []}
    nothing_written = params["state"] == "failed" and params["reached"] == []
    if params["mode"] is None and opts.run_id and not nothing_written:
        opts.validate()  # a bad option is said before the run lease is read for the run's mode
        # the begin and the end list the leases namespace anyway: the run lease is read in that list
        mode, crd_checked, seen = run_start.run_facts_listed(client, opts.run_id, opts.lease.namespace,
                                                             listed=params["state"] != "failed")
        # the run's start checked the CRD: each begin need not read it again
        opts = replace(opts, mode=mode, install_crd=opts.install_crd and not crd_checked, leases_seen=seen)
    if params["state"] == "absent":
        return lifecycle.end(client, opts)
    if params["state"] == "failed":
        # omitted, the node's progress record in the cluster says them (model/record.py)
        if params["on_blocked"] is not None:  # the role's call: a drain that could not finish may be a block
            return blocked.failed(client, opts, params["error"], params["reached"], params["policy"] or failure.AUTO,
                                  params["phase"], params["on_blocked"], params["max_blocked"], params["blocker"])
        return lifecycle.failed(client, opts, params["error"], params["reached"], params["rollback"],
                                policy=params["policy"], phase=params["phase"])
    result = begin(client, replace(opts, requests_mark=mark), params["when_owned"])
    result.setdefault("mode", opts.mode)
    return result


ARGUMENT_SPEC = {
    "node": {"type": "str", "required": True},
    "state": {"type": "str", "choices": ["present", "absent", "failed"], "default": "present"},
    "name": {"type": "str"},
    "reason": {"type": "str", "default": ""},
    "install_crd": {"type": "bool", "default": False},
    "refuse_not_ready": {"type": "bool", "default": False},
    "node_conditions": {"type": "bool", "default": True},
    **specs.LEASE,
    "label_key": {"type": "str", "default": EXCLUDE_FROM_REMEDIATION, "no_log": False},
    "annotations": {"type": "dict"},
    **specs.EVENTS,
    "error": {"type": "str", "default": ""},
    "reached": {"type": "list", "elements": "str", "choices": list(lifecycle.BEGIN_STEPS)},
    "rollback": {"type": "bool", "default": True},
    "policy": {"type": "str", "choices": list(failure.POLICIES)},
    "phase": {"type": "str", "choices": list(failure.PHASES)},
    "on_blocked": {"type": "str", "choices": list(blocked_rule.POLICIES)},
    "max_blocked": {"type": "int", "default": 1},
    "blocker": {"type": "str", "default": ""},
    "mode": {"type": "str", "choices": ["standalone", "operator"]},
    "when_owned": {"type": "str", "choices": ["fail", "skip"], "default": "fail"},
    "held_leases": {"type": "str", "choices": ["none", "slot", "all"]}}


def main():
    run(ARGUMENT_SPEC, core)


if __name__ == "__main__":
    main()
