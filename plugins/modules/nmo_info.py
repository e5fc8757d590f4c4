#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: nmo_info
short_description: Where a node's maintenance stands, in one read-only call
version_added: "0.1.0"
description:
  - For one node or for all, returns its C(NodeMaintenance) (phase, progress, pending pods,
    last error), its taints, whether it is cordoned, the exclude-from-remediation label, the
    leases that name it and its recent events.
  - Reads nodes, NodeMaintenances, leases and events once each, whatever the number of nodes.
author:
  - nmo.maintenance maintainers (@nmo-maintenance)
extends_documentation_fragment:
  - nmo.maintenance.connection
attributes:
  check_mode:
    support: full
    description:
      - Read-only, the same in check mode; but for O(record_phase), whose write is not made (the
        record is returned as it would be).
  diff_mode:
    support: none
    description: Changes nothing, so there is nothing to show.
options:
  node:
    description: The node to describe; all nodes when omitted.
    type: str
  label_selector:
    description: With no O(node), only nodes matching this label selector.
    type: str
  nodes:
    description:
      - With no O(node), only these nodes. A playbook reads just its own hosts' nodes this way,
        however large the cluster.
      - Names that no node of the cluster has (a typo, or a name that cannot be a node's, such as
        C(..)) are left out of RV(nodes) and listed in RV(missing).
    type: list
    elements: str
  only_in_maintenance:
    description:
      - With no O(node), only nodes that show a sign of maintenance (a C(NodeMaintenance),
        a maintenance taint, cordon, the label, or a lease).
    type: bool
    default: false
  label_key:
    description: The exclude-from-remediation label key.
    type: str
    default: remediation.medik8s.io/exclude-from-remediation
  events_limit:
    description: How many recent events to return per node, 0 to 1000; V(0) reads no events at all.
    type: int
    default: 10
  wait_ready:
    description:
      - With O(node), first wait until the node's C(Ready) condition is C(True), for at most
        O(ready_timeout) seconds, then describe it. The wait is one watch on the node; it ends
        with the first status update that says Ready, and asks nothing more of the API server meanwhile.
      - On timeout the task fails, saying what the node's C(Ready) condition says (reason,
        message, last heartbeat).
    type: bool
    default: false
  ready_timeout:
    description: With O(wait_ready), how long to wait, in seconds.
    type: int
    default: 600
  run_id:
    description:
      - With O(wait_ready) and O(held_leases), the playbook run (M(nmo.maintenance.nmo_run)) whose
        leases for the node are checked; with O(record_phase), the run the phase is part of.
    type: str
  held_leases:
    description:
      - With O(wait_ready), which leases the run O(run_id) must still hold for the node. V(all),
        the node lease and the maintenance slot; V(slot), the slot only (operator mode); V(none),
        no check. Looked at while the wait lasts (at most every 5 s, one request) and after it
        (in the list of leases the report reads anyway). One that lapsed, was deleted or is
        someone else's now fails the task (C(the node lease of X lapsed at T (renewal late by
        N s)), another run may hold the node); one renewed late is a warning.
      - Omitted, V(none); with O(record_phase), the leases the node's progress record says the
        run holds (its C(held), as just written; V(none) when the node has no record).
    type: str
    choices: [none, slot, all]
  record_phase:
    description:
      - With O(wait_ready), first say in the node's progress record that this phase starts, as
        M(nmo.maintenance.nmo_progress) with O(nmo.maintenance.nmo_progress#module:phase) does (the
        same write, one request for a record of this run), then wait. A node without a
        C(NodeMaintenance) has no record, and nothing is written. The write is the run's
        bookkeeping, not a change to the node, so the result does not say C(changed) for it.
    type: str
    choices: [ready]
"""

EXAMPLES = r"""
- name: What is going on with node-worker-02?
  nmo.maintenance.nmo_info:
    node: node-worker-02
  delegate_to: localhost
  register: info

- name: Every node that shows a sign of maintenance
  nmo.maintenance.nmo_info:
    only_in_maintenance: true
  delegate_to: localhost
"""

RETURN = r"""
record:
  description:
    - With O(record_phase), the node's progress record after the write (as
      M(nmo.maintenance.nmo_progress) returns it); empty when the node has no C(NodeMaintenance).
  returned: with record_phase
  type: dict
  sample: {run: 20261203-150102-a1b2c3, phase: ready, reached: [maintenance, lease, taints, cordon], held: all,
           places: [nmo-maintenance-slot-0, node-node-worker-01], waited: 0.0, failure: "", failedPhase: "",
           failedRun: "", requests: {}}
waited:
  description: With O(wait_ready), the seconds spent waiting for the node to be Ready.
  returned: with wait_ready
  type: float
missing:
  description: The names of O(nodes) that no node of the cluster has, in the order given.
  returned: always
  type: list
  elements: str
nodes:
  description: One entry per node.
  returned: always
  type: list
  elements: dict
  contains:
    node:
      description: Node name.
      type: str
    ready:
      description: Whether the node is Ready.
      type: bool
    unschedulable:
      description: Whether the node is cordoned.
      type: bool
    excluded_from_remediation:
      description: Whether the exclude-from-remediation label is set.
      type: bool
    taints:
      description: All taints of the node.
      type: list
    maintenance_taints:
      description: The maintenance taints present.
      type: list
    annotations:
      description: The node's C(nmo.maintenance/) annotations (the role's campaign mark).
      type: dict
    maintenance:
      description: The node's NodeMaintenance (name, phase, drainProgress, pendingPods, lastError...), or null.
      type: dict
    node_deleted:
      description:
        - True for a node that is not in the cluster any more but that a NodeMaintenance still names (it was
          deleted during its maintenance). Such nodes are reported with O(nodes) naming them (or their
          NodeMaintenance), and, without O(node), O(nodes) or O(label_selector), always.
      type: bool
    run:
      description:
        - The playbook run that holds the NodeMaintenance (C(id), empty when it names none) and
          whether that run is C(alive) (its run lease is valid); null without a NodeMaintenance.
      type: dict
    leases:
      description:
        - Leases in C(medik8s-leases) that name the node (its node lease, its maintenance slot), each with
          name, holder, renewTime, leaseDurationSeconds, and C(slot), true for a maintenance slot
          of this collection (label C(app.kubernetes.io/component=maintenance-slot)), whatever its prefix.
      type: list
    events:
      description: Recent events of the node and its NodeMaintenance, oldest first.
      type: list
rollouts:
  description:
    - Each rollout of several runs (AWX job slices; C(node_maintenance_rollout)) whose lease
      C(nmo-rollout-<id>) is in C(medik8s-leases), from the same list of leases.
  returned: always
  type: list
  elements: dict
  contains:
    rollout:
      description: Its id.
      type: str
    runs:
      description: Its live runs.
      type: list
      elements: str
    stopped_after:
      description: C(<node>/<phase>) of the failure that stopped it; empty while it goes on.
      type: str
    stopped_run:
      description: The run that node failed in.
      type: str
    blocked:
      description: The nodes skipped or quarantined, counted against C(node_maintenance_max_blocked).
      type: list
      elements: str
    last_start:
      description: When a run of it last started.
      type: str
    kept_until:
      description: When a later run's start may remove its lease (no live run naming it).
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

import time

from ansible_collections.nmo.maintenance.plugins.module_utils.adapter import run
from ansible_collections.nmo.maintenance.plugins.module_utils.errors import InputError
from ansible_collections.nmo.maintenance.plugins.module_utils.model import record as record_model
from ansible_collections.nmo.maintenance.plugins.module_utils.model import rollout_record, validation
from ansible_collections.nmo.maintenance.plugins.module_utils.model.marks import EXCLUDE_FROM_REMEDIATION
from ansible_collections.nmo.maintenance.plugins.module_utils.stores import record as records
from ansible_collections.nmo.maintenance.plugins.module_utils.stores.leases import list_leases
from ansible_collections.nmo.maintenance.plugins.module_utils.stores.node_ready import wait_ready
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import run as runs
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows.info import describe, in_maintenance, leases_of, missing


def phase_started(client, params):
    """The node's progress record once the phase O(record_phase) started (nmo_progress's write,
    stores/record.py ``started``), as its wire dict; ``{}`` without a record."""
    _nm, now = records.started(client, params["node"], params["record_phase"], params["run_id"] or "")
    return now.wire() if now is not None else {}


def core(client, params):
    waited, node_read, seen, record = None, None, None, None
    guard = runs.NoGuard()
    if params["record_phase"] and not params["wait_ready"]:
        raise InputError("record_phase needs wait_ready: it says in the record that the wait starts")
    if params["wait_ready"]:
        if not params["node"]:
            raise InputError("wait_ready needs node: it waits for one node")
        if params["ready_timeout"] < 0:
            raise InputError(f"ready_timeout must be 0 or more seconds, got {params['ready_timeout']}")
        if params["run_id"]:
            runs.validate_id(params["run_id"])
        held = params["held_leases"]
        if params["record_phase"]:
            validation.node_name(params["node"])  # before the write's request, as nmo_progress checks it
            record = phase_started(client, params)
            held = held or record.get("held") or runs.HELD_NONE  # the leases the record says the begin took
        guard = runs.guard_for(client, params["run_id"], node=params["node"], held=held or runs.HELD_NONE)
        started = time.monotonic()
        node_read = wait_ready(client, params["node"], params["ready_timeout"], guard=guard)
        waited = round(time.monotonic() - started, 1)
        if guard.held != runs.HELD_NONE:  # the list the report reads anyway answers the check after the wait
            seen = list_leases(client)
            guard.check(lease_list=seen)
    seen = leases_of(client) if seen is None else seen  # the one list the reports read anyway
    reports = describe(client, params["node"], params["label_selector"], params["label_key"], params["events_limit"],
                       only=params["nodes"], node_read=node_read, leases_read=seen)
    result = {"changed": False, "missing": missing(params["nodes"], reports), "warnings": guard.warnings,
              "rollouts": rollout_record.describe(seen, client.server_now())}
    if params["only_in_maintenance"] and not params["node"]:
        reports = [r for r in reports if in_maintenance(r)]
    if waited is not None:
        result["waited"] = waited
    if record is not None:
        result["record"] = record
    return {**result, "nodes": reports}


ARGUMENT_SPEC = {
    "node": {"type": "str"},
    "label_selector": {"type": "str"},
    "nodes": {"type": "list", "elements": "str"},
    "only_in_maintenance": {"type": "bool", "default": False},
    "label_key": {"type": "str", "default": EXCLUDE_FROM_REMEDIATION, "no_log": False},
    "events_limit": {"type": "int", "default": 10},
    "wait_ready": {"type": "bool", "default": False},
    "ready_timeout": {"type": "int", "default": 600},
    "run_id": {"type": "str"},
    "held_leases": {"type": "str", "choices": ["none", "slot", "all"]},
    "record_phase": {"type": "str", "choices": [record_model.READY]}}


def main():
    run(ARGUMENT_SPEC, core)


if __name__ == "__main__":
    main()
