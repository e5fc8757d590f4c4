"""Would a node's evicted pods find room elsewhere? Judged without the scheduler.

The predicates are the scheduler's filters that depend only on the pod and the node:
node selector, required node affinity (``matchExpressions`` and ``matchFields``), taints
with effect NoSchedule or NoExecute against the pod's tolerations, cordoned and not-Ready
nodes, and the pod's CPU, memory and pod-count requests against what the node has left.
Placement is greedy, largest pods first, each on the feasible node that stays least
allocated (the scheduler's default scoring); a pod that fits nowhere would stay Pending.
Pod (anti-)affinity and topology spread depend on other pods' placement and are not
judged: the pods that have them are named instead.

A node whose pods were not read (``known`` false: the pre-flight reads the pods of a
bounded number of candidate nodes, see stores/preflight_reads.py) is never a home: what it has left is not
known, so the answer errs towards Pending (blocked), never towards fits.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

from .marks import is_ready
from .pod_filters import is_finished
from .quantity import CPU, MEMORY, PODS, amount, amounts, show
from .returning import tolerates

Obj = Dict[str, Any]
RESOURCES = (CPU, MEMORY, PODS)
SCHEDULING_EFFECTS = ("NoSchedule", "NoExecute")


# -- requests and room ------------------------------------------------------------------------
def _add(total: Dict[str, int], more: Dict[str, int]) -> None:
    for name in (CPU, MEMORY):
        total[name] = total.get(name, 0) + more.get(name, 0)


def pod_requests(pod: Obj) -> Dict[str, int]:
    """CPU (millicores), memory (bytes) and one pod slot, as the scheduler counts a pod:
    containers and sidecars add up, a plain init container only needs to fit on its own."""
    spec = pod.get("spec", {})
    total: Dict[str, int] = {CPU: 0, MEMORY: 0}
    for container in spec.get("containers") or []:
        _add(total, amounts((container.get("resources") or {}).get("requests")))
    sidecars: Dict[str, int] = {CPU: 0, MEMORY: 0}
    init_peak: Dict[str, int] = {CPU: 0, MEMORY: 0}
    for container in spec.get("initContainers") or []:
        req = amounts((container.get("resources") or {}).get("requests"))
        if container.get("restartPolicy") == "Always":
            _add(sidecars, req)
            continue
        for name in (CPU, MEMORY):
            init_peak[name] = max(init_peak[name], req.get(name, 0) + sidecars[name])
    _add(total, sidecars)
    for name in (CPU, MEMORY):
        total[name] = max(total[name], init_peak[name])
    _add(total, amounts(spec.get("overhead")))
    total[PODS] = 1
    return total


def show_requests(req: Dict[str, int]) -> str:
    return f"cpu {show(CPU, req.get(CPU, 0))}, memory {show(MEMORY, req.get(MEMORY, 0))}"


@dataclass
class NodeRoom:
    """A node as placement sees it: what it offers and what is already asked of it."""
    name: str
    labels: Dict[str, str]
    taints: List[Obj]
    allocatable: Dict[str, int]
    requested: Dict[str, int] = field(default_factory=lambda: {r: 0 for r in RESOURCES})
    unavailable: str = ""  # why no new pod lands here at all (cordoned, not Ready)
    known: bool = True  # False: its pods were not read, so what it has left is not known

    def copy(self) -> NodeRoom:
        return NodeRoom(self.name, self.labels, self.taints, self.allocatable, dict(self.requested), self.unavailable,
                        self.known)

    def free(self, resource: str) -> int:
        return self.allocatable.get(resource, 0) - self.requested.get(resource, 0)

    def take(self, req: Dict[str, int]) -> None:
        for r in RESOURCES:
            self.requested[r] = self.requested.get(r, 0) + req.get(r, 0)

    def score_after(self, req: Dict[str, int]) -> float:
        shares = [(self.free(r) - req.get(r, 0)) / self.allocatable[r] for r in (CPU, MEMORY)
                  if self.allocatable.get(r)]
        return sum(shares) / len(shares) if shares else 0.0


def node_room(node: Obj, pods: Iterable[Obj]) -> NodeRoom:
    """``pods``: the pods bound to this node; finished ones hold no resources."""
    alloc = node.get("status", {}).get("allocatable") or {}
    room = NodeRoom(node["metadata"]["name"], dict(node["metadata"].get("labels") or {}),
                    list(node.get("spec", {}).get("taints") or []),
                    {r: amount(r, alloc[r]) for r in RESOURCES if r in alloc})
    for pod in pods:
        if not is_finished(pod):
            room.take(pod_requests(pod))
    if node.get("spec", {}).get("unschedulable"):
        room.unavailable = "cordoned"
    elif not is_ready(node):
        room.unavailable = "not Ready"
    return room


# -- the pod's constraints on a node ------------------------------------------------------------
def expression_matches(expr: Obj, value: Optional[str]) -> bool:
    """One NodeSelectorRequirement against a label or field value (None: absent)."""
    op, values = expr.get("operator"), expr.get("values") or []
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt"):
        try:
            have, bound = int(value or ""), int(values[0])
        except (ValueError, IndexError):
            return False
        return have > bound if op == "Gt" else have < bound
    return False


def term_matches(term: Obj, room: NodeRoom) -> bool:
    """A NodeSelectorTerm: all its requirements hold. An empty term matches no node."""
    exprs = term.get("matchExpressions") or []
    fields_ = term.get("matchFields") or []
    if not exprs and not fields_:
        return False
    fields_ok = all(expression_matches(f, room.name if f.get("key") == "metadata.name" else None) for f in fields_)
    return fields_ok and all(expression_matches(e, room.labels.get(e.get("key", ""))) for e in exprs)


def selector_matches(pod: Obj, room: NodeRoom) -> bool:
    """nodeSelector and required node affinity (any of its terms)."""
    spec = pod.get("spec", {})
    for key, value in (spec.get("nodeSelector") or {}).items():
        if room.labels.get(key) != value:
            return False
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))
    if required is None:
        return True
    return any(term_matches(t, room) for t in required.get("nodeSelectorTerms") or [])


def untolerated_taint(pod: Obj, room: NodeRoom) -> Optional[Obj]:
    tolerations = pod.get("spec", {}).get("tolerations") or []
    for taint in room.taints:
        if taint.get("effect") in SCHEDULING_EFFECTS and not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def taint_text(taint: Obj) -> str:
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint.get('key')}{value}:{taint.get('effect')}"


def unjudged(pod: Obj) -> List[str]:
    """Constraints of the pod that depend on other pods, which this check does not judge."""
    spec = pod.get("spec", {})
    affinity = spec.get("affinity") or {}
    notes = []
    for kind in ("podAffinity", "podAntiAffinity"):
        if (affinity.get(kind) or {}).get("requiredDuringSchedulingIgnoredDuringExecution"):
            notes.append(f"required {kind}")
    if any(c.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule"
           for c in spec.get("topologySpreadConstraints") or []):
        notes.append("topologySpreadConstraints")
    return notes


NOT_READ = "not judged (their pods were not read)"


def static_misfit(pod: Obj, room: NodeRoom, out: Set[str]) -> List[str]:
    """Why ``room`` cannot take the pod whatever runs there (empty: it may)."""
    if room.name in out:
        return ["out for maintenance at the same time"]
    if room.unavailable:
        return [room.unavailable]
    if not selector_matches(pod, room):
        return ["do not match its node selector or affinity"]
    taint = untolerated_taint(pod, room)
    if taint is not None:
        return [f"have taint {taint_text(taint)} it does not tolerate"]
    return []


def misfit(pod: Obj, req: Dict[str, int], room: NodeRoom, out: Set[str]) -> List[str]:
    """Why ``room`` cannot take the pod (empty: it can), in the scheduler's words."""
    static = static_misfit(pod, room, out)
    if static:
        return static
    if not room.known:
        return [NOT_READ]
    short = {CPU: "insufficient cpu", MEMORY: "insufficient memory", PODS: "too many pods"}
    return [short[r] for r in RESOURCES if req.get(r, 0) > 0 and req[r] > room.free(r)]


# -- placing a batch's pods ---------------------------------------------------------------------
@dataclass(frozen=True)
class Placement:
    namespace: str
    name: str
    node: Optional[str]  # None: it would stay Pending
    requests: Dict[str, int]
    reason: str = ""

    def brief(self) -> Dict[str, Any]:
        out = {"namespace": self.namespace, "name": self.name, "requests": show_requests(self.requests)}
        if self.node:
            out["node"] = self.node
        else:
            out["reason"] = self.reason
        return out


def _why_nowhere(counts: Counter, total: int) -> str:
    parts = [f"{n} {why}" for why, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    return f"0/{total} nodes can take it: " + ", ".join(parts)


def place(pods: List[Obj], rooms: List[NodeRoom], out: Set[str]) -> List[Placement]:
    """Place ``pods`` (replacements of the evicted ones) on ``rooms`` while ``out`` are away.

    ``rooms`` are changed: each placed pod's requests are taken from its node."""
    order: List[Tuple[Obj, Dict[str, int]]] = sorted(
        ((p, pod_requests(p)) for p in pods),
        key=lambda pr: (-pr[1][CPU], -pr[1][MEMORY], pr[0]["metadata"].get("namespace", ""), pr[0]["metadata"]["name"]))
    placed = []
    for pod, req in order:
        meta = pod["metadata"]
        best: Optional[NodeRoom] = None
        counts: Counter = Counter()
        for room in rooms:
            why = misfit(pod, req, room, out)
            counts.update(why)
            if not why and (best is None or room.score_after(req) > best.score_after(req)):
                best = room
        if best is None:
            placed.append(Placement(meta.get("namespace", ""), meta["name"], None, req, _why_nowhere(counts, len(rooms))))
            continue
        best.take(req)
        placed.append(Placement(meta.get("namespace", ""), meta["name"], best.name, req))
    return placed
