"""Every resource URL the collection asks the API server for, built in one place.

A name goes into a path only through ``segment``: quoted, and never '', '.' or '..', which
would address another resource ('/api/v1/nodes/..' is '/api/v1'). The rest of the core asks
these functions for a path and never writes one by hand, so a resource's address is read
and changed here alone.
"""

from __future__ import annotations

from typing import Optional
from urllib.parse import quote

from ..errors import InputError

CORE = "/api/v1"
NODES = f"{CORE}/nodes"
PODS = f"{CORE}/pods"
NAMESPACES = f"{CORE}/namespaces"
PDBS = "/apis/policy/v1/poddisruptionbudgets"
LEASES_API = "/apis/coordination.k8s.io/v1"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
WEBHOOKS = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"


def segment(name: str) -> str:
    """One segment of a URL path. '', '.' and '..' are refused: quoted as they are, they would
    address another resource ('/api/v1/nodes/..' is '/api/v1')."""
    if name in ("", ".", ".."):
        raise InputError(f"{name!r} cannot be the name of a Kubernetes object")
    return quote(name, safe="")


def _named(base: str, name: Optional[str]) -> str:
    return f"{base}/{segment(name)}" if name else base


def node(name: str) -> str:
    return f"{NODES}/{segment(name)}"


def namespace(name: str) -> str:
    return f"{NAMESPACES}/{segment(name)}"


def pods(namespace_name: Optional[str] = None) -> str:
    """The pods of one namespace, or of every namespace."""
    return f"{namespace(namespace_name)}/pods" if namespace_name else PODS


def pod(namespace_name: str, name: str) -> str:
    return f"{pods(namespace_name)}/{segment(name)}"


def eviction(namespace_name: str, name: str) -> str:
    return pod(namespace_name, name) + "/eviction"


def pdbs(namespace_name: Optional[str] = None) -> str:
    """The PodDisruptionBudgets of one namespace, or of every namespace."""
    return f"/apis/policy/v1/namespaces/{segment(namespace_name)}/poddisruptionbudgets" if namespace_name else PDBS


def events(namespace_name: str) -> str:
    return f"{namespace(namespace_name)}/events"


def leases(namespace_name: str, name: Optional[str] = None) -> str:
    return _named(f"{LEASES_API}/namespaces/{segment(namespace_name)}/leases", name)


def crd(name: Optional[str] = None) -> str:
    return _named(CRDS, name)


def custom(group: str, version: str, plural: str, namespace_name: Optional[str] = None,
           name: Optional[str] = None, subresource: str = "") -> str:
    """A custom resource (NodeMaintenance, KubeVirt's VMIs and migrations): cluster-wide, or in
    one namespace, the collection or one object (and one of its subresources, as ``status``)."""
    where = f"/namespaces/{segment(namespace_name)}" if namespace_name else ""
    path = _named(f"/apis/{group}/{version}{where}/{plural}", name)
    return f"{path}/{subresource}" if name and subresource else path
