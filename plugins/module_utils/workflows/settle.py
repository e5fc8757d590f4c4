"""Workloads whole again before the next node (docs/design.md §4.9.1).

``take_snapshot`` runs inside the drain's module call, before the drain evicts: one list of
the node's pods and one of the PodDisruptionBudgets say which workloads and budgets must be
whole again (``model.settle.snapshot``), merged with a snapshot a killed run left, and kept
as an annotation of the Node (one merge patch), where a rerun finds it whether the node is
still in maintenance or back in service. The end marks the node (``settle-ended``).

The snapshot also holds each workload's Ready count then (one list per kind and namespace).

``settle`` runs after the end: one watch per namespace and kind involved, and one on the
namespace's budgets, until every workload is as whole as before the drain (its Ready count
then, at most the replicas it wants now) and every budget allows as many disruptions as
before the drain; then both annotations are removed. ``progress`` is its progress line,
which the controller prints while it waits (plugin_utils/progress.py). A
timeout fails naming each workload that is not whole and why, from its pods (Pending and
the scheduler's message, an image that cannot be pulled).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from ..api import paths
from ..api.client import Client
from ..api.waiter import MultiWatcher, Watcher, list_objects, wait_until
from ..errors import ApiError, NmoError, WaitTimeout
from ..model import settle as model
from ..model import validation
from ..stores.events import EventRecorder
from ..stores.nodes import read_node
from . import run

SETTLE = "Settle"  # the event's reason
TICK = 1.0
PATHS = {
    "Deployment": ("apps", "v1", "deployments"),
    "StatefulSet": ("apps", "v1", "statefulsets"),
    "ReplicaSet": ("apps", "v1", "replicasets"),
    "VirtualMachine": ("kubevirt.io", "v1", "virtualmachines"),
}


class SettleFailed(NmoError):
    """Workloads the drain evicted were not whole again within the settle timeout."""


@dataclass(frozen=True)
class Options:
    node: str
    timeout: float = 900.0
    run_id: str = ""  # the playbook run: the wait stops, writing nothing, when it is gone (docs/design.md §6.4)

    def validate(self) -> None:
        checks = [lambda: validation.node_name(self.node), lambda: validation.seconds(self.timeout, "timeout")]
        if self.run_id:
            checks.append(lambda: run.validate_id(self.run_id))
        validation.problems(*checks)


def collection(kind: str, namespace: str) -> str:
    group, version, plural = PATHS[kind]
    return paths.custom(group, version, plural, namespace)


def annotate(client: Client, node: str, values: Dict[str, Optional[str]]) -> None:
    client.patch(paths.node(node), {"metadata": {"annotations": values}}, "merge")


# -- before the drain ------------------------------------------------------------------------------
@dataclass
class Snapshot:
    """What the snapshot read and kept: ``snap`` (on the Node), and its reads, which the drain
    that follows takes as its own first look (drain.Seen): the node as read before the
    snapshot's annotation (which changes nothing the drain looks at), and the pods' list."""

    snap: Dict[str, Any]
    node: Dict[str, Any]
    listing: Dict[str, Any]

    @property
    def pods(self) -> List[Dict[str, Any]]:
        return self.listing.get("items", [])


def take_snapshot(client: Client, node: str) -> Snapshot:
    """What must be whole again, kept on the Node (not in a dry run)."""
    current = read_node(client, node)
    listing = list_objects(client, paths.PODS, {"fieldSelector": f"spec.nodeName={node}"})
    pods = listing.get("items", [])
    old = model.decode((current.get("metadata", {}).get("annotations") or {}).get(model.ANNOTATION))
    # the budgets that can guard these pods are in their namespaces: those, not every budget of the cluster
    namespaces = sorted({(p.get("metadata") or {}).get("namespace") or "" for p in pods} - {""})
    pdbs = [b for ns in namespaces for b in list_objects(client, paths.pdbs(ns)).get("items", [])]
    new = model.snapshot(pods, pdbs)
    snap = model.merge(old, new)
    # each workload's Ready count now, before anything is evicted: what the settle waits for
    counted = [w for w in snap["workloads"] if "ready" not in w]
    snap = model.with_ready(snap, read_workloads(client, counted))
    if not client.dry_run and not model.empty(snap) and snap != old:
        annotate(client, node, {model.ANNOTATION: model.encode(snap)})
    return Snapshot(snap, current, listing)


def read_workloads(client: Client, entries: List[Dict[str, Any]]) -> Dict[str, Optional[Dict[str, Any]]]:
    """The workloads of ``entries`` by ``model.key_of``: one list per kind and namespace. A
    kind the cluster does not serve (KubeVirt's VirtualMachine without KubeVirt) is left out."""
    found: Dict[str, Optional[Dict[str, Any]]] = {}
    for kind, namespace in sorted({(w["kind"], w["namespace"]) for w in entries}):
        try:
            items = list_objects(client, collection(kind, namespace)).get("items", [])
        except ApiError as exc:
            if exc.status == 404:
                continue
            raise
        for obj in items:
            found[f"{kind}/{namespace}/{(obj.get('metadata') or {}).get('name', '')}"] = obj
    return found


def progress(client: Client, node: str, elapsed: float) -> str:
    """The settle's progress line, read afresh (the printer beside nmo_settle): the node's
    snapshot and its workloads, one list per kind and namespace."""
    snap = model.decode((read_node(client, node).get("metadata", {}).get("annotations") or {}).get(model.ANNOTATION))
    workloads = (snap or {}).get("workloads") or []
    objects = read_workloads(client, workloads)
    waiting, settled = [], []
    for w in workloads:
        obj = objects.get(model.key_of(w))
        (waiting if model.why_not(w["kind"], obj, w.get("ready")) else settled).append(model.standing(w, obj))
    return model.progress_line(node, elapsed, waiting, settled)


# -- after the end ---------------------------------------------------------------------------------
def served(client: Client, path: str) -> bool:
    """Whether the API server serves this collection (a 404 says the CRD is not installed). A
    virt-launcher pod's VMI names its VirtualMachine, but a VMI may stand alone, and a cluster
    may have KubeVirt's VMIs without its VirtualMachine CRD: then there is no VM to wait for."""
    try:
        list_objects(client, path, {"limit": 1})
    except ApiError as exc:
        if exc.status == 404:
            return False
        raise
    return True


class Waiting:
    """The live view of the snapshot's workloads and budgets; what is not whole, and why."""

    def __init__(self, client: Client, snap: Dict[str, Any]) -> None:
        self.client = client
        self.snap = snap
        self.watchers: Dict[Tuple[str, str], Watcher] = {}
        self.unserved: set = set()  # (kind, namespace) whose API the cluster does not serve
        for w in snap.get("workloads") or []:
            key = (w["kind"], w["namespace"])
            if key in self.watchers or key in self.unserved:
                continue
            if w["kind"] == "VirtualMachine" and not served(client, collection(*key)):
                self.unserved.add(key)  # a VMI without KubeVirt's VirtualMachine API: no VM to wait for
                continue
            self.watchers[key] = Watcher(client, collection(*key))
        for b in snap.get("budgets") or []:
            self.watchers.setdefault(("PodDisruptionBudget", b["namespace"]), Watcher(client, paths.pdbs(b["namespace"])))
        self.not_whole: List[Dict[str, Any]] = []

    def obj(self, kind: str, namespace: str, name: str) -> Optional[Dict[str, Any]]:
        watcher = self.watchers.get((kind, namespace))
        return watcher.objects.get(f"{namespace}/{name}") if watcher is not None else None

    def look(self) -> List[Dict[str, Any]]:
        out = []
        for w in self.snap.get("workloads") or []:
            why = model.why_not(w["kind"], self.obj(w["kind"], w["namespace"], w["name"]), w.get("ready"))
            if why:
                out.append({**w, "why": why})
        for b in self.snap.get("budgets") or []:
            why = model.budget_short(int(b.get("allowed") or 0), self.obj("PodDisruptionBudget", b["namespace"], b["name"]))
            if why:
                out.append({**b, "why": why})
        self.not_whole = out
        return out

    def standing(self) -> List[str]:
        """Each workload as the progress line shows it (Ready of wanted, of before the drain)."""
        return [model.standing(w, self.obj(w["kind"], w["namespace"], w["name"]))
                for w in self.snap.get("workloads") or []]

    def describe(self) -> str:
        return "; ".join(f"{model.label(e)}: {e['why']}" for e in self.not_whole)

    def explain(self) -> List[Dict[str, Any]]:
        """The workloads not whole with their pods' reasons (one pod list a workload)."""
        out = []
        for entry in self.not_whole:
            entry = dict(entry)
            if "kind" in entry:
                obj = self.obj(entry["kind"], entry["namespace"], entry["name"]) or {}
                selector = (obj.get("spec") or {}).get("selector") or {}
                if entry["kind"] == "VirtualMachine":
                    selector = {"matchLabels": {"kubevirt.io/vm": entry["name"]}}
                labels = ",".join(f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items()))
                if labels:
                    pods = list_objects(self.client, paths.pods(entry["namespace"]),
                                        {"labelSelector": labels}).get("items", [])
                    entry["pods"] = model.pending_reasons(pods)
            out.append(entry)
        return out


def message(node: str, entries: List[Dict[str, Any]]) -> str:
    parts = []
    for e in entries:
        text = f"{model.label(e)}: {e['why']}"
        if e.get("pods"):
            text += " (" + "; ".join(e["pods"]) + ")"
        parts.append(text)
    return f"workloads evicted from node {node} are not whole again: " + "; ".join(parts)


def settle(client: Client, opts: Options) -> Dict[str, Any]:
    """Wait until what the snapshot on the Node names is whole again; remove the annotations."""
    opts.validate()
    started, first = time.monotonic(), client.requests
    node = read_node(client, opts.node)
    annotations = node.get("metadata", {}).get("annotations") or {}
    snap = model.decode(annotations.get(model.ANNOTATION))
    ours = {k: None for k in (model.ANNOTATION, model.ENDED) if k in annotations}
    result: Dict[str, Any] = {"node": opts.node, "changed": False, "snapshot": snap or {"workloads": [], "budgets": []},
                              "not_whole": [], "timeout": opts.timeout}
    if opts.timeout == 0 or model.empty(snap):
        if ours and not client.dry_run:
            annotate(client, opts.node, ours)
        result.update(changed=bool(ours), settled=True, elapsed=round(time.monotonic() - started, 3),
                      api_requests=client.requests - first)
        return result
    try:
        return _wait(client, opts, node, snap or {}, ours, result, started, first)
    except NmoError:
        # no node of the run begins after this one (docs/design.md §18), whatever failed here and
        # whatever the play strategy: the failure path's mark, on the run lease
        try:
            run.mark_stopped(client, opts.run_id, opts.node, "settle")
        except NmoError:
            pass  # the failure itself is what the operator must see
        raise


def _wait(client: Client, opts: Options, node: Dict[str, Any], snap: Dict[str, Any], ours: Dict[str, None],
          result: Dict[str, Any], started: float, first: int) -> Dict[str, Any]:
    waiting = Waiting(client, snap)
    recorder = EventRecorder(client)
    guard = run.guard_for(client, opts.run_id)
    with MultiWatcher(*waiting.watchers.values()) as watcher:
        if client.dry_run:
            result.update(would_wait_for=[{**e} for e in waiting.look()], settled=not waiting.not_whole,
                          changed=bool(ours))
            result["api_requests"] = client.requests - first
            return result
        if waiting.look():
            recorder.record(node, SETTLE, f"Waiting for what the drain of node {opts.node} evicted to be whole "
                                          f"again: {waiting.describe()}"[:1000], "Normal")
        try:
            wait_until(watcher, lambda: True if not waiting.look() else None, opts.timeout, waiting.describe,
                       tick=guard.check, tick_every=TICK)
        except WaitTimeout:
            entries = waiting.explain()
            text = (message(opts.node, entries) + f" after {opts.timeout:g} s (settle_timeout). The node is back "
                    "in service; the next node is not begun")
            recorder.record(node, SETTLE, text[:1000], "Warning")
            raise SettleFailed(text, not_whole=entries, node=opts.node, snapshot=snap,
                               elapsed=round(time.monotonic() - started, 3)) from None
        standing = waiting.standing()
    # A run killed while the workloads came back must leave the marks for the next run (plan
    # settle): the wait's last look at the run may be up to a tick old, so look once more.
    guard.check(force=True)
    annotate(client, opts.node, ours)
    elapsed = time.monotonic() - started
    result.update(changed=True, settled=True, elapsed=round(elapsed, 3), standing=standing,
                  line=model.progress_line(opts.node, elapsed, [], standing), api_requests=client.requests - first)
    return result
