"""The cluster's nodes as Ansible hosts: what the inventory plugin ``nmo.maintenance.nodes``
(plugins/inventory/nodes.py) makes of each node it lists. Pure: the store lists the nodes.

A host is a small record, built from one node as soon as its page is read (the list is
never held whole): its name, its variables and the groups its role labels put it in.
``workers`` is every node that is not a control-plane node (kubeadm gives workers no role
label); ``control_plane`` the nodes with ``node-role.kubernetes.io/control-plane`` (or the
older ``master``). The records are what the inventory cache keeps.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ..errors import InputError
from .marks import CONTROL_PLANE_LABELS, is_ready

ROLE_PREFIX = "node-role.kubernetes.io/"
WORKERS, CONTROL_PLANE = "workers", "control_plane"
HOST_ADDRESSES = {"internal_ip": "InternalIP", "external_ip": "ExternalIP", "hostname": "Hostname", "name": None}


def roles(labels: Dict[str, str]) -> List[str]:
    """The node's roles, from its ``node-role.kubernetes.io/<role>`` labels, sorted."""
    return sorted(key[len(ROLE_PREFIX):] for key in labels if key.startswith(ROLE_PREFIX) and key != ROLE_PREFIX)


def role_groups(labels: Dict[str, str]) -> List[str]:
    return [CONTROL_PLANE] if any(label in labels for label in CONTROL_PLANE_LABELS) else [WORKERS]


def address(node: Dict[str, Any], kind: str) -> Optional[str]:
    """The node's address of ``kind`` (a key of HOST_ADDRESSES); None when it has none
    (Ansible then reaches the host by its name)."""
    if kind not in HOST_ADDRESSES:
        raise InputError(f"host_address: {kind!r} is not one of {', '.join(HOST_ADDRESSES)}")
    wanted = HOST_ADDRESSES[kind]
    if wanted is None:
        return node["metadata"]["name"]
    for entry in node.get("status", {}).get("addresses") or []:
        if entry.get("type") == wanted and entry.get("address"):
            return str(entry["address"])
    return None


def host(node: Dict[str, Any], host_address: str = "internal_ip") -> Dict[str, Any]:
    """One node's host: ``{"name", "vars", "groups"}``."""
    meta = node.get("metadata", {})
    labels = dict(meta.get("labels") or {})
    spec, status = node.get("spec", {}), node.get("status", {})
    hostvars: Dict[str, Any] = {
        "node_maintenance_node": meta["name"],
        "nmo_labels": labels,
        "nmo_roles": roles(labels),
        "nmo_creation_timestamp": meta.get("creationTimestamp") or "",
        "nmo_unschedulable": bool(spec.get("unschedulable")),
        "nmo_ready": is_ready(node),
        "nmo_addresses": {a.get("type"): a.get("address") for a in status.get("addresses") or [] if a.get("type")},
        "nmo_kubelet_version": (status.get("nodeInfo") or {}).get("kubeletVersion", ""),
    }
    reached = address(node, host_address)
    if reached is not None:
        hostvars["ansible_host"] = reached
    return {"name": meta["name"], "vars": hostvars, "groups": role_groups(labels)}
