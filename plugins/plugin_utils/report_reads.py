# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the run report reads from the cluster once the playbook has ended (docs/report.md):
where each evicted pod's replacement landed, and the events of the NodeMaintenances that an
earlier run began (what that run did for the nodes this one adopted). A few list requests,
each bounded; when the cluster cannot be read the report is written without them and says so.

What is read grows with the pods the run moved, not with the cluster (issue 35): a pod that
keeps its name (a StatefulSet's, a bare pod) is looked up by that name; the pods of a
ReplicaSet by its own label selector, a page at a time; only a pod of another controller costs
a paged read of its namespace. Only the pods that can be a replacement are kept, slimmed.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.nmo.maintenance.plugins.module_utils.api import paths
from ansible_collections.nmo.maintenance.plugins.module_utils.api.client import (
    CONNECTION_ENV,
    Client,
    ConnectionOptions,
    connect,
)
from ansible_collections.nmo.maintenance.plugins.module_utils.errors import ApiError
from ansible_collections.nmo.maintenance.plugins.module_utils.stores.events import EVENT_NAMESPACE
from ansible_collections.nmo.maintenance.plugins.module_utils.stores.preflight_reads import items, label_selector
from ansible_collections.nmo.maintenance.plugins.plugin_utils.report_model import epoch_of

BUDGET = 15.0  # seconds for all the report's reads
MASKED = "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"
REPLICASETS = "/apis/apps/v1/namespaces/{}/replicasets"


def connection(args: Dict[str, Any]) -> ConnectionOptions:
    """The connection the run's modules used (their arguments as invoked), the K8S_AUTH_*
    variables for what they did not show (a no_log value is masked in the result)."""
    params: Dict[str, Any] = {}
    for name, env in CONNECTION_ENV.items():
        value = args.get(name)
        if value in (None, "", MASKED):
            value = os.environ.get(env) or None
        params[name] = value
    if isinstance(params.get("validate_certs"), str):
        params["validate_certs"] = params["validate_certs"].lower() in ("1", "true", "yes", "on")
    return ConnectionOptions.from_params(params)


def stem(name: str) -> str:
    """A controller-made pod's name without its random suffix (``web-5d9f-abcde`` -> ``web-5d9f-``);
    a StatefulSet's pod keeps its name."""
    base, dash, _suffix = name.rpartition("-")
    return base + dash if dash else name


def keeps_its_name(name: str) -> bool:
    """A StatefulSet's pod (``db-0``) or a pod without a generated suffix: its replacement, if
    any, has its very name (``replacements`` matches no other)."""
    return stem(name) == name or name.rpartition("-")[2].isdigit()


def slim(pod: Dict[str, Any]) -> Dict[str, Any]:
    """What ``replacements`` reads of a pod: a few fields, so that a page is dropped whole."""
    meta = pod.get("metadata") or {}
    return {"metadata": {k: meta[k] for k in ("name", "generateName", "uid", "creationTimestamp") if k in meta},
            "spec": {"nodeName": (pod.get("spec") or {}).get("nodeName")}}


def could_replace(pod: Dict[str, Any], names: List[str], stems: List[str]) -> bool:
    meta = pod.get("metadata") or {}
    return meta.get("name") in names or (meta.get("generateName") or None) in stems


def owner_selector(client: Client, namespace: str, stem_: str) -> Optional[str]:
    """The label selector of the ReplicaSet a generated name's stem names (``web-5d9f-`` ->
    ReplicaSet ``web-5d9f``), which selects every pod it made; None when there is none, it
    cannot be read, or its selector is not one a query can say (then the namespace is read)."""
    try:
        found = client.get(REPLICASETS.format(paths.segment(namespace)),
                           {"fieldSelector": f"metadata.name={stem_[:-1]}"}).get("items") or []
    except ApiError:  # not allowed to list ReplicaSets here, say
        return None
    if len(found) != 1:
        return None
    return label_selector((found[0].get("spec") or {}).get("selector") or {}) or None


def candidates(client: Client, namespace: str, names: List[str]) -> List[Dict[str, Any]]:
    """The pods of ``namespace`` that may replace one of the moved pods ``names``, slimmed.
    A name kept: one list by that name; a generated name: its ReplicaSet's pods, paged; what
    has no ReplicaSet: the namespace, paged, once. No page is kept, only what matches."""
    path = paths.pods(namespace)
    kept, scan, found, stems = [], [], [], set()
    for name in sorted(set(names)):
        if keeps_its_name(name):
            kept.append(name)
            continue
        stem_ = stem(name)
        if stem_ in stems:
            continue
        stems.add(stem_)
        selector = owner_selector(client, namespace, stem_)
        if selector is None:
            scan.append(stem_)
            continue
        found += [slim(p) for p in items(client, path, {"labelSelector": selector})
                  if could_replace(p, names, [stem_])]
    for name in kept:
        found += [slim(p) for p in client.get(path, {"fieldSelector": f"metadata.name={name}"}).get("items") or []]
    if scan:
        found += [slim(p) for p in items(client, path) if could_replace(p, names, scan)]
    unique = {p["metadata"].get("uid") or p["metadata"].get("name"): p for p in found}
    return list(unique.values())


def replacements(pods_by_ns: Dict[str, List[Dict[str, Any]]],
                 moved: List[Tuple[str, str, float]]) -> Dict[str, Optional[str]]:
    """(pod key, its node, when its drain began) -> the node of its replacement: a pod of the
    same name stem (or the same name: a StatefulSet's) on another node, made after it left.
    A pod the run moved later from another node was one (a replacement moved again), and is
    taken first; then the pods there now, the earliest made first. Each answers for one pod."""
    taken = set()
    out: Dict[str, Optional[str]] = {}

    def same(name: str, other: str, generate: Optional[str] = None) -> bool:
        if other == name:
            return True
        if name.rpartition("-")[2].isdigit():  # a StatefulSet's pod is replaced under its own name
            return False
        return (stem(other) if generate is None else generate) == stem(name) != name

    for key, node, left in sorted(moved, key=lambda m: m[2]):
        namespace, _slash, name = key.partition("/")
        later = [(at, k, n) for k, n, at in moved if k != key and k.partition("/")[0] == namespace
                 and n != node and at > left and same(name, k.partition("/")[2]) and k not in taken]
        if later:
            _at, other, target = min(later)
            taken.add(other)
            out[key] = target
            continue
        candidates = []
        for pod in pods_by_ns.get(namespace, []):
            meta = pod.get("metadata", {})
            uid, made = meta.get("uid"), epoch_of(meta.get("creationTimestamp")) or 0
            target = (pod.get("spec") or {}).get("nodeName")
            if (same(name, meta.get("name", ""), meta.get("generateName") or "") and uid not in taken and target
                    and target != node and made >= left - 1):
                candidates.append((made, uid, target))
        if candidates:
            _made, uid, target = min(candidates)
            taken.add(uid)
            out[key] = target
        else:
            out[key] = None
    return out


def read(args: Dict[str, Any], moved: List[Tuple[str, str, float]], maintenances: List[str]) -> Dict[str, Any]:
    """The report's reads: ``replacements`` and ``events`` (NodeMaintenance name -> events)."""
    found: Dict[str, Any] = {"replacements": {}, "events": {}, "notes": []}
    if not moved and not maintenances:
        return found
    try:
        client = connect(connection(args), pool_size=2)
        with client.time_budget(BUDGET):
            names_by_ns: Dict[str, List[str]] = {}
            for key, _node, _left in moved:
                namespace, _slash, name = key.partition("/")
                names_by_ns.setdefault(namespace, []).append(name)
            pods_by_ns = {ns: candidates(client, ns, names) for ns, names in sorted(names_by_ns.items())}
            found["replacements"] = replacements(pods_by_ns, moved)
            for name in sorted(set(maintenances)):  # each one's own events, not every NodeMaintenance's
                events = client.get(paths.events(EVENT_NAMESPACE), {
                    "fieldSelector": f"involvedObject.kind=NodeMaintenance,involvedObject.name={name}"}).get("items", [])
                if events:
                    found["events"][name] = events
    except Exception as exc:  # the report is written anyway, without what could not be read
        found["notes"].append(f"the cluster could not be read for the report ({type(exc).__name__}: {exc}): "
                              "replacement pods unknown, earlier runs only from the NodeMaintenance status")
    return found
