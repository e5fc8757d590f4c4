"""What the pre-flight reads, scaled to the nodes it judges rather than to the cluster.

- Nodes: one judged node, or a few (at most ``FEW``) that are a small share of the cluster
  (counted with a one-item list), are read one by one; the other nodes are then listed
  only when capacity must be judged (a replacement needs a home), a page at a time
  (``NodePages``) and only as far as placement needs: until enough candidate homes are
  found, and to the end only when a replacement would stay Pending (its message counts
  every node). Many judged nodes: every node is listed at once. Each node is kept only as
  the fields the scheduler's node filters look at (``slim_node``).
- Pods of the judged nodes: one ``fieldSelector=spec.nodeName=<node>`` list per node,
  or, when the judged nodes are a large share of the cluster, one paginated list of every
  pod (``whole_list_is_cheaper``), streamed page by page: the judged nodes' pods are kept,
  every other pod only adds its requests to its node's sum.
- PodDisruptionBudgets: one paginated list; the pods a budget selects are counted (not
  kept) by one ``labelSelector`` list in its namespace, only for the budgets that guard a
  pod to evict (``CountedBudgets``).
- Capacity: the pods of candidate nodes (those that could take a replacement by their
  labels, taints, cordon and readiness) are read only when needed, in growing chunks,
  and at most ``nodes_to_read`` of them, as the scheduler itself scores only a share of
  the feasible nodes of a large cluster. A node whose pods were not read is no home for a
  replacement (placement.NOT_READ): the answer errs towards "would stay Pending"
  (blocked), never towards "fits".
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Set

from ..api import paths
from ..api.client import Client
from ..errors import InputError
from ..model import budgets
from ..model.placement import RESOURCES, NodeRoom, node_room, pod_requests
from ..model.pod_filters import is_finished

PAGE = 500
PODS = paths.PODS
# A list request costs the API server about as much as serialising this many pods; measured
# on the local control plane (docs/scale.md: one node's pod list against every pod). Per-node lists win while
# (judged nodes) x (pods a node + this) < (every pod).
LIST_OVERHEAD_PODS = 30
FEW = 20  # judged nodes read one by one (a GET each) rather than by listing every node

Obj = Dict[str, Any]


def pages(client: Client, path: str, query: Optional[Dict[str, Any]] = None) -> Iterator[List[Obj]]:
    """A list, page by page (``limit``/``continue``): only one page is held at a time."""
    token = None
    while True:
        page = client.get(path, {**(query or {}), "limit": PAGE, "continue": token})
        yield page.get("items") or []
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return


def items(client: Client, path: str, query: Optional[Dict[str, Any]] = None) -> Iterator[Obj]:
    for page in pages(client, path, query):
        yield from page


def slim_node(node: Obj) -> Obj:
    """What placement and the report read of a node; the rest (images, conditions'
    messages, managed fields) is dropped as each page arrives."""
    meta, spec, status = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
    ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
    return {"metadata": {"name": meta.get("name", ""), "labels": meta.get("labels") or {}},
            "spec": {"unschedulable": bool(spec.get("unschedulable")), "taints": spec.get("taints") or []},
            "status": {"allocatable": status.get("allocatable") or {},
                       "conditions": [{"type": "Ready", "status": c.get("status")} for c in ready]}}


def whole_list_is_cheaper(judged: int, nodes: int) -> bool:
    """One list of every pod rather than one list per judged node? Pods are assumed spread
    evenly (``pods_a_node`` cancels out but for the per-request overhead, taken as 10 pods
    a node, the benchmark's): per node costs judged x (10 + overhead), whole costs nodes x 10."""
    pods_a_node = 10
    return judged * (pods_a_node + LIST_OVERHEAD_PODS) >= nodes * pods_a_node


def nodes_to_read(total: int) -> int:
    """How many candidate nodes' pods the capacity check reads at most: every node of a
    cluster under 100 nodes, else the share the scheduler scores by default
    (percentageOfNodesToScore: 50% less 1% per 125 nodes, at least 5%), at least 100."""
    if total < 100:
        return total
    percent = max(5.0, 50.0 - total / 125.0)
    return max(100, int(total * percent / 100))


class NodePages:
    """Every node, listed a page at a time when asked (``fetch(limit, token)`` makes one list
    request), each slimmed as its page arrives. The server lists nodes in name order, so
    the nodes listed so far are the first ones of the whole sorted list."""

    def __init__(self, fetch: Callable[[int, Optional[str]], Obj]) -> None:
        self.fetch = fetch
        self.token: Optional[str] = None
        self.done = False
        self.listed = 0
        self.total: Optional[int] = None  # every node, once the first page said (remainingItemCount)

    def next(self) -> List[Obj]:
        if self.done:
            return []
        page = self.fetch(PAGE, self.token)
        found = [slim_node(node) for node in page.get("items") or []]
        meta = page.get("metadata") or {}
        self.token = meta.get("continue") or None
        self.done = self.token is None
        if self.listed == 0:
            remaining = meta.get("remainingItemCount")
            if self.done:
                self.total = len(found)
            elif remaining is not None:
                self.total = len(found) + int(remaining)
        self.listed += len(found)
        return found


def count_nodes(client: Client) -> int:
    """How many nodes the cluster has, from one list of one node (``remainingItemCount``);
    a large number when the server does not say."""
    page = client.get(paths.NODES, {"limit": 1})
    meta = page.get("metadata") or {}
    if not meta.get("continue"):
        return len(page.get("items") or [])
    remaining = meta.get("remainingItemCount")
    return len(page.get("items") or []) + int(remaining) if remaining is not None else 1 << 30


def requests_of(pods: Iterable[Obj]) -> Dict[str, int]:
    total = {r: 0 for r in RESOURCES}
    for pod in pods:
        if not is_finished(pod):
            for r, v in pod_requests(pod).items():
                total[r] = total.get(r, 0) + v
    return total


# -- budgets: the pods they select, counted by the API server's label selection ----------------------
def label_selector(selector: Obj) -> Optional[str]:
    """A LabelSelector as the ``labelSelector`` query; None when it selects nothing (no
    selector, or an operator budgets.requirements does not know)."""
    reqs = budgets.requirements(selector)
    if reqs is None:
        return None
    parts = []
    for req in reqs:
        if req.operator == "=":
            parts.append(f"{req.key}={req.values[0]}")
        elif req.operator in ("in", "notin") and not req.values:  # in (): nothing; notin (): anything
            if req.operator == "in":
                return None
        elif req.operator in ("in", "notin"):
            parts.append(f"{req.key} {req.operator} ({','.join(req.values)})")
        elif req.operator == "exists":
            parts.append(req.key)
        else:  # !exists
            parts.append(f"!{req.key}")
    return ",".join(parts)


class CountedBudgets(budgets.Budgets):
    """Every budget, listed once; the pods each selects are counted on demand with one
    label-selected list in its namespace (paginated, never kept), so only the budgets
    guarding a pod to evict cost anything."""

    def __init__(self, client: Client, pdbs: List[Obj]) -> None:
        super().__init__(pdbs, [])
        self.client = client

    def selected(self, pdb: Obj) -> int:
        query = label_selector(pdb.get("spec", {}).get("selector"))
        if query is None:
            return 0
        namespace = pdb["metadata"].get("namespace", "")
        path = paths.pods(namespace)
        return sum(1 for pod in items(self.client, path, {"labelSelector": query or None}) if not is_finished(pod))

    def view(self, pdb: Obj) -> budgets.BudgetView:
        k = budgets.key(pdb)
        if k not in self._views:
            selected = self.selected(pdb)
            allowed = pdb.get("status", {}).get("disruptionsAllowed")
            meta = pdb["metadata"]
            self._views[k] = budgets.BudgetView(meta.get("namespace", ""), meta["name"], budgets.budget_text(pdb),
                                                selected, None if allowed is None else int(allowed),
                                                budgets.never_allows(pdb, selected))
        return self._views[k]


# -- the snapshot ---------------------------------------------------------------------------------------
@dataclass
class Snapshot:
    """The cluster as the pre-flight needs it.

    ``nodes``: the judged nodes, slimmed, or every node (when many are judged, or when
    built by hand); ``pods_by_node``: the pods of the judged nodes (of every node when built
    from full lists, as the unit tests do); ``requested``: the summed requests of nodes whose
    pods were counted but not kept; ``reader``: reads the pods of a node not read yet (None:
    a node absent from both has no pods); ``node_pages``: lists the other nodes a page at a
    time, as capacity needs them (None: ``nodes`` is every node already)."""
    nodes: Dict[str, Obj]
    pods_by_node: Dict[str, List[Obj]]
    budgets: budgets.Budgets
    requested: Dict[str, Dict[str, int]] = field(default_factory=dict)
    reader: Optional[Callable[[str], List[Obj]]] = None
    workers: int = 16  # reads at a time (the pre-flight's requests_at_once)
    read_limit: int = 0  # candidate nodes whose pods may still be read (0: nodes_to_read)
    reads: List[str] = field(default_factory=list)  # the candidate nodes read, in order
    how: str = "given"  # "per node" or "whole list"
    node_pages: Optional[NodePages] = None  # the nodes not listed yet (None: ``nodes`` is every node)
    _rooms: Optional[List[NodeRoom]] = None

    @classmethod
    def read(cls, client: Client, judged: Iterable[str], workers: int = 16) -> Snapshot:
        names = list(dict.fromkeys(judged))

        def list_nodes() -> Dict[str, Obj]:
            found: Dict[str, Obj] = {}
            for page in pages(client, paths.NODES):
                for node in page:
                    slim = slim_node(node)
                    found[slim["metadata"]["name"]] = slim
            return found

        def node_page(limit: int, token: Optional[str]) -> Obj:
            return client.get(paths.NODES, {"limit": limit, "continue": token})

        def pods_of(name: str) -> List[Obj]:
            return list(items(client, PODS, {"fieldSelector": f"spec.nodeName={name}"}))

        def judged_node(name: str) -> Optional[Obj]:
            try:
                node = client.get_or_none(paths.node(name))
            except InputError:  # '', '.', '..': no node's name
                return None
            return slim_node(node) if node else None

        pool = ThreadPoolExecutor(max_workers=max(1, min(workers, len(names))), thread_name_prefix="nmo-read")
        with pool:
            node_pages: Optional[NodePages] = NodePages(node_page)
            if len(names) == 1 or (len(names) <= FEW and not whole_list_is_cheaper(len(names), count_nodes(client))):
                # a GET each; the other nodes only as far as capacity needs them
                nodes = {n["metadata"]["name"]: n for n in pool.map(judged_node, names) if n}
            else:
                nodes, node_pages = list_nodes(), None
            wanted = [n for n in names if n in nodes]
            by_node: Dict[str, List[Obj]] = {n: [] for n in wanted}
            requested: Dict[str, Dict[str, int]] = {}
            whole = node_pages is None and bool(wanted) and whole_list_is_cheaper(len(wanted), len(nodes))
            if whole:
                requested = {n: {r: 0 for r in RESOURCES} for n in nodes if n not in by_node}
                for page in pages(client, PODS):
                    for pod in page:
                        name = pod.get("spec", {}).get("nodeName") or ""
                        if name in by_node:
                            by_node[name].append(pod)
                        elif name in requested and not is_finished(pod):
                            total = requested[name]
                            for r, v in pod_requests(pod).items():
                                total[r] = total.get(r, 0) + v
            elif wanted:
                by_node = dict(zip(wanted, pool.map(pods_of, wanted)))
        pdbs = list(items(client, paths.PDBS))
        return cls(nodes, by_node, CountedBudgets(client, pdbs), requested, None if whole else pods_of,
                   workers, 0, how="whole list" if whole else "per node", node_pages=node_pages)

    @property
    def every_node_listed(self) -> bool:
        return self.node_pages is None or self.node_pages.done

    @property
    def nodes_known(self) -> int:
        """The nodes read so far: the judged ones and those listed."""
        return len(self._rooms) if self._rooms is not None else len(self.nodes)

    def node_count(self) -> int:
        """Every node of the cluster: said by the first page of the listing (listed to the end
        when the server does not say)."""
        if self.node_pages is None:
            return len(self.nodes)
        if self.node_pages.listed == 0:
            self.more_rooms()
        while self.node_pages.total is None and self.more_rooms():
            pass
        return self.node_pages.total if self.node_pages.total is not None else len(self.rooms())

    def _room(self, name: str, node: Obj) -> NodeRoom:
        if name in self.pods_by_node:
            return node_room(node, self.pods_by_node[name])
        room = node_room(node, [])
        if name in self.requested:
            room.requested = dict(self.requested[name])
        elif self.reader is not None:
            room.known = False
        return room

    def rooms(self) -> List[NodeRoom]:
        """The nodes as placement sees them, in name order: every node, or, while the nodes are
        listed a page at a time, the judged ones and those listed so far (``more_rooms``).
        The same list object each time: ``more_rooms`` extends it."""
        if self._rooms is None:
            self._rooms = [self._room(name, node) for name, node in sorted(self.nodes.items())]
        return self._rooms

    def more_rooms(self) -> bool:
        """Lists the next page of nodes into ``rooms()`` (kept in name order); False when every
        node is there already."""
        rooms = self.rooms()
        if self.node_pages is None or self.node_pages.done:
            return False
        have = {room.name for room in rooms}
        for node in self.node_pages.next():
            name = node["metadata"]["name"]
            if name not in have:
                rooms.append(self._room(name, node))
        rooms.sort(key=lambda room: room.name)
        return True

    def all_rooms(self) -> List[NodeRoom]:
        """Every node, the rest listed now."""
        while self.more_rooms():
            pass
        return self.rooms()

    def left_to_read(self) -> int:
        return max(0, (self.read_limit or nodes_to_read(self.node_count())) - len(self.reads))

    def learn(self, rooms: List[NodeRoom]) -> None:
        """Read the pods of these (unknown) rooms and count them in, in parallel."""
        rooms = [r for r in rooms if not r.known][:self.left_to_read()]
        if not rooms or self.reader is None:
            return
        reader = self.reader
        with ThreadPoolExecutor(max_workers=min(self.workers, len(rooms)), thread_name_prefix="nmo-room") as pool:
            sums = list(pool.map(lambda r: requests_of(reader(r.name)), rooms))
        for room, total in zip(rooms, sums):
            room.requested, room.known = total, True
            self.reads.append(room.name)


def candidates(rooms: List[NodeRoom], pending: List[Obj], out: Set[str],
               fits: Callable[[Obj, NodeRoom, Set[str]], bool]) -> List[NodeRoom]:
    """The unread rooms that could take one of the ``pending`` pods, were there room."""
    return [r for r in rooms if not r.known and any(fits(pod, r, out) for pod in pending)]


# -- namespaces, for the drain rules' namespace_selector --------------------------------------------------
def namespace_labels(client: Client, names: Iterable[str]) -> Dict[str, Dict[str, str]]:
    """The labels of each namespace named (one GET each: the shipped ClusterRole may get a
    namespace, not list them), read only when a drain rule has a ``namespace_selector``. A
    namespace that is gone has none; ``kubernetes.io/metadata.name`` is always there otherwise."""
    found: Dict[str, Dict[str, str]] = {}
    for name in sorted(set(names)):
        if not name:
            continue
        namespace = client.get_or_none(paths.namespace(name))
        found[name] = dict(((namespace or {}).get("metadata") or {}).get("labels") or {})
    return found
