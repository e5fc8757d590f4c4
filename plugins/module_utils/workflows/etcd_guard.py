"""etcd quorum guard: may a control-plane node be disrupted without etcd losing quorum?

Two flavours, decided by pure functions over what was read:

- OpenShift: the single PodDisruptionBudget in ``openshift-etcd`` (``etcd-guard-pdb``,
  formerly ``etcd-quorum-guard``) guards one guard pod per member. Allowed when it allows a
  disruption, or when this node's guard pod is already not Ready (or absent): the node is
  already disrupted. No PDB, or several: not allowed, the quorum cannot be checked.
- kubeadm: etcd runs as static pods in ``kube-system`` labelled ``component=etcd``. Members
  are those pods; a member is healthy when its pod is Ready and its node is not disrupted
  (see below); quorum is members // 2 + 1; allowed when the healthy members on other nodes
  still make a quorum.

A node counts as disrupted (under maintenance) when it is cordoned, carries the
``medik8s.io/drain`` taint, or is about to be: another valid node lease names it (our
maintenance or a Node Health Check remediation) or it holds a maintenance slot taken before
ours. The last two close the race of two runs checking the guard before either cordons.

No etcd found at all (external etcd): allowed, with a warning.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Set

from ..api import paths
from ..api.client import Client

FLAVOURS = ("auto", "kubeadm", "openshift", "none")
OPENSHIFT_NAMESPACE = "openshift-etcd"
OPENSHIFT_PDB_NAMES = ("etcd-guard-pdb", "etcd-quorum-guard")
KUBEADM_NAMESPACE = "kube-system"
KUBEADM_SELECTOR = "component=etcd"
DRAIN_TAINT = "medik8s.io/drain"
NO_ETCD_WARNING = ("no etcd found on the cluster (no {guard} namespace, no pods {selector} in {namespace}): "
                   "assuming an external etcd, the quorum guard does not apply")

Obj = Dict[str, Any]


@dataclass
class Verdict:
    allowed: bool
    flavour: str
    reason: str
    members: int = 0
    healthy: int = 0
    quorum: int = 0
    # True when waiting cannot help: even with every other member healthy there is no quorum
    never: bool = False
    unhealthy: List[str] = field(default_factory=list)
    warning: Optional[str] = None

    def as_dict(self) -> Dict[str, Any]:
        return asdict(self)


def blocked_message(node: str) -> str:
    """The event message of docs/design.md §4.2."""
    return f"etcd quorum would not be kept while node {node} is in maintenance"


def quorum(members: int) -> int:
    return members // 2 + 1


def pod_ready(pod: Obj, unknown_is_ready: bool = False) -> bool:
    accepted = ("True", "Unknown") if unknown_is_ready else ("True",)
    return any(c.get("type") == "Ready" and c.get("status") in accepted
               for c in (pod.get("status") or {}).get("conditions") or [])


def pod_node(pod: Obj) -> str:
    return (pod.get("spec") or {}).get("nodeName") or ""


def node_disrupted(node: Obj) -> bool:
    """Cordoned or drain-tainted: already under maintenance, whoever did it."""
    spec = node.get("spec") or {}
    return bool(spec.get("unschedulable")) or any(t.get("key") == DRAIN_TAINT for t in spec.get("taints") or [])


def kubeadm_verdict(node: str, pods: Iterable[Obj], disrupted: Set[str]) -> Verdict:
    members = [p for p in pods if not p.get("metadata", {}).get("deletionTimestamp")]
    if not members:
        return Verdict(False, "kubeadm", f"{blocked_message(node)}: no etcd pods found (etcd_guard: kubeadm); "
                                         "for an external etcd use etcd_guard: none", never=True)
    need = quorum(len(members))
    unhealthy: List[str] = []
    healthy_elsewhere = 0
    for pod in members:
        where = pod_node(pod)
        if not pod_ready(pod):
            unhealthy.append(f"{where} (etcd pod {pod['metadata']['name']} not Ready)")
        elif where in disrupted and where != node:
            unhealthy.append(f"{where} (under maintenance)")
        elif where != node:
            healthy_elsewhere += 1
    own = any(pod_node(p) == node for p in members)
    healthy = healthy_elsewhere + (1 if own and any(pod_node(p) == node and pod_ready(p) for p in members) else 0)
    counts = dict(members=len(members), healthy=healthy, quorum=need, unhealthy=sorted(unhealthy))
    if healthy_elsewhere >= need:
        return Verdict(True, "kubeadm", f"etcd keeps its quorum without node {node}: {healthy_elsewhere} of "
                                        f"{len(members)} members stay healthy, quorum is {need}", **counts)
    never = len(members) - (1 if own else 0) < need
    detail = (f"{healthy_elsewhere} of {len(members)} etcd members would stay healthy, quorum is {need}"
              + (f"; not healthy: {', '.join(sorted(unhealthy))}" if unhealthy else ""))
    if never:
        detail += (f"; node {node} can never be maintained under this guard: with {len(members)} member(s) etcd "
                   "cannot lose one. Add control-plane nodes (etcd members) first, or maintain it without the guard "
                   "(node_maintenance_etcd_guard: none; etcd_guard: none for the modules) after an etcd backup, at "
                   "your own risk")
    return Verdict(False, "kubeadm", f"{blocked_message(node)}: {detail}", never=never, **counts)


def _selected(pod: Obj, match_labels: Dict[str, str]) -> bool:
    labels = pod.get("metadata", {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in match_labels.items())


def openshift_verdict(node: str, pdbs: List[Obj], pods: Iterable[Obj], pending: Set[str],
                      namespace: str = OPENSHIFT_NAMESPACE) -> Verdict:
    if not pdbs:
        return Verdict(False, "openshift", f"{blocked_message(node)}: no PodDisruptionBudget in namespace "
                                           f"{namespace}, the etcd quorum cannot be checked")
    if len(pdbs) > 1:
        names = ", ".join(sorted(p["metadata"]["name"] for p in pdbs))
        return Verdict(False, "openshift", f"{blocked_message(node)}: several PodDisruptionBudgets in namespace "
                                           f"{namespace} ({names}), the etcd quorum cannot be checked")
    pdb = pdbs[0]
    name = pdb["metadata"]["name"]
    allowed = int((pdb.get("status") or {}).get("disruptionsAllowed") or 0)
    match = ((pdb.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    guards = [p for p in pods if _selected(p, match)]
    # The PDB only sees pods that are down; nodes that are about to go down count too.
    about_to_go = sorted({pod_node(p) for p in guards if pod_node(p) in pending and pod_node(p) != node
                          and pod_ready(p, unknown_is_ready=True)})
    effective = allowed - len(about_to_go)
    counts = dict(members=len(guards), healthy=sum(1 for p in guards if pod_ready(p, True)),
                  unhealthy=[f"{n} (under maintenance)" for n in about_to_go])
    if effective >= 1:
        return Verdict(True, "openshift", f"PodDisruptionBudget {namespace}/{name} allows {allowed} disruption(s)"
                       + (f", {len(about_to_go)} taken by nodes going into maintenance" if about_to_go else ""),
                       **counts)
    own = [p for p in guards if pod_node(p) == node]
    if not own:
        why = f"no etcd guard pod on node {node}: it is already disrupted or not an etcd member"
        return Verdict(True, "openshift", why, **counts)
    if not any(pod_ready(p, unknown_is_ready=True) for p in own):
        why = f"the etcd guard pod of node {node} is already not Ready: the node is already disrupted"
        return Verdict(True, "openshift", why, **counts)
    why = f"PodDisruptionBudget {namespace}/{name} allows {allowed} disruption(s)"
    if about_to_go:
        why += f" and nodes {', '.join(about_to_go)} are going into maintenance"
    return Verdict(False, "openshift", f"{blocked_message(node)}: {why}", **counts)


def no_etcd_verdict(guard_namespace: str, selector: str, namespace: str) -> Verdict:
    warning = NO_ETCD_WARNING.format(guard=guard_namespace, selector=selector, namespace=namespace)
    return Verdict(True, "none", "no etcd found: the quorum guard does not apply", warning=warning)


# -- reading the cluster --------------------------------------------------------------------
@dataclass
class Options:
    flavour: str = "auto"
    member_selector: str = KUBEADM_SELECTOR  # the etcd members' pods (the module option etcd_pod_selector)
    pod_namespace: str = KUBEADM_NAMESPACE
    guard_namespace: str = OPENSHIFT_NAMESPACE


pods_path = paths.pods
pdbs_path = paths.pdbs


def detect(client: Client, options: Options) -> str:
    """openshift when the guard namespace exists, kubeadm when etcd pods exist, else none."""
    if options.flavour != "auto":
        return options.flavour
    if client.get_or_none(paths.namespace(options.guard_namespace)) is not None:
        return "openshift"
    pods = client.get(pods_path(options.pod_namespace), {"labelSelector": options.member_selector, "limit": 1})
    return "kubeadm" if pods.get("items") else "none"


def watched_paths(flavour: str, options: Options) -> List[tuple]:
    """(path, query) of the collections whose changes can change the verdict."""
    if flavour == "openshift":
        return [(pdbs_path(options.guard_namespace), {}), (pods_path(options.guard_namespace), {})]
    if flavour == "kubeadm":
        return [(pods_path(options.pod_namespace), {"labelSelector": options.member_selector})]
    return []


def disrupted_nodes(client: Client, names: Iterable[str], about_to_go: Set[str]) -> Set[str]:
    """Of ``names``, those under maintenance: ``about_to_go`` plus those cordoned or drain-tainted."""
    found = set(about_to_go)
    for name in set(names) - found:
        node = client.get_or_none(paths.node(name))
        if node is None or node_disrupted(node):
            found.add(name)
    return found


def verdict(client: Client, node: str, flavour: str, options: Options, about_to_go: Set[str]) -> Verdict:
    """Read what the flavour needs and decide."""
    if flavour == "none":
        return no_etcd_verdict(options.guard_namespace, options.member_selector, options.pod_namespace)
    if flavour == "openshift":
        pdbs = client.get(pdbs_path(options.guard_namespace)).get("items", [])
        pods = client.get(pods_path(options.guard_namespace)).get("items", [])
        disrupted = disrupted_nodes(client, {pod_node(p) for p in pods} - {node, ""}, about_to_go)
        return openshift_verdict(node, pdbs, pods, disrupted, options.guard_namespace)
    pods = client.get(pods_path(options.pod_namespace), {"labelSelector": options.member_selector}).get("items", [])
    if not pods and options.flavour == "auto":
        return no_etcd_verdict(options.guard_namespace, options.member_selector, options.pod_namespace)
    disrupted = disrupted_nodes(client, {pod_node(p) for p in pods} - {node, ""}, about_to_go)
    return kubeadm_verdict(node, pods, disrupted)
