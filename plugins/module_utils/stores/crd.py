"""The NodeMaintenance CustomResourceDefinition we ship: NMO's schema, printer columns,
and the API server itself refusing a change of ``spec.nodeName`` (a CEL rule, so no
webhook server has to run anywhere)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Dict, Iterator

from ..api import paths
from ..api.waiter import Watcher, poll_until, wait_until
from ..errors import ApiError, NmoError, NotFound, TooManyRequests

GROUP = "nodemaintenance.medik8s.io"
VERSION = "v1beta1"
KIND = "NodeMaintenance"
PLURAL = "nodemaintenances"
CRD_NAME = f"{PLURAL}.{GROUP}"
CRD_PATH = paths.CRDS
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "nmo.maintenance"
# Bump when the manifest below changes, so `nmo_crd state=present` upgrades installed copies.
SCHEMA_REVISION = "7"  # 3: status.migrations (KubeVirt live migrations of the drain); 4: drainBatch, skippedPods;
# 5: progress (the node's progress record, model/record.py); 6: progress.waited; 7: progress.failedRun
REVISION_ANNOTATION = "nmo.maintenance/schema-revision"
NODE_NAME_IMMUTABLE = "nodeName is immutable and cannot be changed after creation"

PHASES = ("Pending", "Running", "Succeeded", "Failed")


def _integer(description: str, **extra: Any) -> Dict[str, Any]:
    return {"type": "integer", "description": description, **extra}


def manifest() -> Dict[str, Any]:
    status = {
        "type": "object",
        "description": "Observed state of the maintenance, written by whoever runs it.",
        "properties": {
            "phase": {"type": "string", "description": "Pending, Running, Succeeded or Failed.",
                      "enum": list(PHASES)},
            # no bounds: NMO's own CRD has none and computes values outside 0-100 on odd nodes;
            # either CRD must take the other's objects
            "drainProgress": _integer("Percent of the pods to evict that are gone."),
            "totalpods": _integer("Pods on the node when the drain started."),
            "evictionPods": _integer("Pods to evict when the drain started."),
            "pendingPods": {"type": "array", "items": {"type": "string"},
                            "description": "Names of the pods not yet gone."},
            "pendingPodsRefs": {
                "type": "array", "description": "Namespace and name of the pods not yet gone.",
                "items": {"type": "object", "properties": {"namespace": {"type": "string"},
                                                           "name": {"type": "string"}}},
            },
            "lastError": {"type": "string", "description": "The latest error, if any."},
            "lastUpdate": {"type": "string", "format": "date-time",
                           "description": "When the status was last written."},
            "errorOnLeaseCount": _integer("Consecutive failures to obtain the lease."),
            # Ours, not NMO's (an NMO-installed CRD prunes it): the drain's KubeVirt live
            # migrations (kubevirt: migrate), one entry per VM whose pod it had to move.
            "migrations": {
                "type": "array", "description": "KubeVirt live migrations made or followed by the drain.",
                "items": {"type": "object", "properties": {
                    k: {"type": "string"} for k in ("namespace", "vmi", "pod", "state", "migration", "phase",
                                                    "targetNode", "started", "message")}},
            },
            # Ours too (drain rules, docs/drain-rules.md): the order batch being drained, and the
            # pods a rule or their drain label keeps on the node.
            "drainBatch": {"type": "string", "description": "The order batch being drained (drain rules)."},
            "skippedPods": {
                "type": "array", "description": "Pods a drain rule or their drain label keeps on the node.",
                "items": {"type": "object", "properties": {
                    k: {"type": "string"} for k in ("namespace", "name", "reason")}},
            },
            # Ours (model/record.py, docs/design.md §18.5): how far the node's maintenance got, written
            # by every phase as it starts and read by the failure policy, the summary and the report.
            "progress": {
                "type": "object", "description": "The node's progress record (this collection's).",
                "properties": {
                    "run": {"type": "string", "description": "The run that wrote it last."},
                    "phase": {"type": "string", "description": "The phase reached (the last that started)."},
                    "reached": {"type": "array", "items": {"type": "string"},
                                "description": "The begin steps done."},
                    "held": {"type": "string", "description": "Which leases the run holds: none, slot or all."},
                    "places": {"type": "array", "items": {"type": "string"},
                               "description": "The leases held: slot, topology places, node lease."},
                    "waited": {"type": "number", "description": "Seconds the begin waited for its places."},
                    "failure": {"type": "string", "description": "The error, once it failed."},
                    "failedPhase": {"type": "string", "description": "The phase it failed in."},
                    "failedRun": {"type": "string", "description": "The run it failed in."},
                    "requests": {"type": "object", "additionalProperties": {"type": "integer"},
                                 "description": "The API requests of the node's calls, by kind."},
                },
            },
        },
    }
    spec = {
        "type": "object",
        "required": ["nodeName"],
        "properties": {
            "nodeName": {
                "type": "string", "minLength": 1, "description": "The node to maintain.",
                "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": NODE_NAME_IMMUTABLE}],
            },
            "reason": {"type": "string", "description": "Why the node is maintained."},
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": CRD_NAME,
            "labels": {MANAGED_BY_LABEL: MANAGED_BY},
            "annotations": {REVISION_ANNOTATION: SCHEMA_REVISION},
        },
        "spec": {
            "group": GROUP,
            "scope": "Cluster",
            "names": {"kind": KIND, "listKind": KIND + "List", "plural": PLURAL,
                      "singular": "nodemaintenance", "shortNames": ["nm"]},
            "versions": [{
                "name": VERSION, "served": True, "storage": True,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Node", "type": "string", "jsonPath": ".spec.nodeName"},
                    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
                    {"name": "Progress", "type": "integer", "jsonPath": ".status.drainProgress"},
                    {"name": "Reason", "type": "string", "priority": 1, "jsonPath": ".spec.reason"},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                ],
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "description": "A maintenance of one node: cordon, taints, drain, and back.",
                    "properties": {
                        "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                        "metadata": {"type": "object"}, "spec": spec, "status": status,
                    },
                }},
            }],
        },
    }


def is_ours(crd: Dict[str, Any]) -> bool:
    return crd.get("metadata", {}).get("labels", {}).get(MANAGED_BY_LABEL) == MANAGED_BY


def installed_revision(crd: Dict[str, Any]) -> str:
    return crd.get("metadata", {}).get("annotations", {}).get(REVISION_ANNOTATION, "")


def _wait_established(client: Any, timeout: float = 30.0) -> None:
    def established() -> Any:
        crd = watcher.objects.get(f"/{CRD_NAME}")
        conditions = (crd or {}).get("status", {}).get("conditions") or []
        return True if any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions) else None

    with Watcher(client, CRD_PATH, {"fieldSelector": f"metadata.name={CRD_NAME}"}) as watcher:
        wait_until(watcher, established, timeout, lambda: f"CRD {CRD_NAME} to be established")
    _wait_served(client, timeout)


def _wait_served(client: Any, timeout: float) -> None:
    """Right after Established, the API server may answer 404 or 429 'storage is
    (re)initializing' for a moment; the first NodeMaintenance must not meet that. No watch
    can show it (the resource is what is not served yet): a short bounded backoff."""
    def served() -> Any:
        try:
            client.get(paths.custom(GROUP, VERSION, PLURAL), {"limit": 1})
            return True
        except (NotFound, TooManyRequests):
            return None

    poll_until(served, timeout, lambda: f"the API server to serve {PLURAL} after CRD {CRD_NAME} was established")


RULE_DROPPED = (
    "the API server dropped the NodeMaintenance CRD's validation rule (x-kubernetes-validations on spec.nodeName: "
    "it refuses a change of the node a maintenance names). CRD validation rules are on by default from Kubernetes "
    "1.25 and always on from 1.29; this collection is tested on 1.31 to 1.37. It never changes spec.nodeName "
    "itself, so its own runs are not affected, but nothing stops another client from retargeting a "
    "NodeMaintenance: upgrade the cluster, or enable the CustomResourceValidationExpressions feature gate")


def rule_dropped(crd: Dict[str, Any]) -> bool:
    """Whether the stored CRD lacks our CEL rule: a server without validation rules (before
    1.25, or with the feature gate off) drops the field without a word."""
    for version in (crd.get("spec") or {}).get("versions") or []:
        if version.get("name") != VERSION:
            continue
        schema = ((version.get("schema") or {}).get("openAPIV3Schema") or {})
        node_name = (((schema.get("properties") or {}).get("spec") or {}).get("properties") or {}).get("nodeName") or {}
        return not node_name.get("x-kubernetes-validations")
    return False


def ensure(client: Any) -> Dict[str, Any]:
    """Install our CRD, or upgrade an older revision of it; leave one installed by NMO alone.

    Returns ``{"state": created|upgraded|unchanged|foreign, "changed": bool}``, with
    ``"warning": RULE_DROPPED`` when the stored CRD of ours lacks its validation rule.
    """
    existing = client.get_or_none(paths.crd(CRD_NAME))
    wanted = manifest()
    if existing is None:
        result = {"state": "created", "changed": True}
        if not client.dry_run:
            with _install_permission("is not installed", "install"):
                stored = client.post(CRD_PATH, wanted)
            _wait_established(client)
            _note_rule(result, stored)
        return result
    if not is_ours(existing):
        return {"state": "foreign", "changed": False}
    if installed_revision(existing) == SCHEMA_REVISION:
        return _note_rule({"state": "unchanged", "changed": False}, existing)
    result = {"state": "upgraded", "changed": True}
    if not client.dry_run:
        wanted["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
        older = f"is at revision {installed_revision(existing) or 'none'}, this collection ships {SCHEMA_REVISION}"
        with _install_permission(older, "upgrade"):
            stored = client.put(paths.crd(CRD_NAME), wanted)
        _wait_established(client)
        _note_rule(result, stored)
    return result


def _note_rule(result: Dict[str, Any], stored: Dict[str, Any]) -> Dict[str, Any]:
    if rule_dropped(stored):
        result["warning"] = RULE_DROPPED
    return result


@contextmanager
def _install_permission(state: str, verb: str) -> Iterator[None]:
    """A 403 on installing or upgrading the CRD says which opt-in role that needs (docs/rbac.md)."""
    try:
        yield
    except ApiError as exc:
        if exc.status != 403:
            raise
        raise NmoError(
            f"the NodeMaintenance CRD {CRD_NAME} {state}, and this identity may not {verb} it "
            f"(the API server refused: {exc.server_message}). Bind the nmo-maintenance-crd-install ClusterRole "
            "(meta/rbac/clusterrole-crd-install.yml) to it for this run, or have an admin run once: "
            "ansible localhost -m nmo.maintenance.nmo_crd -a object=crd. See docs/rbac.md.", status=403) from None


def remove(client: Any) -> Dict[str, Any]:
    """Delete our CRD (and with it every NodeMaintenance); never one installed by NMO."""
    existing = client.get_or_none(paths.crd(CRD_NAME))
    if existing is None:
        return {"state": "absent", "changed": False}
    if not is_ours(existing):
        return {"state": "foreign", "changed": False}
    if not client.dry_run:
        client.delete(paths.crd(CRD_NAME))
    return {"state": "deleted", "changed": True}
