"""Workloads whole again after a node's drain (docs/design.md §4.9.1). Pure.

Before the drain evicts, a snapshot says what must be whole again: the controllers of the
node's pods that the drain will evict (Deployment, through its ReplicaSet; StatefulSet;
ReplicaSet alone; KubeVirt VirtualMachine through its VirtualMachineInstance) and every
PodDisruptionBudget covering those pods with its ``disruptionsAllowed`` then. After the
node is back in service, each workload must be as whole as it was before the drain (its
Ready count then, ``ready``, capped by the replicas it wants now: a Deployment at 2 of 3
Ready before stays done at 2 of 3) and each budget must allow at least as many disruptions
as before. Where not, ``why_not`` says why, and ``pending_reasons`` tells, from its pods, why
a replacement is not running. A snapshot without the count (an older one, or garbled) waits
for every replica the workload wants, as before the count was kept.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Iterable, List, Optional, Tuple

from .budgets import selects
from .marks import SETTLE_SNAPSHOT

ANNOTATION = SETTLE_SNAPSHOT  # the snapshot, on the Node until settled (model/marks.py)
ENDED = "nmo.maintenance/settle-ended"  # the end's mark: the node is back in service, settle is due
KINDS = ("Deployment", "StatefulSet", "ReplicaSet", "VirtualMachine")
HASH_LABEL = "pod-template-hash"
MAX_ANNOTATION = 200_000  # an annotation's bytes; a snapshot beyond is cut (Kubernetes allows 256 KiB in all)


def owner_of(pod: Dict[str, Any]) -> Optional[Tuple[str, str]]:
    """(kind, name) of the workload a pod belongs to, or None (DaemonSet, Job, unmanaged).

    A ReplicaSet named ``<deployment>-<pod-template-hash>`` is taken for that Deployment's
    (no read of the ReplicaSet: the settle checks the Deployment and falls back to the
    ReplicaSet when there is none)."""
    meta = pod.get("metadata", {})
    for ref in meta.get("ownerReferences") or []:
        if not ref.get("controller"):
            continue
        kind, name = ref.get("kind", ""), ref.get("name", "")
        if kind == "ReplicaSet":
            hashed = (meta.get("labels") or {}).get(HASH_LABEL, "")
            if hashed and name.endswith("-" + hashed):
                return "Deployment", name[: -len(hashed) - 1] + "|" + name
            return "ReplicaSet", name
        if kind == "StatefulSet":
            return kind, name
        if kind == "VirtualMachineInstance":  # a virt-launcher pod: its VMI is named as its VM
            return "VirtualMachine", name
    return None


def snapshot(pods: Iterable[Dict[str, Any]], pdbs: Iterable[Dict[str, Any]],
             evicted_uids: Optional[Iterable[str]] = None) -> Dict[str, Any]:
    """{"workloads": [{kind, namespace, name, replicaset?}], "budgets": [{namespace, name, allowed}]}.

    ``evicted_uids``: only these pods (None: every pod given)."""
    wanted = None if evicted_uids is None else set(evicted_uids)
    workloads: Dict[str, Dict[str, Any]] = {}
    budgets: Dict[str, Dict[str, Any]] = {}
    pdb_list = list(pdbs)
    for pod in pods:
        meta = pod.get("metadata", {})
        if wanted is not None and meta.get("uid") not in wanted:
            continue
        owner = owner_of(pod)
        namespace = meta.get("namespace", "")
        if owner is not None:
            kind, name = owner
            entry: Dict[str, Any] = {"kind": kind, "namespace": namespace, "name": name.split("|")[0]}
            if "|" in name:
                entry["replicaset"] = name.split("|")[1]
            workloads.setdefault(f"{kind}/{namespace}/{entry['name']}", entry)
        for pdb in pdb_list:
            pmeta = pdb.get("metadata", {})
            if not selects(pdb, pod):
                continue
            key = f"{namespace}/{pmeta.get('name', '')}"
            budgets.setdefault(key, {"namespace": namespace, "name": pmeta.get("name", ""),
                                     "allowed": int((pdb.get("status") or {}).get("disruptionsAllowed") or 0)})
    return {"workloads": [workloads[k] for k in sorted(workloads)], "budgets": [budgets[k] for k in sorted(budgets)]}


def key_of(entry: Dict[str, Any]) -> str:
    return f"{entry['kind']}/{entry['namespace']}/{entry['name']}"


def with_ready(snap: Dict[str, Any], objects: Dict[str, Optional[Dict[str, Any]]]) -> Dict[str, Any]:
    """The snapshot with each workload's Ready count before the drain (``ready``), from its
    object as read then (``objects`` by ``key_of``). A workload that already has one keeps it
    (a rerun's drain sees fewer Ready: the first count wins); one not read gets none."""
    workloads = []
    for entry in snap.get("workloads") or []:
        obj = objects.get(key_of(entry))
        if "ready" not in entry and obj is not None:
            entry = dict(entry, ready=desired_ready(entry["kind"], obj)[1])
        workloads.append(entry)
    return dict(snap, workloads=workloads)


def merge(old: Optional[Dict[str, Any]], new: Dict[str, Any]) -> Dict[str, Any]:
    """Two snapshots as one (a rerun's drain sees fewer pods: the first one's are kept, and a
    budget keeps the count from before the first drain)."""
    if not old:
        return new
    out: Dict[str, Any] = {}
    for part, key in (("workloads", lambda e: f"{e['kind']}/{e['namespace']}/{e['name']}"),
                      ("budgets", lambda e: f"{e['namespace']}/{e['name']}")):
        merged: Dict[str, Dict[str, Any]] = {}
        for entry in list(old.get(part) or []) + list(new.get(part) or []):
            merged.setdefault(key(entry), entry)
        out[part] = [merged[k] for k in sorted(merged)]
    return out


def empty(snap: Optional[Dict[str, Any]]) -> bool:
    return not snap or not (snap.get("workloads") or snap.get("budgets"))


def encode(snap: Dict[str, Any]) -> str:
    text = json.dumps(snap, separators=(",", ":"), sort_keys=True)
    if len(text) > MAX_ANNOTATION:  # keep the budgets and as many workloads as fit
        cut = dict(snap, workloads=list(snap.get("workloads") or []))
        while len(text) > MAX_ANNOTATION and cut["workloads"]:
            cut["workloads"].pop()
            text = json.dumps(cut, separators=(",", ":"), sort_keys=True)
    return text


def decode(text: Optional[str]) -> Optional[Dict[str, Any]]:
    """The snapshot an annotation holds; None when there is none or it is not ours to read."""
    if not text:
        return None
    try:
        snap = json.loads(text)
    except ValueError:
        return None
    if not isinstance(snap, dict):
        return None
    workloads = []
    for w in snap.get("workloads") or []:
        if not (isinstance(w, dict) and w.get("kind") in KINDS and w.get("name")):
            continue
        ready = w.get("ready")
        if "ready" in w and (isinstance(ready, bool) or not isinstance(ready, int) or ready < 0):
            w = {k: v for k, v in w.items() if k != "ready"}  # garbled: the count is not known
        workloads.append(w)
    return {"workloads": workloads,
            "budgets": [b for b in snap.get("budgets") or [] if isinstance(b, dict) and b.get("name")]}


def desired_ready(kind: str, obj: Dict[str, Any]) -> Tuple[int, int]:
    """(desired, ready) replicas of a workload as its controller reports them."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    if kind == "VirtualMachine":
        running = spec.get("running")
        strategy = spec.get("runStrategy")
        desired = 1 if running or strategy in ("Always", "RerunOnFailure") else 0
        return desired, 1 if status.get("ready") else 0
    desired = spec.get("replicas")
    return (1 if desired is None else int(desired)), int(status.get("readyReplicas") or 0)


def wanted_ready(kind: str, obj: Dict[str, Any], before: Optional[int] = None) -> Tuple[int, int, int]:
    """(desired, ready, needed): the Ready count the settle waits for is the workload's Ready
    count before the drain (``before``), never more than it wants now (scaled down meanwhile);
    without a count, every replica it wants."""
    desired, ready = desired_ready(kind, obj)
    return desired, ready, desired if before is None else min(before, desired)


def why_not(kind: str, obj: Optional[Dict[str, Any]], before: Optional[int] = None) -> Optional[str]:
    """None when the workload is as whole as before the drain (or gone: nothing to wait for),
    else why not."""
    if obj is None:
        return None
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    if meta.get("deletionTimestamp"):
        return None
    desired, ready, needed = wanted_ready(kind, obj, before)
    if kind != "VirtualMachine" and int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 0):
        return f"its controller has not seen generation {meta.get('generation')} yet"
    if ready < needed:
        return f"{ready} of {desired} replicas ready" + ("" if before is None else f" ({before} before the drain)")
    # a workload whole before the drain is whole again once a rollout begun meanwhile is done;
    # one that was not whole is not held to more than its Ready count then
    if kind == "Deployment" and needed == desired and int(status.get("updatedReplicas") or 0) < desired:
        return f"{status.get('updatedReplicas') or 0} of {desired} replicas updated"
    return None


def standing(entry: Dict[str, Any], obj: Optional[Dict[str, Any]]) -> str:
    """A workload as a progress line shows it: ``Deployment ns/web 2 of 3 Ready (2 before the
    drain)``; ``gone`` when it was deleted meanwhile."""
    if obj is None or (obj.get("metadata") or {}).get("deletionTimestamp"):
        return f"{label(entry)} gone"
    before = entry.get("ready")
    desired, ready = desired_ready(entry["kind"], obj)
    return f"{label(entry)} {ready} of {desired} Ready" + ("" if before is None else f" ({before} before the drain)")


def progress_line(node: str, elapsed: float, waiting: List[str], settled: List[str], limit: int = 5) -> str:
    """The settle's progress: what it waits for (``waiting``, from ``standing`` and
    ``budget_short``), at most ``limit`` named, and how many are whole again already."""
    if not waiting:
        return f"{node}: settled after {elapsed:.0f} s: " + ("; ".join(settled[:limit]) or "nothing to wait for") + (
            f" (and {len(settled) - limit} more)" if len(settled) > limit else "")
    more = f" (and {len(waiting) - limit} more)" if len(waiting) > limit else ""
    return (f"{node}: settling for {elapsed:.0f} s, waiting for {len(waiting)}: " + "; ".join(waiting[:limit]) + more
            + (f"; {len(settled)} whole again" if settled else ""))


def budget_short(before: int, pdb: Optional[Dict[str, Any]]) -> Optional[str]:
    """None when the budget allows at least ``before`` disruptions (or is gone), else why not."""
    if pdb is None:
        return None
    status = pdb.get("status") or {}
    generation = int(pdb.get("metadata", {}).get("generation") or 0)
    if int(status.get("observedGeneration") or 0) < generation:
        return "the disruption controller has not seen it yet"
    now = int(status.get("disruptionsAllowed") or 0)
    if now < before:
        return (f"allows {now} disruption(s), {before} before the drain "
                f"({status.get('currentHealthy', 0)} healthy, {status.get('desiredHealthy', 0)} wanted)")
    return None


def pod_reason(pod: Dict[str, Any]) -> Optional[str]:
    """Why a pod of a workload is not ready, or None when it is (Running and Ready)."""
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    name = f"pod {meta.get('name', '')}"
    if meta.get("deletionTimestamp"):
        return f"{name} terminating"
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    if status.get("phase") == "Pending":
        scheduled = conditions.get("PodScheduled") or {}
        if scheduled.get("status") == "False":
            return f"{name} Pending, {scheduled.get('reason') or 'not scheduled'}: {scheduled.get('message') or ''}".rstrip(": ")
    for cs in list(status.get("initContainerStatuses") or []) + list(status.get("containerStatuses") or []):
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason"):
            text = f"{name} container {cs.get('name', '')} {waiting['reason']}"
            return text + (f": {waiting['message']}" if waiting.get("message") else "")
    if status.get("phase") == "Pending":
        return f"{name} Pending"
    if (conditions.get("Ready") or {}).get("status") != "True":
        return f"{name} {status.get('phase') or 'unknown phase'}, not Ready"
    return None


def pending_reasons(pods: Iterable[Dict[str, Any]], limit: int = 3) -> List[str]:
    """The reasons of the workload's pods that are not ready, the same reason once, at most ``limit``."""
    reasons: Dict[str, None] = {}
    for pod in sorted(pods, key=lambda p: p.get("metadata", {}).get("name", "")):
        reason = pod_reason(pod)
        if reason is not None:
            reasons[reason] = None
    out = list(reasons)
    return out[:limit] + ([f"and {len(out) - limit} more"] if len(out) > limit else [])


def label(entry: Dict[str, Any]) -> str:
    if "kind" in entry:
        return f"{entry['kind']} {entry['namespace']}/{entry['name']}"
    return f"PodDisruptionBudget {entry['namespace']}/{entry['name']}"
