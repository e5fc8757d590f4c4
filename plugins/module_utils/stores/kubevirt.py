"""The pre-flight's view of KubeVirt (``kubevirt: migrate``): of the virt-launcher pods whose
dry-run eviction a PodDisruptionBudget refuses, which ones the drain will live-migrate
(``go (migrate)``) and which ones it cannot (blocked, with the VMI's own reason).

One list of the cluster's VirtualMachineInstances, made only when such a pod exists.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ..api import paths
from ..api.client import Client
from ..errors import ApiError, NotFound
from ..model import kubevirt as kv


def vmi_path(namespace: Optional[str] = None, name: Optional[str] = None) -> str:
    return paths.custom(kv.GROUP, kv.VERSION, kv.VMI_PLURAL, namespace, name)


def vmim_path(namespace: Optional[str] = None, name: Optional[str] = None) -> str:
    return paths.custom(kv.GROUP, kv.VERSION, kv.VMIM_PLURAL, namespace, name)


def verdicts(client: Client, mode: str, refused: List[Dict[str, Any]]) -> Dict[str, kv.Verdict]:
    """``namespace/pod`` -> what a drain in ``mode`` does about it, for the refused VM pods."""
    if mode != kv.MIGRATE:
        return {}
    launchers = kv.launchers(refused)
    if not launchers:
        return {}
    try:
        items = client.get(vmi_path()).get("items", [])
    except NotFound:  # KubeVirt's CRDs are not installed
        items = []
    except ApiError as exc:
        why = f"cannot read VirtualMachineInstances ({exc.status}: {exc.server_message or exc.message})"
        return {pod: kv.Verdict(kv.BLOCKED, why) for pod in launchers}
    vmis = {f"{v['metadata'].get('namespace', '')}/{v['metadata']['name']}": v for v in items}
    return {pod: kv.verdict(vmis.get(vmi), vmi) for pod, vmi in launchers.items()}


def note(pod_key: str, verdict: kv.Verdict) -> str:
    """The pre-flight's line for a VM pod the drain will have migrated."""
    if verdict.action == kv.KUBEVIRT:
        return f"{pod_key}: {verdict.why}"
    return f"{pod_key}: {verdict.why}, the drain live-migrates it (kubevirt=migrate)"
