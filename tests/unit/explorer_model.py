"""The model explorer's world (docs/reliability.md): nodes in zones, runs, leases and records as
the cluster holds them, and each node's begin decided by the collection's own rules.

The model keeps what the world is (which node is in maintenance, kept after a failure,
quarantined, cordoned by an administrator; which runs are alive and which stopped) and builds
from it, at each begin, what the begin would read: the leases namespace (slots, zone places,
node leases, run leases with their stop mark), the nodes (cordoned? Ready?) and the progress
records. The decision then comes from the rules themselves, composed as
``workflows/disruption.py`` composes them: ``leases.plan_slot`` over a family,
``topology_budgets.disrupted`` for the nodes counted without a place, ``rollout.state_of`` and
``rollout.decide``. The invariants are about the world the model keeps, not about the rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.nmo.maintenance.plugins.module_utils.model import leases, rollout, topology_budgets
from ansible_collections.nmo.maintenance.plugins.module_utils.model.marks import MAINTAINED_BY, QUARANTINED
from ansible_collections.nmo.maintenance.plugins.module_utils.model.record import Record

NOW = datetime(2026, 12, 5, 12, 0, 0, tzinfo=timezone.utc)
PREFIX = "m"
ZONE = "topology.kubernetes.io/zone"

IDLE, IN, KEPT, QUARANTINE, ADMIN, DONE = "idle", "in", "kept", "quarantined", "admin", "done"
OUT_OF_SERVICE = (IN, KEPT, QUARANTINE, ADMIN)  # cordoned, whoever did it


@dataclass
class Node:
    name: str
    zone: str
    state: str = IDLE
    run: str = ""  # the run that holds it (IN, KEPT)
    leases: bool = False  # its leases still valid (IN, KEPT); lapsed ones are gone
    slot: int = -1
    place: int = -1
    failed_run: str = ""
    failed_phase: str = ""


@dataclass
class World:
    zones: int
    concurrency: int
    budget: Optional[int]
    nodes: Dict[str, Node] = field(default_factory=dict)
    alive: List[str] = field(default_factory=list)
    stopped: Dict[str, str] = field(default_factory=dict)  # run -> "<node>/<phase>"

    # -- what the begin reads ------------------------------------------------------------------
    def family(self, zone: str) -> str:
        return f"{PREFIX}-zone-{zone}"

    def lease(self, name: str, holder: str, run: str, labels: Dict[str, str]) -> Dict[str, Any]:
        return {"metadata": {"name": name, "namespace": leases.LEASE_NAMESPACE, "resourceVersion": "1",
                             "annotations": {leases.RUN_ANNOTATION: run}, "labels": dict(labels)},
                "spec": {"holderIdentity": holder, "renewTime": leases.format_time(NOW), "leaseDurationSeconds": 3600,
                         "acquireTime": leases.format_time(NOW)}}

    def seen(self) -> List[Dict[str, Any]]:
        out = []
        for run in self.alive:
            lease = self.lease(leases.RUN_LEASE_PREFIX + run, run, run, {})
            lease["spec"]["leaseDurationSeconds"] = 60
            if run in self.stopped:
                lease["metadata"]["annotations"][rollout.STOPPED_AFTER] = self.stopped[run]
            out.append(lease)
        for node in self.nodes.values():
            if not node.leases:
                continue
            out.append(self.lease(leases.slot_name(PREFIX, node.slot), node.name, node.run, leases.SLOT_LABELS))
            out.append(self.lease(leases.node_lease_name(node.name), leases.HOLDER, node.run, {}))
            if node.place >= 0:
                place = self.lease(leases.slot_name(self.family(node.zone), node.place), node.name, node.run,
                                   leases.SLOT_LABELS)
                place["metadata"]["annotations"][leases.BUDGET_ANNOTATION] = f"zone {node.zone}"
                out.append(place)
        return out

    def node_obj(self, node: Node) -> Dict[str, Any]:
        annotations = {MAINTAINED_BY: "nmo.maintenance"} if node.state in (IN, KEPT, QUARANTINE) else {}
        labels = {ZONE: node.zone, **({QUARANTINED: "true"} if node.state == QUARANTINE else {})}
        return {"metadata": {"name": node.name, "labels": labels, "annotations": annotations},
                "spec": {"unschedulable": True} if node.state in OUT_OF_SERVICE else {},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]}}

    def records(self) -> Dict[str, Record]:
        out = {}
        for node in self.nodes.values():
            if node.state in (IN, KEPT) or node.failed_run:
                out[node.name] = Record(run=node.run or node.failed_run, phase="work",
                                        failure="boom" if node.failed_run else "", failed_phase=node.failed_phase,
                                        failed_run=node.failed_run)
        return out

    # -- the begin, as workflows/disruption.py composes the rules ------------------------------------
    def decide(self, name: str, run: str) -> Tuple[rollout.Decision, Dict[str, Any]]:
        """The scheduler's word for ``name``'s begin in ``run``, and what was looked at."""
        seen = self.seen()
        records = self.records()
        state = rollout.state_of(seen, run, NOW, PREFIX, records)
        first = rollout.decide(name, state, [])
        if first.action != rollout.BEGIN or name in state.holders:
            return first, {}
        node = self.nodes[name]
        alive = leases.alive_run_ids(seen, NOW)
        busy = {leases.holder(s) for s in seen if (s["metadata"].get("labels") or {}) == leases.SLOT_LABELS}
        busy |= {other for s in seen if (other := leases.node_of_lease_name(s["metadata"]["name"]))}
        if self.budget is not None:
            budget = topology_budgets.parse([{"topology_key": ZONE, "max": self.budget}])[0]
            domain = topology_budgets.Domain(budget, node.zone, self.family(node.zone))
            members = [self.node_obj(n) for n in self.nodes.values() if n.zone == node.zone]
            family = leases.slots_of(seen, domain.family)
            placed = {leases.holder(s) for s in family}
            disrupted = topology_budgets.disrupted(members, name, placed, busy)
            limit = topology_budgets.limit(domain, len(members))
            plan = leases.plan_slot(family, name, domain.family, limit, NOW, run, alive, len(disrupted))
            if plan.blocked:
                out = [rollout.OutOfService.of(self.node_obj(self.nodes[n]), n in busy) for n in disrupted]
                blockers = [leases.holder(s) for s in plan.blockers]
                return rollout.decide(name, state, blockers, limit, out, domain.describe()), {
                    "domain": node.zone, "limit": limit, "blockers": blockers, "out": disrupted}
            place = plan.candidates[0][0] if plan.candidates else ""
        else:
            place = ""
        slots = leases.slots_of(seen, PREFIX)
        plan = leases.plan_slot(slots, name, PREFIX, self.concurrency, NOW, run, alive)
        if plan.blocked:
            blockers = [leases.holder(s) for s in plan.blockers]
            return rollout.decide(name, state, blockers, self.concurrency, [], "the slots"), {
                "domain": "", "limit": self.concurrency, "blockers": blockers, "out": []}
        slot = plan.candidates[0][0] if plan.candidates else ""
        return rollout.Decision(rollout.BEGIN), {"slot": slot, "place": place}

    def take(self, name: str, run: str, looked: Dict[str, Any]) -> None:
        node = self.nodes[name]
        node.state, node.run, node.leases = IN, run, True
        node.failed_run = node.failed_phase = ""
        node.slot = int(looked["slot"].rsplit("-", 1)[1]) if looked.get("slot") else node.slot
        node.place = int(looked["place"].rsplit("-", 1)[1]) if looked.get("place") else -1

    def free_slot(self) -> int:
        taken = {n.slot for n in self.nodes.values() if n.leases}
        return next(i for i in range(len(self.nodes) + self.concurrency) if i not in taken)

    # -- what the world counts --------------------------------------------------------------------
    def out_in_zone(self, zone: str) -> List[str]:
        return sorted(n.name for n in self.nodes.values() if n.zone == zone and n.state in OUT_OF_SERVICE)

    def in_maintenance(self) -> List[str]:
        return sorted(n.name for n in self.nodes.values() if n.leases)

    def stuck(self, name: str) -> bool:
        """Nothing in flight will put ``name`` back in service: quarantined, an administrator's,
        kept by a run that is gone, or cordoned with no lease of a run that is gone."""
        node = self.nodes[name]
        if node.state in (QUARANTINE, ADMIN):
            return True
        return node.state in (IN, KEPT) and node.run not in self.alive and (node.state == KEPT or not node.leases)
