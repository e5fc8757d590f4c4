"""The Deployment behind a pod (through its ReplicaSet), read for surge-first (model/surge.py),
and its restart: two reads a refused pod (the drain with ``surge`` on, the pre-flight), one
patch a Deployment restarted (meta/rbac/clusterrole-surge.yml grants it)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ..api import paths
from ..api.client import Client
from ..model import surge
from ..model.pod_filters import controller_of

Obj = Dict[str, Any]
APPS = "/apis/apps/v1"


def deployment_path(namespace: str, name: str) -> str:
    return f"{deployments(namespace)}/{paths.segment(name)}"


def deployments(namespace: str) -> str:
    return f"{APPS}/namespaces/{paths.segment(namespace)}/deployments"


def replicasets(namespace: str) -> str:
    return f"{APPS}/namespaces/{paths.segment(namespace)}/replicasets"


def named(client: Client, collection: str, name: str) -> Optional[Obj]:
    """One object by name, as a list with a field selector: the shipped ClusterRole grants
    list on these (docs/rbac.md), not get; None when it is not there."""
    items = client.get(collection, {"fieldSelector": f"metadata.name={name}"}).get("items") or []
    return items[0] if items else None


def owners(client: Client, pod: Obj) -> Tuple[Optional[Obj], Optional[Obj]]:
    """(its ReplicaSet, that ReplicaSet's Deployment); None for what it does not have."""
    ref = controller_of(pod)
    namespace = pod.get("metadata", {}).get("namespace", "")
    if ref is None or ref.get("kind") != "ReplicaSet":
        return None, None
    replicaset = named(client, replicasets(namespace), ref["name"])
    if replicaset is None:
        return None, None
    owner = controller_of(replicaset)
    if owner is None or owner.get("kind") != "Deployment":
        return replicaset, None
    return replicaset, named(client, deployments(namespace), owner["name"])


def judge(client: Client, pod: Obj) -> surge.Verdict:
    replicaset, deployment = owners(client, pod)
    return surge.judge(pod, replicaset, deployment)


def restart(client: Client, namespace: str, name: str, now_iso: str) -> Obj:
    """``kubectl rollout restart``: the pod template's restart annotation, one merge patch."""
    return client.patch(deployment_path(namespace, name), surge.restart_patch(now_iso), "merge")


def look(client: Client, namespace: str, name: str) -> Tuple[Optional[Obj], List[Obj]]:
    """The Deployment and its pods (by its selector's matchLabels), to see how its rollout goes."""
    deployment = named(client, deployments(namespace), name)
    if deployment is None:
        return None, []
    labels = (deployment.get("spec", {}).get("selector") or {}).get("matchLabels") or {}
    selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
    pods = client.get(paths.pods(namespace), {"labelSelector": selector}).get("items", []) if selector else []
    return deployment, pods
