"""Which volumes still hold a node after its drain (docs/design.md §4.7.8). Pure.

A node is free of volumes when its ``status.volumesAttached`` is empty and no
``VolumeAttachment`` (storage.k8s.io/v1) names it in ``spec.nodeName``, as Cluster API
waits for before it powers a machine off. The volumes of pods that stay on the node
(DaemonSet pods, pods the drain skipped) stay attached on purpose and are not waited for:
they are given as the names of their PersistentVolumes and the unique names the kubelet
reports for them (``kubernetes.io/csi/<driver>^<volumeHandle>``).
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Set, Tuple


def claims_of(pods: Iterable[Dict[str, Any]]) -> List[Tuple[str, str]]:
    """(namespace, claim) of every PersistentVolumeClaim the pods mount, each once."""
    seen: Dict[Tuple[str, str], None] = {}
    for pod in pods:
        namespace = pod.get("metadata", {}).get("namespace", "")
        for volume in pod.get("spec", {}).get("volumes") or []:
            claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if claim:
                seen[(namespace, claim)] = None
    return list(seen)


def unique_names(pv: Dict[str, Any]) -> Set[str]:
    """The names a PersistentVolume has in ``volumesAttached`` (CSI: driver^handle)."""
    csi = pv.get("spec", {}).get("csi") or {}
    names = set()
    if csi.get("driver") and csi.get("volumeHandle"):
        names.add(f"kubernetes.io/csi/{csi['driver']}^{csi['volumeHandle']}")
    return names


def still_attached(node_name: str, node: Dict[str, Any], attachments: Iterable[Dict[str, Any]],
                   kept_pvs: Set[str] = frozenset(), kept_names: Set[str] = frozenset()) -> List[str]:
    """What still holds the node, each named for the operator, sorted; empty when free."""
    held: List[str] = []
    for entry in node.get("status", {}).get("volumesAttached") or []:
        name = entry.get("name", "")
        if name and name not in kept_names:
            held.append(f"volumesAttached {name}")
    for va in attachments:
        spec = va.get("spec") or {}
        if spec.get("nodeName") != node_name:
            continue
        pv = (spec.get("source") or {}).get("persistentVolumeName") or ""
        if pv and pv in kept_pvs:
            continue
        what = f"VolumeAttachment {va.get('metadata', {}).get('name', '')}"
        held.append(what + (f" (PV {pv})" if pv else ""))
    return sorted(held)


def message(node_name: str, held: List[str]) -> str:
    return f"waiting for volumes to detach from node {node_name}: {', '.join(held)}"
