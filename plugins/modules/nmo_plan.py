#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: nmo_plan
short_description: What a run does with each node, decided by one rule
version_added: "0.2.0"
description:
  - For one node or several, says what the run O(run_id) does with it, from where it stands
    (the report of M(nmo.maintenance.nmo_info)), the campaign and the window's end.
  - V(skip-owned), its C(NodeMaintenance) is held by another run that is alive (its run lease is
    being renewed); it is left to that run, never adopted. V(finish), in flight and already done
    for O(campaign), only the end is left. V(full), the whole lifecycle (a node in flight whose
    run is gone is resumed from its start). V(settle), back in service but the settle of its
    end (M(nmo.maintenance.nmo_settle)) did not finish (its C(nmo.maintenance/settle-ended) mark);
    only the settle is left. V(skip-done), done already for O(campaign).
    V(skip-window), O(window_end) is past; no node is begun after it, one in flight is still
    finished.
  - M(nmo.maintenance.nmo_maintenance) applies the same rule when it begins the node, so a run
    that took the node since the look is answered the same way.
  - Reads nodes, NodeMaintenances and leases once each, whatever the number of nodes; with
    O(report), nothing at all.
author:
  - nmo.maintenance maintainers (@nmo-maintenance)
extends_documentation_fragment:
  - nmo.maintenance.connection
attributes:
  check_mode:
    support: full
    description: Read-only; the same in check mode.
  diff_mode:
    support: none
    description: Changes nothing, so there is nothing to show.
options:
  node:
    description: The node to plan; the result is at the top level (RV(plan), RV(owner), ...).
    type: str
  nodes:
    description:
      - With no O(node), the nodes to plan, read in one call; the result is RV(plans). Names no
        node of the cluster has are listed in RV(missing) and planned as not in flight.
    type: list
    elements: str
  report:
    description:
      - With O(node), where the node stands as M(nmo.maintenance.nmo_info) (or this module, in
        RV(plans)) reported it; nothing is read then. Without it, the node is read.
    type: dict
  run_id:
    description: The run asking (M(nmo.maintenance.nmo_run)); a maintenance it holds itself is not another run's.
    type: str
    default: ""
  campaign:
    description: The campaign; a node whose C(nmo.maintenance/campaign) annotation names it is done.
    type: str
    default: ""
  window_end:
    description:
      - The end of the maintenance window, ISO 8601 with a zone (C(2026-11-29T18:00:00+01:00) or
        C(...Z)); empty for none. Compared with the controller's clock.
    type: str
    default: ""
  label_key:
    description: The exclude-from-remediation label key, for the reports read.
    type: str
    default: remediation.medik8s.io/exclude-from-remediation
  order:
    description:
      - With O(nodes), the order RV(order) gives them in. V(inventory), as given. V(zone), one
        topology domain (the node label O(order_key)) after the other, the domains sorted by
        name and the nodes without the label last, each domain in the order given. V(oldest),
        the same domains, each oldest node first (C(creationTimestamp)). V(interleave), one node
        of each domain in turn (the unlabelled ones as one more domain, last in each round), so
        that a batch spreads over the domains of a per-domain budget. V(auto), V(interleave) by
        the first of O(budgets) with a C(topology_key) (that key), else V(inventory).
    type: str
    choices: [inventory, zone, oldest, interleave, auto]
    default: inventory
  order_key:
    description: The node label whose values are the topology domains of O(order).
    type: str
    default: topology.kubernetes.io/zone
  budgets:
    description:
      - The run's topology budgets, as the role's C(node_maintenance_budgets) gives them; read only
        by O(order=auto).
    type: list
    elements: raw
    default: []
"""

EXAMPLES = r"""
- name: What this run does with node-worker-02
  nmo.maintenance.nmo_plan:
    node: node-worker-02
    run_id: "{{ run.run }}"
    campaign: memory-upgrade-w48
  delegate_to: localhost
  register: planned

- name: Which nodes of the play an earlier run left in maintenance
  nmo.maintenance.nmo_plan:
    nodes: "{{ ansible_play_hosts_all }}"
    run_id: "{{ run.run }}"
  delegate_to: localhost
  run_once: true
  register: plans
"""

RETURN = r"""
plan:
  description: With O(node), the plan, V(full), V(finish), V(settle), V(skip-owned), V(skip-done) or V(skip-window).
  returned: with node
  type: str
owner:
  description:
    - With O(node) and V(skip-owned), the live run that holds the node (empty for a C(NodeMaintenance)
      NMO keeps for someone else).
  returned: with node
  type: str
say:
  description: With O(node), why the node is left alone (V(skip-owned), V(skip-window)); empty otherwise.
  returned: with node
  type: str
outcome:
  description:
    - With O(node), the node's result for the run's summary once the plan is carried out
      (V(succeeded), V(skipped (...))).
  returned: with node
  type: str
resume:
  description: With O(node), whether the node is in flight and not another live run's (the playbook finishes those first).
  returned: with node
  type: bool
planned_at:
  description: With O(node), when the plan was made (seconds since the epoch, the controller's clock).
  returned: with node
  type: float
report:
  description: With O(node), where the node stands (as M(nmo.maintenance.nmo_info) reports it).
  returned: with node
  type: dict
plans:
  description: With O(nodes), by node name, each with C(plan), C(owner), C(say), C(outcome), C(resume) and C(report).
  returned: with nodes
  type: dict
order:
  description:
    - With O(nodes), their names (each once) in the order O(order) takes them; the maintenance
      playbook maintains them in that order.
  returned: with nodes
  type: list
  elements: str
  sample: [node-worker-01, node-worker-03, node-worker-02]
domains:
  description:
    - With O(nodes) and an O(order) other than V(inventory), the values of O(order_key) in the
      order taken (V("") for nodes without the label); empty otherwise.
  returned: with nodes
  type: list
  elements: str
  sample: [zone-a, zone-b]
turns:
  description:
    - With O(nodes), each node's position in RV(order), from 0, by node name (its turn, which the
      maintenance playbook gives the begin above concurrency 1 as
      O(nmo.maintenance.nmo_maintenance#module:turn)).
  returned: with nodes
  type: dict
reordered:
  description:
    - With O(nodes), whether RV(order) differs from O(nodes) as given (an O(order) other than V(inventory), or
      the resumed nodes that still hold places moved before those whose leases lapsed).
  returned: with nodes
  type: bool
order_used:
  description: With O(nodes), the order taken (O(order), or what V(auto) chose).
  returned: with nodes
  type: str
  sample: interleave
order_key_used:
  description: With O(nodes), the node label whose values are the domains of RV(order_used).
  returned: with nodes
  type: str
  sample: topology.kubernetes.io/zone
missing:
  description: The names of O(nodes) that no node of the cluster has.
  returned: with nodes
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

from datetime import datetime, timezone

from ansible_collections.nmo.maintenance.plugins.module_utils.adapter import run
from ansible_collections.nmo.maintenance.plugins.module_utils.errors import InputError
from ansible_collections.nmo.maintenance.plugins.module_utils.model import order as ordering
from ansible_collections.nmo.maintenance.plugins.module_utils.model import plan as planner
from ansible_collections.nmo.maintenance.plugins.module_utils.model import rollout
from ansible_collections.nmo.maintenance.plugins.module_utils.model.marks import EXCLUDE_FROM_REMEDIATION
from ansible_collections.nmo.maintenance.plugins.module_utils.model.window import window_end
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import run as runs
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows.info import describe, missing


def entry(planned, report):
    return {**planned.as_dict(), "report": report}


def core(client, params):
    if params["run_id"]:
        runs.validate_id(params["run_id"])
    if not params["node"] and params["nodes"] is None:
        raise InputError("give node (one node) or nodes (several)")
    ordering.validate(params["order"], params["order_key"])
    end = window_end(params["window_end"], "window_end")
    window = planner.Window(end, params["window_end"]) if end is not None else None
    now = datetime.now(timezone.utc)  # the controller's clock, as the window was given on it

    def plan_of(name, report):
        return planner.plan_node(name, report, params["run_id"], params["campaign"], window, now)

    if params["node"]:
        report = params["report"]
        if report is None:
            report = describe(client, params["node"], label_key=params["label_key"], events_limit=0)[0]
        # planned_at: when the node's turn began (the summary's seconds count from it)
        return {"changed": False, **entry(plan_of(params["node"], report), report), "planned_at": now.timestamp()}
    order_used, key = ordering.resolve(params["order"], params["order_key"], params["budgets"])
    keep = (key,) if order_used != ordering.INVENTORY else ()
    reports = describe(client, label_key=params["label_key"], events_limit=0, only=params["nodes"], keep_labels=keep)
    by_name = {r["node"]: r for r in reports}
    plans = {name: entry(plan_of(name, by_name.get(name, {})), by_name.get(name, {}))
             for name in params["nodes"]}
    labels = {r["node"]: r.get("labels") or {} for r in reports}
    created = {r["node"]: r.get("created") or "" for r in reports}
    order = ordering.ordered(params["nodes"], labels, created, order_used, key)
    domains = ordering.domains(order, labels, key) if keep else []
    order = rollout.places_first(order, {n: p["resume"] for n, p in plans.items()},
                                 {n: rollout.holds_places(r) for n, r in by_name.items()})
    return {"changed": False, "plans": plans, "missing": missing(params["nodes"], reports), "order": order,
            "turns": {name: index for index, name in enumerate(order)},
            "domains": domains, "order_used": order_used, "order_key_used": key,
            "reordered": order != list(dict.fromkeys(params["nodes"]))}


ARGUMENT_SPEC = {
    "node": {"type": "str"},
    "nodes": {"type": "list", "elements": "str"},
    "report": {"type": "dict"},
    "run_id": {"type": "str", "default": ""},
    "campaign": {"type": "str", "default": ""},
    "window_end": {"type": "str", "default": ""},
    "label_key": {"type": "str", "default": EXCLUDE_FROM_REMEDIATION, "no_log": False},
    "order": {"type": "str", "choices": list(ordering.ORDERS), "default": ordering.INVENTORY},
    "order_key": {"type": "str", "default": ordering.ZONE_KEY, "no_log": False},
    "budgets": {"type": "list", "elements": "raw", "default": []},
}


def main():
    run(ARGUMENT_SPEC, core)


if __name__ == "__main__":
    main()
