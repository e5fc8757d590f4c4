"""Pre-flight: what would block the maintenance of some nodes, found before any is touched.

Reads that scale with the nodes judged, not with the cluster (stores/preflight_reads.py: the nodes, the pods
of the judged nodes, the PodDisruptionBudgets, the pods of a bounded number of candidate
homes), then one server-side dry-run eviction (``dryRun=All``, nothing is written) per pod to evict, in
parallel. Each node's pods are sorted by the drain's own filters (``pod_filters``), so the
pre-flight and the drain agree on every pod. A node is ``no-go`` when its drain would not
finish by itself: a pod guarded by a drain option that is off, a PodDisruptionBudget that
can never allow the eviction, a workload whose replacements would come back to the node
(its pods tolerate the maintenance taints, model/returning.py), or replacement pods that would find no room while the node
and the others of its batch (``concurrency`` nodes, in the order given, as the role's
``serial`` batches go) are out. A budget that refuses only for now makes it ``warn``: the
drain waits for it. Each batch's capacity is judged from the cluster as it is now.

The node itself is judged as the begin judges it, without writing (``judge_node``): the
names made from it (its NodeMaintenance, ``maintenance_names`` honoured, and its node
lease) must be valid names, a control-plane node must pass the etcd quorum guard (one that
can never pass it, such as the only etcd member, is a no-go; one that must wait for another
member a warning), and the node must be Ready (a NotReady or unreachable node has no kubelet
to finish the evictions; a warning only when the drain lets terminating pods go, and so
goes on without it: pod_filters.lets_terminating_go).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional, Tuple

from ..api.client import Client
from ..errors import ApiError, InputError
from ..model import budgets, drain_rules, kubevirt, leases, returning, stuck_pods, surge, validation
from ..model.drain_spec import PodSelection, Selection
from ..model.marks import is_control_plane, not_ready, not_ready_refusal
from ..model.placement import Placement, place, show_requests, static_misfit, unjudged
from ..model.pod_filters import (
    COMPLETE,
    DELETE,
    EVICT,
    REFUSE,
    SKIP,
    WAIT,
    PodPlan,
    SelectionOptions,
    classify,
    controller_of,
    is_finished,
    lets_terminating_go,
    letting_go,
)
from ..stores import kubevirt as kubevirt_preflight
from ..stores import maintenance, workloads
from ..stores.preflight_reads import Snapshot, candidates, namespace_labels
from . import etcd_guard
from .dry_run import ALLOWED, FAILED, REFUSED, DryRun, dry_run_all

__all__ = ["Snapshot", "PreflightOptions", "preflight"]

GO, WARN, NO_GO = "go", "warn", "no-go"
GO_MIGRATE = "go (migrate)"  # kubevirt=migrate: blocked VM pods the drain live-migrates
_NAMED_BUDGET = re.compile(r"disruption budget (\S+) needs")

Obj = Dict[str, Any]


@dataclass(frozen=True)
class PreflightOptions(Selection):
    """A pre-flight's options: the drain's selection (drain_spec.Selection, its fields and
    defaults) and the nodes it judges."""
    nodes: Tuple[str, ...] = ()  # required by nmo_preflight; validate() refuses an empty one
    concurrency: int = 1
    maintenance_names: Optional[Dict[str, str]] = None  # node -> its NodeMaintenance's name, when not the default
    etcd: etcd_guard.Options = field(default_factory=etcd_guard.Options)

    @classmethod
    def from_params(cls, params: Dict[str, Any]) -> PreflightOptions:
        names = [f for f in cls.__dataclass_fields__ if f not in ("nodes", "etcd") and params.get(f) is not None]
        etcd = etcd_guard.Options(*(params.get(k) or getattr(etcd_guard.Options(), a) for k, a in (
            ("etcd_guard", "flavour"), ("etcd_pod_selector", "member_selector"), ("etcd_pod_namespace", "pod_namespace"),
            ("etcd_guard_namespace", "guard_namespace"))))
        given = {f: params[f] for f in names}
        if "maintenance_names" in given:  # the role passes "" for a node with the default name
            given["maintenance_names"] = {n: v for n, v in given["maintenance_names"].items() if v} or None
        return cls(nodes=tuple(params.get("nodes") or ()), etcd=etcd, **given)

    def selection(self, now: Optional[float] = None) -> SelectionOptions:
        return SelectionOptions.of(self, now)

    def validate(self) -> None:
        v = validation
        problems = []
        # A name that cannot be a node's is judged like a missing node (a no-go with its
        # reason), so that node_maintenance_preflight=warn still goes on with the others.
        if not self.nodes or not all(isinstance(n, str) for n in self.nodes):
            problems.append(f"nodes: {list(self.nodes)!r} must be a non-empty list of node names")
        elif len(set(self.nodes)) != len(self.nodes):
            twice = sorted({n for n in self.nodes if self.nodes.count(n) > 1})
            problems.append("nodes lists a node twice: " + ", ".join(twice))
        try:
            v.problems(lambda: v.number(self.concurrency, "concurrency", 1, v.MAX_CONCURRENCY, "nodes", integer=True),
                       *self.checks(),  # the drain options' own (drain_spec.Selection.checks)
                       lambda: drain_rules.parse_rules(self.rules),
                       lambda: v.one_of(self.etcd.flavour, "etcd_guard", etcd_guard.FLAVOURS),
                       lambda: v.label_selector(self.etcd.member_selector, "etcd_pod_selector"),
                       lambda: v.namespace(self.etcd.pod_namespace, "etcd_pod_namespace"),
                       lambda: v.namespace(self.etcd.guard_namespace, "etcd_guard_namespace"),
                       *[lambda n=n, name=name: v.dns_subdomain(name, f"maintenance_names[{n}]", "NodeMaintenance name")
                         for n, name in (self.maintenance_names or {}).items()])
        except InputError as exc:
            problems.append(exc.message)
        if problems:
            raise InputError("; ".join(problems))
        self.selection()  # the selection is made once here: what it parses fails before any request


# -- one node's report -------------------------------------------------------------------------
@dataclass
class NodeReport:
    node: str
    found: bool = True
    plans: List[PodPlan] = field(default_factory=list)
    evictions: List[Dict[str, Any]] = field(default_factory=list)
    budgets: Dict[str, budgets.BudgetView] = field(default_factory=dict)
    blockers: List[str] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)
    batch: List[str] = field(default_factory=list)
    placements: List[Placement] = field(default_factory=list)
    migrations: List[str] = field(default_factory=list)  # VM pods the drain will live-migrate
    # the blockers that are not the drain's (the begin refuses them, or capacity): a node with
    # no other blocker is one whose drain would not finish (model/blocked.py, docs/design.md §18.4)
    refusals: List[str] = field(default_factory=list)

    def refuse(self, reason: str) -> None:
        self.blockers.append(reason)
        self.refusals.append(reason)

    def of(self, action: str) -> List[PodPlan]:
        return [p for p in self.plans if p.action == action]

    @property
    def verdict(self) -> str:
        return NO_GO if self.blockers else WARN if self.warnings else GO_MIGRATE if self.migrations else GO

    def line(self) -> str:
        evict, delete = len(self.of(EVICT)), len(self.of(DELETE))
        if not self.found:
            return self.blockers[0]
        counts = f"{evict} to evict" + (f", {delete} to delete" if delete else "")
        batches = self.batches()
        if len(batches) > 1:
            counts += f" in {len(batches)} order batches ({', '.join(str(b['order']) for b in batches)})"
        if self.blockers:
            more = f" (+{len(self.blockers) - 1} more)" if len(self.blockers) > 1 else ""
            return f"{counts}; {self.blockers[0]}{more}"
        if self.warnings:
            more = f" (+{len(self.warnings) - 1} more)" if len(self.warnings) > 1 else ""
            return f"{counts}; {self.warnings[0]}{more}"
        if self.migrations:
            return f"{counts}; {len(self.migrations)} VM(s) to live-migrate: {self.migrations[0]}" + (
                f" (+{len(self.migrations) - 1} more)" if len(self.migrations) > 1 else "")
        placed = [p for p in self.placements if p.node]
        where = f"; {len(placed)} replacement(s) fit elsewhere" if placed else ""
        return f"{counts}{', all allowed now' if evict else ''}{where}"

    def batches(self) -> List[Dict[str, Any]]:
        """The order batches of the pods the drain takes, lowest first (drain rules)."""
        orders: Dict[int, List[str]] = {}
        for p in self.plans:
            if p.action in (EVICT, DELETE, WAIT):
                orders.setdefault(p.order, []).append(p.key)
        return [{"order": o, "pods": sorted(keys)} for o, keys in sorted(orders.items())]

    def as_dict(self) -> Dict[str, Any]:
        pending = [p.brief() for p in self.placements if not p.node]
        needed: Dict[str, int] = {}
        for p in self.placements:
            for k, v in p.requests.items():
                needed[k] = needed.get(k, 0) + v
        return {
            "node": self.node, "found": self.found, "verdict": self.verdict, "summary": self.line(),
            "blockers": self.blockers, "warnings": self.warnings, "migrations": self.migrations,
            "to_evict": self.evictions, "to_delete": [p.brief() for p in self.of(DELETE)],
            "to_wait": [p.brief() for p in self.of(WAIT)], "skipped_pods": [p.brief() for p in self.of(SKIP)],
            "refused": [p.brief() for p in self.of(REFUSE)],
            "batches": self.batches(), "to_wait_completed": [p.brief() for p in self.of(COMPLETE)],
            "do_not_disrupt": [{**p.brief(), "annotation": p.blocked} for p in self.plans if p.blocked],
            "pdbs": [self.budgets[k].brief() for k in sorted(self.budgets)],
            "capacity": {"batch": self.batch, "replacements": len(self.placements),
                         "requests": show_requests(needed) + f", pods {needed.get('pods', 0)}",
                         "fits": not pending, "pending": pending,
                         "placed": [p.brief() for p in self.placements if p.node]},
        }


def judge_names(report: NodeReport, maintenance_name: Optional[str]) -> None:
    """The names the begin makes from the node: refused there before any write, so a no-go here."""
    made = [(leases.node_lease_name(report.node), "its node lease")]
    if not maintenance_name:
        made.insert(0, (maintenance.default_name(report.node), "its NodeMaintenance"))
    for name, what in made:
        try:
            validation.derived_name(name, "node", report.node)
        except InputError as exc:
            report.refuse(f"{what} cannot be made: {exc.message} (the begin refuses it before any write)")


def judge_readiness(report: NodeReport, node: Obj, opts: PodSelection) -> None:
    """A node whose kubelet does not answer: its evicted pods are never deleted by it."""
    state = not_ready(node)
    if state is None:
        return
    if lets_terminating_go(opts):
        report.warnings.append(f"node {report.node} is {state}: evictions there wait for a kubelet that is not "
                               f"there to stop the pods; the drain stops waiting for each after {letting_go(opts)}")
    else:
        report.refuse(not_ready_refusal(report.node, state))


def judge_etcd(client: Client, reports: List[NodeReport], nodes: Dict[str, Obj], opts: PreflightOptions) -> None:
    """The etcd quorum guard of the begin, read the same way, for each control-plane node: one
    that can never pass it (the only member, say) is a no-go; one that must wait, a warning."""
    judged = [r for r in reports if r.found and is_control_plane(nodes[r.node])]
    if not judged or opts.etcd.flavour == "none":
        return
    flavour = etcd_guard.detect(client, opts.etcd)
    for report in judged:
        verdict = etcd_guard.verdict(client, report.node, flavour, opts.etcd, set())
        if verdict.warning:
            report.warnings.append(verdict.warning)
        if verdict.allowed:
            continue
        if verdict.never:
            report.refuse(f"{verdict.reason} (the begin refuses it before any write)")
        else:
            report.warnings.append(f"{verdict.reason} (the begin waits for it)")


def judge_options(report: NodeReport) -> None:
    for plan in report.of(REFUSE):
        if not plan.options:  # a drain label that cannot be read
            report.blockers.append(f"{plan.key}: {plan.reason}")
            continue
        allow = " and ".join(f"{o}=true" for o in plan.options)
        report.blockers.append(f"{plan.key} needs {allow}: {plan.reason}")


def judge_rules(report: NodeReport) -> None:
    """Drain rules: a do-not-disrupt pod is a no-go (the drain never evicts it and would wait
    for it until its timeout); a pod waited for until it completes is a warning (the drain
    waits for it, within its timeout)."""
    for plan in report.plans:
        if plan.blocked:
            report.blockers.append(f"{plan.key} is annotated {plan.blocked} (do-not-disrupt): never evicted, it "
                                   "blocks the drain as a PodDisruptionBudget that allows nothing would, until the "
                                   "annotation is removed or the drain times out")
        elif plan.action == COMPLETE:
            report.warnings.append(f"{plan.key} is waited for until it completes ({plan.rule or 'wait-completed'}), "
                                   "within the drain's timeout: the drain does not evict it")


def judge_holds(report: NodeReport, pods: Dict[str, Obj], node: Obj, now: float) -> None:
    """Pods that would not leave by themselves (stuck_pods.py): one being deleted and held (a
    finalizer, a node without its kubelet) is a warning, the drain waits for it; one to evict
    that carries a finalizer no Kubernetes controller removes, a warning too, naming it."""
    state = not_ready(node)
    for plan in report.plans:
        pod = pods[plan.key]
        if plan.action == WAIT:
            text = stuck_pods.held(pod, report.node, state, now)
            if text:
                report.warnings.append(f"{plan.key} is {text}" if text.startswith("held") else f"{plan.key}: {text}")
        elif plan.action == EVICT and not plan.blocked and state is None:
            own = stuck_pods.own_finalizers(pod)
            if own:
                report.warnings.append(f"{plan.key} has {stuck_pods.finalizer_text(own)}: once evicted it stays "
                                       "(Terminating) until that is removed, and the drain waits for it")


def judge_returning(report: NodeReport, pods: Dict[str, Obj]) -> None:
    """A no-go for each workload whose replacements the scheduler would put back on the node:
    its pods tolerate both maintenance taints, so the cordon does not keep them off, and the
    drained node, the emptiest, draws them. The drain would evict them again a few times
    (its bound on returning pods, model/returning.py) and then fail: not a drain that finishes
    by itself."""
    by_workload: Dict[str, List[str]] = {}
    why: Dict[str, str] = {}
    for plan in report.plans:
        pod = pods[plan.key]
        if plan.action in (EVICT, DELETE) and not plan.blocked and not is_finished(pod) and returning.may_come_back(pod):
            name = returning.workload(pod)
            by_workload.setdefault(name, []).append(plan.key)
            why[name] = returning.letting_in(pod) or ""
    for name, keys in sorted(by_workload.items()):
        report.blockers.append(
            f"replacements of {returning.names_text(keys)} ({name}) would come back to the node: its pods {why[name]}, "
            "so the cordon does not keep them off; the drain would evict them again and fail. Keep the workload "
            "off the node (a toleration without the maintenance taints, a node affinity) or scale it down first")


def judge_eviction(report: NodeReport, plan: PodPlan, pod: Obj, answer: DryRun, known: budgets.Budgets,
                   vm: Optional[kubevirt.Verdict] = None, surged: Optional[surge.Verdict] = None,
                   surge_on: bool = False) -> None:
    """One pod to evict, by its dry-run answer. A refused pod says whether surge-first would free
    it (``surged``, model/surge.py): with ``surge_on`` such a pod is a warning, never a blocker."""
    guarding = known.guarding(pod)
    views = [known.view(b) for b in guarding]
    for v in views:
        report.budgets[f"{v.namespace}/{v.name}"] = v
    names = ", ".join(f"{v.namespace}/{v.name}" for v in views) or "none found"
    entry = {**plan.brief(), "dry_run": answer.answer, "pdbs": [f"{v.namespace}/{v.name}" for v in views]}
    if answer.answer != ALLOWED:
        entry["message"] = " ".join((answer.message,) + answer.causes).strip()
    report.evictions.append(entry)
    if answer.answer == REFUSED:
        named = {m.group(1) for m in map(_NAMED_BUDGET.search, answer.causes + (answer.message,)) if m}
        refusing = [v for v in views if v.name in named] or views  # the server names it; else every match
        never = [v for v in refusing if v.never]
        names = ", ".join(f"{v.namespace}/{v.name}" for v in refusing) or names
        if vm is not None and vm.action != kubevirt.BLOCKED:  # kubevirt=migrate moves it
            report.migrations.append(kubevirt_preflight.note(plan.key, vm))
        elif vm is not None:
            report.blockers.append(f"{plan.key} is refused by PDB {names} and cannot be live-migrated: {vm.why}")
        elif never and surged is not None and surged.can and surge_on:
            v = never[0]
            report.warnings.append(f"{plan.key} is refused by PDB {v.namespace}/{v.name}, which can never allow it: "
                                   f"{v.never}; the drain surges it ({surged.why})")
        elif never:
            v = never[0]
            report.blockers.append(f"{plan.key} is refused by PDB {v.namespace}/{v.name}, which can never allow it: "
                                   f"{v.never}" + surge_hint(surged, surge_on))
        else:
            unhealthy = [n for n in (stuck_pods.unhealthy_budget(b, stuck_pods.is_ready(pod)) for b in guarding
                                     if any(v.name == b["metadata"]["name"] for v in refusing)) if n]
            if unhealthy:
                entry["why"] = unhealthy[0]
            report.warnings.append(f"{plan.key} is refused now by PDB {names} (the drain waits for it): "
                                   f"{entry['message']}" + (f"; {unhealthy[0]}" if unhealthy else "")
                                   + surge_hint(surged, surge_on))
        if surged is not None:
            entry["surge"] = {"would_free": surged.can, "why": surged.why}
    elif answer.answer == FAILED:
        report.blockers.append(f"{plan.key}: the dry-run eviction failed with {answer.status}: {answer.message}")


def surge_hint(surged: Optional[surge.Verdict], surge_on: bool) -> str:
    """What surge-first would do for a refused pod, as the tail of its line."""
    if surged is None:
        return ""
    if surged.can:
        return f"; the drain surges it ({surged.why})" if surge_on else f"; surge: true would free it ({surged.why})"
    return f"; {surged.why}"


def surge_verdicts(client: Client, refused: List[Obj]) -> Dict[str, surge.Verdict]:
    """Whether surge-first would free each refused pod: its ReplicaSet and Deployment read once
    per ReplicaSet (model/surge.py); nothing is read when no pod is refused."""
    by_owner: Dict[Tuple[str, str], surge.Verdict] = {}
    out: Dict[str, surge.Verdict] = {}
    for pod in refused:
        meta = pod["metadata"]
        ref = controller_of(pod) or {}
        owner = (meta.get("namespace", ""), f"{ref.get('kind')}/{ref.get('name')}")
        if owner not in by_owner or ref.get("kind") != "ReplicaSet":
            try:
                by_owner[owner] = workloads.judge(client, pod)
            except ApiError as exc:
                by_owner[owner] = surge.Verdict(False, f"surge cannot be judged: {exc.message}")
        out[f"{meta.get('namespace', '')}/{meta['name']}"] = by_owner[owner]
    return out


def needs_room(plan: PodPlan, pod: Obj) -> bool:
    """A replacement will be created for it: evicted or deleted while running, with a controller."""
    ref = controller_of(pod)
    return (plan.action in (EVICT, DELETE) and not plan.blocked and not is_finished(pod) and ref is not None
            and ref.get("kind") != "DaemonSet")


def _fits_statically(pod: Obj, room: Any, out: Any) -> bool:
    return not static_misfit(pod, room, out)


def place_batch(movers: List[Obj], rooms: List[Any], out: Any, snapshot: Snapshot) -> List[Placement]:
    """Place the batch's replacements; while some would stay Pending and unread nodes could
    take them, read those nodes' pods (growing chunks, within the snapshot's read limit)
    and place again. ``rooms`` are the cluster as it is now (learnt rooms stay learnt):
    ``snapshot.rooms()``, which lists further pages of nodes into it only until a chunk of
    candidates is found, and to the end only when a pod would stay Pending (its message
    counts every node). The nodes listed so far are the first in name order, so the
    candidates read are those a listing of every node would give."""
    chunk = max(16, 2 * len(movers))
    while True:
        placements = place(movers, [room.copy() for room in rooms], out)
        pending_keys = {(pl.namespace, pl.name) for pl in placements if not pl.node}
        if not pending_keys:
            return placements
        if not snapshot.left_to_read():
            if snapshot.every_node_listed:
                return placements
            snapshot.all_rooms()
            continue
        pending = [p for p in movers if (p["metadata"].get("namespace", ""), p["metadata"]["name"]) in pending_keys]
        wanted = candidates(rooms, pending, out, _fits_statically)
        while len(wanted) < chunk and snapshot.more_rooms():
            wanted = candidates(rooms, pending, out, _fits_statically)
        if not wanted:
            return placements
        snapshot.learn(wanted[:chunk])
        chunk *= 2


def judge_capacity(reports: List[NodeReport], pods: Dict[str, Obj], snapshot: Snapshot, concurrency: int) -> None:
    found = [r for r in reports if r.found]
    rooms: Optional[List[Any]] = None  # every node, read only when a replacement needs a home
    for start in range(0, len(found), concurrency):
        batch = found[start:start + concurrency]
        out = {r.node for r in batch}
        movers = [(r, pods[p.key]) for r in batch for p in r.plans if needs_room(p, pods[p.key])]
        if movers and rooms is None:
            rooms = snapshot.rooms()
        placements = place_batch([mover[1] for mover in movers], rooms, out, snapshot) if rooms else []
        by_key = {f"{pl.namespace}/{pl.name}": pl for pl in placements}
        for r in batch:
            r.batch = sorted(out)
        for r, pod in movers:
            pl = by_key[f"{pod['metadata'].get('namespace', '')}/{pod['metadata']['name']}"]
            r.placements.append(pl)
            if not pl.node:
                r.refuse(f"{pl.namespace}/{pl.name} would stay Pending ({show_requests(pl.requests)}): {pl.reason}")
            notes = unjudged(pod)
            if notes:
                r.warnings.append(f"{pl.namespace}/{pl.name} has {' and '.join(notes)}, not judged by the "
                                  "capacity check")


def reasons(reports: List[NodeReport]) -> Dict[str, List[str]]:
    """Every reason of each node that is not a plain go, keyed "node (verdict)", for the play to print."""
    return {f"{r.node} ({r.verdict})": r.blockers + r.warnings + r.migrations for r in reports if r.verdict != GO}


def table(reports: List[NodeReport]) -> List[str]:
    width = max([len("node")] + [len(r.node) for r in reports])
    column = max([len("verdict")] + [len(r.verdict) for r in reports])
    lines = [f"{'node':<{width}}  {'verdict':<{column}}  why"]
    lines += [f"{r.node:<{width}}  {r.verdict:<{column}}  {r.line()}" for r in reports]
    return lines


def preflight(client: Client, opts: PreflightOptions) -> Dict[str, Any]:
    started, first_request = time.monotonic(), client.requests
    opts.validate()
    snapshot = Snapshot.read(client, opts.nodes, opts.requests_at_once())
    selection = opts.selection(time.time())
    if selection.needs_namespaces():  # a rule's namespace_selector: one read of each namespace of the judged pods
        selection = replace(selection, namespace_labels=namespace_labels(
            client, [p.get("metadata", {}).get("namespace", "") for pods_of in snapshot.pods_by_node.values()
                     for p in pods_of]))
    reports: List[NodeReport] = []
    pods: Dict[str, Obj] = {}
    for name in opts.nodes:
        report = NodeReport(name)
        reports.append(report)
        if name not in snapshot.nodes:
            report.found = False
            try:
                validation.node_name(name)
                report.refuse(f"node {name!r} not found in cluster")
            except InputError as exc:
                report.refuse(f"not found in cluster: {exc.message}")
            continue
        judge_names(report, (opts.maintenance_names or {}).get(name))
        judge_readiness(report, snapshot.nodes[name], opts)
        for pod in snapshot.pods_by_node.get(name, []):
            plan = classify(pod, selection)
            report.plans.append(plan)
            pods[plan.key] = pod
        judge_options(report)
        judge_rules(report)
        judge_holds(report, pods, snapshot.nodes[name], time.time())
        judge_returning(report, pods)
    judge_etcd(client, reports, snapshot.nodes, opts)
    evicting = [p for r in reports for p in r.of(EVICT) if not p.blocked]
    answers = dry_run_all(client, evicting, opts.requests_at_once(len(evicting)))
    vms = kubevirt_preflight.verdicts(client, opts.kubevirt, [pods[k] for k, a in answers.items() if a.answer == REFUSED])
    # a VM's pod is KubeVirt's to move (kubevirt: migrate), never a Deployment's to surge
    surges = surge_verdicts(client, [pods[k] for k, a in answers.items() if a.answer == REFUSED and k not in vms
                                     and not kubevirt.is_launcher(pods[k])])
    for report in reports:
        for plan in (p for p in report.of(EVICT) if not p.blocked):
            judge_eviction(report, plan, pods[plan.key], answers[plan.key], snapshot.budgets, vms.get(plan.key),
                           surges.get(plan.key), opts.surge)
    judge_capacity(reports, pods, snapshot, opts.concurrency)
    blocked = [r.node for r in reports if r.verdict == NO_GO]
    summary = (f"no-go: {len(blocked)} of {len(reports)} node(s) blocked: {', '.join(blocked)}" if blocked
               else f"go: none of {len(reports)} node(s) is blocked")
    return {"changed": False, "go": not blocked, "summary": summary, "blocked": blocked,
            "drain_blocked": [r.node for r in reports if r.verdict == NO_GO and not r.refusals],
            "table": table(reports), "nodes": [r.as_dict() for r in reports], "reasons": reasons(reports),
            "elapsed": round(time.monotonic() - started, 3), "api_requests": client.requests - first_request,
            "reads": {"pods_of_judged_nodes": snapshot.how, "every_node_listed": snapshot.every_node_listed,
                      "nodes_read": snapshot.nodes_known,
                      "candidate_nodes_read": len(snapshot.reads),
                      "candidate_read_limit": snapshot.left_to_read() + len(snapshot.reads)
                      if snapshot.node_pages is None or snapshot.node_pages.listed else 0}}
