# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the run report reads from the cluster once the playbook has ended (docs/report.md):
where each evicted pod's replacement landed, and the events of the NodeMaintenances that an
earlier run began (what that run did for the nodes this one adopted). A few list requests,
each bounded; when the cluster cannot be read the report is written without them and says so.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.nmo.maintenance.plugins.module_utils.api.client import (
    CONNECTION_ENV,
    ConnectionOptions,
    connect,
)
from ansible_collections.nmo.maintenance.plugins.module_utils.stores.events import EVENT_NAMESPACE
from ansible_collections.nmo.maintenance.plugins.plugin_utils.report_model import epoch_of

BUDGET = 15.0  # seconds for all the report's reads
MASKED = "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"


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
            pods_by_ns = {}
            for namespace in sorted({m[0].partition("/")[0] for m in moved}):
                pods_by_ns[namespace] = client.get(f"/api/v1/namespaces/{namespace}/pods").get("items", [])
            found["replacements"] = replacements(pods_by_ns, moved)
            if maintenances:
                events = client.get(f"/api/v1/namespaces/{EVENT_NAMESPACE}/events",
                                    {"fieldSelector": "involvedObject.kind=NodeMaintenance"}).get("items", [])
                for ev in events:
                    name = (ev.get("involvedObject") or {}).get("name")
                    if name in maintenances:
                        found["events"].setdefault(name, []).append(ev)
    except Exception as exc:  # the report is written anyway, without what could not be read
        found["notes"].append(f"the cluster could not be read for the report ({type(exc).__name__}: {exc}): "
                              "replacement pods unknown, earlier runs only from the NodeMaintenance status")
    return found
