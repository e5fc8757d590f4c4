"""B1-B5 of issue 8, B6 of issue 17, B7 of issue 24: each builds its situation fresh for each tool, runs the tool, measures it.

Worlds come from hack/topology.py (kwok nodes, labelled so they can be removed whole); every
world has its own node names, namespace and maintenance slots, as the cluster is shared.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import yaml
from measure import AuditLog, Run
from peer_operator import Operator
from tools import DRAIN_TASK, K8S_DRAIN, KUBECTL, LABELS, NMO, OPERATOR, USERS, Tools
from topology import KWOK_ANNOTATION, WORKER_ROLE, WORLD_LABEL, World, node_ready, wait_for

DRAIN_TOOLS = [NMO, KUBECTL, K8S_DRAIN]

SKIPPED = "skipped: out of time"
KEPT_LABEL = "nmo.bench/kept-nodes"  # on a kept B5 world's namespace: its node count
KEPT_PODS = "nmo.bench/pods-a-node"
KEPT_BUILT = "nmo.bench/built-s"  # set once the world is complete: how long it took


@dataclass
class Sizes:
    pods: int = 110  # B1, B2: pods on the drained node
    deployments: int = 5  # B1, B2: that many Deployments share them
    grace: int = 5  # B2
    pdb_hold: float = 20.0  # B3: seconds the PDB allows no disruption
    b3_pods: int = 10  # B3: other pods on the node
    rollout_workers: int = 20  # B4
    rollout_apps: int = 4  # B4: Deployments of one replica a worker, each behind a maxUnavailable 1 PDB
    scale: List[int] = field(default_factory=lambda: [50, 500])  # B5 cluster sizes (--scale 50,5000: issue 17's)
    scale_pods: int = 10  # B5: pods a node
    scale_repeat: int = 1  # B5: runs of each tool a size (each on a node of its own); the row gives the median
    scale_inventory: Optional[int] = None  # B5: also run the Ansible tools with an inventory of this many hosts

    @classmethod
    def quick(cls) -> Sizes:
        return cls(pods=22, deployments=2, pdb_hold=8.0, b3_pods=4, rollout_workers=4, rollout_apps=2, scale=[10, 50])


@dataclass
class Row:
    scenario: str
    case: str
    tool: str
    wall: Optional[float] = None
    requests: Optional[int] = None
    peak_rss_mib: Optional[float] = None
    rc: Optional[int] = None
    pods: Optional[int] = None
    nodes: Optional[int] = None
    extra: Dict[str, Any] = field(default_factory=dict)
    note: str = ""


@dataclass
class Context:
    client: Any
    tools: Tools
    audit: AuditLog
    sizes: Sizes
    workdir: Path
    deadline: float  # time.monotonic() after which no new run starts
    log: Callable[[str], None] = print
    tools_asked: Optional[List[str]] = None  # --tools: only these tools run (None: every one)
    role_vars: Dict[str, str] = field(default_factory=dict)  # --role-var: the rollouts' inventory vars

    def skips(self, tool: str) -> bool:
        return self.tools_asked is not None and tool not in self.tools_asked

    def out_of_time(self) -> bool:
        return time.monotonic() > self.deadline


# -- shared steps ---------------------------------------------------------------------------------
def rows_with_time(ctx: Context, rows: List[Row], tools: Any, scenario: str, case: str,
                   **fields: Any) -> Iterator[Tuple[str, Row]]:
    """A row per tool, added to ``rows``; yields the tools there is still time to measure."""
    for tool in tools:
        if ctx.skips(tool):
            continue
        row = Row(scenario, case, tool, **fields)
        rows.append(row)
        if ctx.out_of_time():
            row.note = SKIPPED
            continue
        yield tool, row


def new_world(ctx: Context) -> World:
    return World(ctx.client, prefix="b" + uuid.uuid4().hex[:5])


def measured(ctx: Context, row: Row, run: Callable[[], Run]) -> Run:
    mark = ctx.audit.mark()
    load_before = [round(x, 2) for x in os.getloadavg()]
    result = run()
    row.extra["loadavg_before_after"] = [load_before, [round(x, 2) for x in os.getloadavg()]]
    requests = ctx.audit.requests(mark, [USERS[row.tool]])[USERS[row.tool]]
    row.wall = round(result.wall, 2)
    row.requests = requests.total
    row.peak_rss_mib = result.peak_rss_mib
    row.rc = result.rc
    row.extra.update({k: v for k, v in result.extra.items() if k != "records"})
    row.extra["requests_detail"] = requests.as_dict()
    if result.timed_out:
        row.note = "timed out"
    elif result.rc:
        tail = (result.extra.get("msg") or result.stderr.strip() or result.stdout.strip())
        row.note = f"rc={result.rc}: " + str(tail).splitlines()[-1][:160] if tail else f"rc={result.rc}"
    ctx.log(f"  {row.scenario} {row.case} {row.tool}: {row.wall} s, {row.requests} requests, "
            f"{row.peak_rss_mib} MiB{' (' + row.note + ')' if row.note else ''}; load {load_before[0]}; "
            f"largest {row.extra.get('largest_processes_mib')}")
    return result


def fill_node(world: World, node: str, apps: Dict[str, int], grace: Optional[int] = None,
              graceful: bool = False) -> int:
    """Deployments whose pods all land on ``node``; returns how many pods it holds."""
    total = sum(apps.values())
    with world.only_schedulable(node):
        for name, replicas in apps.items():
            world.deployment(name, replicas, grace=grace, graceful=graceful, wait=False)
        wait_for(lambda: len([p for p in world.pods(node=node) if p.get("status", {}).get("podIP")]) >= total,
                 180, f"{total} pods running on {node}", interval=0.5)
    return total


def spread(total: int, parts: int) -> Dict[str, int]:
    return {f"app{i + 1}": total // parts + (1 if i < total % parts else 0) for i in range(parts)}


def unschedulable(world: World, node: str) -> bool:
    return bool(world.node(node).get("spec", {}).get("unschedulable"))


def cleanup(ctx: Context, world: World) -> None:
    try:
        world.cleanup()
    except Exception as exc:  # a world left behind is reported, not fatal to the other runs
        ctx.log(f"  cleanup of world {world.id} failed: {exc}")


def write_inventory(ctx: Context, world: World, nodes: List[str], name: str) -> str:
    inventory = {"all": {
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": ctx.tools.python,
                 # this world's own maintenance slots and etcd pods: the cluster is shared
                 "node_maintenance_slot_prefix": f"{world.id}-slot",
                 "node_maintenance_etcd_pod_selector": f"component=etcd,{WORLD_LABEL}={world.id}",
                 **ctx.role_vars},
        "children": {"workers": {"hosts": {n: None for n in nodes}}}}}
    path = ctx.workdir / f"{name}-{world.id}.yml"
    path.write_text(yaml.safe_dump(inventory, sort_keys=False))
    return str(path)


# -- B1, B2: one node full of pods ----------------------------------------------------------------------
def drain_node(ctx: Context, scenario: str, grace: Optional[int], graceful: bool) -> List[Row]:
    rows = []
    for tool, row in rows_with_time(ctx, rows, DRAIN_TOOLS, scenario, f"{ctx.sizes.pods} pods"):
        world = new_world(ctx)
        try:
            target = world.add_nodes(workers=1)[0]
            world.add_nodes(workers=1, pods="500")  # where the replacements go
            row.pods = fill_node(world, target, spread(ctx.sizes.pods, ctx.sizes.deployments), grace, graceful)
            measured(ctx, row, lambda t=tool, n=target: ctx.tools.drain(t, n, 300))
            left = len([p for p in world.pods(node=target) if not p["metadata"].get("deletionTimestamp")])
            row.extra["pods_left_on_node"] = left
        finally:
            cleanup(ctx, world)
    return rows


def b1(ctx: Context) -> List[Row]:
    return drain_node(ctx, "B1", None, False)


def b2(ctx: Context) -> List[Row]:
    return drain_node(ctx, "B2", ctx.sizes.grace, True)


# -- B3: a PodDisruptionBudget that says no, then yes ---------------------------------------------------
class Relaxer:
    """At ``after`` seconds past the tool's start, lets the PDB allow a disruption, and notes
    when its status says so (the moment a drain may go on)."""

    def __init__(self, world: World, pdb: str, after: float) -> None:
        self.world, self.pdb, self.after = world, pdb, after
        self.relaxed_at: Optional[float] = None
        self.allowed_at: Optional[float] = None
        self.thread: Optional[threading.Thread] = None
        self.cancelled = threading.Event()

    def start(self, started: float) -> None:
        self.thread = threading.Thread(target=self._run, args=(started,), daemon=True)
        self.thread.start()

    def _run(self, started: float) -> None:
        path = f"/apis/policy/v1/namespaces/{self.world.namespace}/poddisruptionbudgets/{self.pdb}"
        if self.cancelled.wait(max(0.0, started + self.after - time.time())):
            return  # the tool ended first (k8s_drain fails at once)
        self.relaxed_at = time.time()
        self.world.client.patch(path, {"spec": {"minAvailable": 0}}, "merge")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not self.cancelled.is_set():
            if (self.world.client.get(path).get("status") or {}).get("disruptionsAllowed", 0) >= 1:
                self.allowed_at = time.time()
                return
            time.sleep(0.02)

    def stop(self) -> None:
        self.cancelled.set()
        if self.thread:
            self.thread.join(10)


def b3(ctx: Context) -> List[Row]:
    rows = []
    for tool, row in rows_with_time(ctx, rows, DRAIN_TOOLS, "B3", f"PDB blocks {ctx.sizes.pdb_hold:g} s"):
        world = new_world(ctx)
        try:
            target = world.add_nodes(workers=1)[0]
            world.add_nodes(workers=1, pods="500")
            row.pods = fill_node(world, target, {"free": ctx.sizes.b3_pods, "guarded": 1})
            world.pdb("guarded", "guarded", min_available=1)  # allows no disruption
            relaxer = Relaxer(world, "guarded", ctx.sizes.pdb_hold)
            run = measured(ctx, row, lambda t=tool, n=target, r=relaxer: ctx.tools.drain(t, n, 120, on_start=r.start))
            relaxer.stop()
            ended = run.started + run.wall
            if relaxer.allowed_at and not run.rc:
                row.extra["after_allowed"] = round(ended - relaxer.allowed_at, 2)
            row.extra["pdb_allowed_after"] = round(relaxer.allowed_at - run.started, 2) if relaxer.allowed_at else None
            row.extra["left_cordoned"] = unschedulable(world, target)
            row.extra["guarded_pod_still_there"] = bool(world.pods(node=target, selector="app=guarded"))
            if run.rc:
                row.note = f"failed after {row.wall} s" + (", node left cordoned" if row.extra["left_cordoned"] else "")
            elif relaxer.allowed_at and ended < relaxer.allowed_at:
                row.note = "ended before the PDB allowed it"
        finally:
            cleanup(ctx, world)
    return rows


# -- B4, B6: rolling maintenance of workers behind maxUnavailable 1 PDBs -------------------------------
def rollout_rows(ctx: Context, scenario: str) -> List[Row]:
    rows = []
    n = ctx.sizes.rollout_workers
    for tool, row in rows_with_time(ctx, rows, (NMO, K8S_DRAIN), scenario, f"{n} workers", nodes=n):
        world = new_world(ctx)
        try:
            world.add_nodes(workers=n)
            for i in range(ctx.sizes.rollout_apps):
                world.deployment(f"app{i + 1}", n, wait=False)
            total = n * ctx.sizes.rollout_apps
            world.wait_pods_ready(WORLD_LABEL + "=" + world.id, total, timeout=180)
            for i in range(ctx.sizes.rollout_apps):
                world.pdb(f"app{i + 1}", f"app{i + 1}", max_unavailable=1)
            row.pods = total
            inventory = write_inventory(ctx, world, world.workers, scenario.lower())
            measured(ctx, row, lambda t=tool, i=inventory: ctx.tools.rollout(t, i, "workers", 3600))
            if tool == NMO and row.wall is not None and "drain_elapsed" in row.extra:
                row.extra["overhead_per_node"] = round((row.wall - row.extra["drain_elapsed"]) / n, 2)
            tasks_per_node(row, n)
            row.extra["left_cordoned"] = [w for w in world.workers if unschedulable(world, w)]
            if row.requests is not None:
                per_node(row, n)
        finally:
            cleanup(ctx, world)
    return rows


def tasks_per_node(row: Row, nodes: int) -> None:
    """B4: the task results of the whole run (every play, the run's own tasks included) a node:
    what the orchestration's cost follows. Skipped tasks are counted apart: they cost less."""
    results = row.extra.get("task_results") or {}
    counts: Dict[str, int] = {}
    for by_status in results.values():
        for status, count in by_status.items():
            counts[status] = counts.get(status, 0) + count
    if not counts:
        return
    skipped = counts.get("skipped", 0)
    row.extra["tasks_per_node"] = round((sum(counts.values()) - skipped) / nodes, 1)
    row.extra["skipped_tasks_per_node"] = round(skipped / nodes, 1)
    row.extra["task_results_total"] = counts


def per_node(row: Row, nodes: int) -> None:
    """B6: a rollout's requests a node, and where they went ("verb resource"), largest first."""
    detail = row.extra.get("requests_detail") or {}
    row.extra["requests_per_node"] = round(row.requests / nodes, 1)
    row.extra["pods_per_node"] = round((row.pods or 0) / nodes, 1)
    row.extra["requests_per_node_by"] = {what: round(count / nodes, 2) for what, count in sorted(
        (detail.get("by_what") or {}).items(), key=lambda kv: -kv[1])}


def b4(ctx: Context) -> List[Row]:
    return rollout_rows(ctx, "B4")


def b6(ctx: Context) -> List[Row]:
    """B4's rollout, counted per node: NodeMaintenance, leases and events kept (issue 17)."""
    return rollout_rows(ctx, "B6")


# -- B5: one node's maintenance in a 50- and a 500-node cluster ----------------------------------------
def add_nodes_parallel(world: World, count: int, workers: int = 16) -> List[str]:
    names = [world.node_name("worker", i) for i in range(1, count + 1)]

    def make(name: str) -> None:
        world.client.post("/api/v1/nodes", {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": dict(KWOK_ANNOTATION),
                         "labels": {WORLD_LABEL: world.id, WORKER_ROLE: "", "kubernetes.io/hostname": name,
                                    "kubernetes.io/os": "linux", "type": "kwok"}},
            "status": {"capacity": {"cpu": "32", "memory": "128Gi", "pods": "110"},
                       "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}}})

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(make, names))
    world.nodes.extend(names)

    def all_ready() -> bool:
        items = world.client.get("/api/v1/nodes", {"labelSelector": f"{WORLD_LABEL}={world.id}"}).get("items", [])
        ready = [n for n in items if node_ready(n) and not any(
            t.get("key", "").startswith("node.kubernetes.io/not-ready") for t in n.get("spec", {}).get("taints") or [])]
        return len(ready) >= count

    wait_for(all_ready, max(300, count // 5), f"{count} nodes Ready", interval=1.0 if count <= 500 else 5.0)
    return names


def add_pods_parallel(world: World, nodes: List[str], per_node: int, workers: int = 16) -> int:
    ns = world.ensure_namespace()
    spec = world._pod_spec()

    def make(item: Any) -> None:
        node, i = item
        name = f"p-{node.rsplit('-', 1)[-1]}-{i:02d}"
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": world._meta(name), "spec": {**spec, "nodeName": node}}
        world.client.post(f"/api/v1/namespaces/{ns}/pods", body)

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(make, [(n, i) for n in nodes for i in range(per_node)]))
    total = len(nodes) * per_node

    def running() -> bool:
        waiting = world.client.get(f"/api/v1/namespaces/{ns}/pods",
                                   {"fieldSelector": "status.phase!=Running", "limit": 1}).get("items", [])
        return not waiting

    wait_for(running, max(600, total // 40), f"{total} pods Running", interval=2.0)
    return total


def list_costs(world: World, node: str, repeat: int = 3) -> Dict[str, float]:
    """What the pre-flight's two ways of reading pods cost here (best of ``repeat``): one
    paginated list of every pod, and one node's ``fieldSelector=spec.nodeName`` list; and
    the per-request overhead that makes, in pods (stores/preflight_reads.py LIST_OVERHEAD_PODS)."""
    def timed(query: Dict[str, Any]) -> Tuple[float, int]:
        best, count = float("inf"), 0
        for _attempt in range(repeat):
            t0, count, token = time.monotonic(), 0, None
            while True:
                page = world.client.get("/api/v1/pods", {**query, "limit": 500, "continue": token})
                count += len(page.get("items", []))
                token = page.get("metadata", {}).get("continue")
                if not token:
                    break
            best = min(best, time.monotonic() - t0)
        return best, count

    whole, pods = timed({})
    one, own = timed({"fieldSelector": f"spec.nodeName={node}"})
    per_pod = whole / max(pods, 1)
    return {"whole_list_s": round(whole, 3), "pods": pods, "one_node_list_s": round(one, 4), "node_pods": own,
            "overhead_in_pods": round(one / per_pod - own, 1) if per_pod else -1.0}


def control_plane_rss() -> Dict[str, float]:
    """RSS of this checkout's kube-apiserver and etcd (the local cluster's processes)."""
    import psutil
    from tools import ROOT

    found: Dict[str, float] = {}
    for proc in psutil.process_iter(["name", "cmdline", "memory_info"]):
        name, cmdline = proc.info.get("name") or "", " ".join(proc.info.get("cmdline") or [])
        if name in ("kube-apiserver", "etcd") and str(ROOT) in cmdline and proc.info.get("memory_info"):
            found[name] = round(proc.info["memory_info"].rss / 2**20)
    return found


def remove_big_world(ctx: Context, world: World) -> None:
    """Nodes in parallel, the pods by the namespace's deletion (patiently: thousands of pods),
    then the usual clean-up, which then finds little left."""
    try:
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda n: _delete_quietly(world, f"/api/v1/nodes/{n}"), list(world.nodes)))
        _delete_quietly(world, f"/api/v1/namespaces/{world.namespace}")
        wait_for(lambda: world.client.get_or_none(f"/api/v1/namespaces/{world.namespace}") is None, 900,
                 f"namespace {world.namespace} gone", interval=2.0)
    except Exception as exc:
        ctx.log(f"  clean-up of world {world.id}: {exc}")
    cleanup(ctx, world)


def _delete_quietly(world: World, path: str) -> None:
    try:
        world.client.delete(path)
    except Exception as exc:
        if getattr(exc, "status", None) != 404:
            raise


def build_world(ctx: Context, size: int, keep: bool = False) -> Tuple[World, float]:
    """B5's world: ``size`` kwok nodes with ``scale_pods`` bare pods each. A kept world's
    namespace says so (KEPT_LABEL, with its build time) and later runs use it."""
    world = new_world(ctx)
    t0 = time.monotonic()
    if keep:  # labelled before the nodes come, so that an interrupted build can be found and removed
        ctx.client.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {
            "name": world.namespace, "labels": {WORLD_LABEL: world.id, KEPT_LABEL: str(size)},
            "annotations": {KEPT_PODS: str(ctx.sizes.scale_pods)}}})
    nodes = add_nodes_parallel(world, size)
    add_pods_parallel(world, nodes, ctx.sizes.scale_pods)
    built = round(time.monotonic() - t0)
    if keep:
        ctx.client.patch(f"/api/v1/namespaces/{world.namespace}",
                         {"metadata": {"annotations": {KEPT_BUILT: str(built)}}}, "merge")
    return world, built


def kept_worlds(ctx: Context, size: Optional[int] = None) -> List[Tuple[World, Dict[str, Any]]]:
    """Worlds left by ``bench/run --world N`` (complete ones only when ``size`` is given)."""
    selector = KEPT_LABEL + (f"={size}" if size else "")
    found = []
    for ns in ctx.client.get("/api/v1/namespaces", {"labelSelector": selector}).get("items", []):
        meta = ns["metadata"]
        if size and (KEPT_BUILT not in (meta.get("annotations") or {})
                     or meta.get("deletionTimestamp")
                     or int(meta["annotations"].get(KEPT_PODS, 0)) != ctx.sizes.scale_pods):
            continue
        world = World(ctx.client, prefix=meta["labels"][WORLD_LABEL])
        count = int(meta["labels"][KEPT_LABEL])
        world.nodes = [world.node_name("worker", i) for i in range(1, count + 1)]
        world._namespace_made = True
        found.append((world, meta))
    return found


def untouched_nodes(world: World, count: int, pods: int) -> List[str]:
    """Nodes of a kept world that an earlier run has not maintained: schedulable, pods all there."""
    found = []
    for node in reversed(world.nodes):
        if len(found) == count:
            break
        if unschedulable(world, node):
            continue
        mine = world.client.get(f"/api/v1/namespaces/{world.namespace}/pods",
                                {"fieldSelector": f"spec.nodeName={node}"}).get("items", [])
        if len(mine) == pods:
            found.append(node)
    return found


def b5(ctx: Context) -> List[Row]:
    rows = []
    for size in ctx.sizes.scale:
        tools_rows = [Row("B5", f"{size} nodes", tool, nodes=size) for tool in DRAIN_TOOLS if not ctx.skips(tool)]
        cap = ctx.sizes.scale_inventory
        small = [Row("B5", f"{size} nodes, {cap}-host inventory", tool, nodes=size)
                 for tool in (NMO, K8S_DRAIN) if cap and cap < size and not ctx.skips(tool)]
        tools_rows += small
        rows.extend(tools_rows)
        if ctx.out_of_time():
            for row in tools_rows:
                row.note = SKIPPED
            continue
        kept = kept_worlds(ctx, size)
        if kept:
            world, meta = kept[0]
            built = int(meta["annotations"][KEPT_BUILT])
            ctx.log(f"  B5 uses the kept world {world.id} of {size} nodes (bench/run --world {size}; "
                    "bench/run --remove-worlds removes it)")
        else:
            world, built = build_world(ctx, size)
        try:
            servers = control_plane_rss()
            ctx.log(f"  B5 world of {size} nodes and {size * ctx.sizes.scale_pods} pods built in {built} s; "
                    "control plane RSS " + ", ".join(f"{k} {v} MiB" for k, v in servers.items()))
            repeat = max(1, ctx.sizes.scale_repeat)
            nodes = untouched_nodes(world, len(tools_rows) * repeat + 1, ctx.sizes.scale_pods)
            for row in tools_rows:
                row.extra.update({"world_built_s": built, "control_plane_rss_mib": servers,
                                  "world_kept": bool(kept), "node_lease_s": node_lease_seconds()})
            inventory = write_inventory(ctx, world, world.nodes, "b5")
            turns = [row for _turn in range(repeat) for row in tools_rows]
            small_ids = {id(row) for row in small}
            plan = list(zip(turns, nodes[1:]))  # a node for every run
            small_inventory = inventory
            if small and cap:
                # the nodes maintained, then others up to the cap: the cluster is as large, the inventory is not
                few = list(dict.fromkeys([n for r, n in plan if id(r) in small_ids] + world.nodes))[:cap]
                small_inventory = write_inventory(ctx, world, few, f"b5-{cap}")
            # every run maintains another node of the same world (the nodes are alike); the
            # tools take turns, so that a noisy moment of the shared machine is spread over them
            runs: Dict[int, List[Row]] = {id(row): [] for row in tools_rows}
            for row, node in plan:
                if ctx.out_of_time():
                    continue
                one = Row("B5", row.case, row.tool, nodes=size, pods=ctx.sizes.scale_pods)
                one.extra["node"] = node
                hosts = small_inventory if id(row) in small_ids else inventory
                measured(ctx, one, lambda t=row.tool, n=node, i=hosts: ctx.tools.rollout(t, i, n, 900, node=n))
                one.extra["left_cordoned"] = unschedulable(world, node)
                runs[id(row)].append(one)
            for row in tools_rows:
                median_of(row, runs[id(row)])
            for row in tools_rows:
                row.extra["control_plane_rss_mib_after"] = control_plane_rss()
            # after the tools: a list of every pod keeps the API server busy for a while after it
            reads = list_costs(world, nodes[0], repeat=3 if size <= 1000 else 1)  # 50,000 pods: 10-30 s a list
            ctx.log(f"  B5 reads: {reads}")
            for row in tools_rows:
                row.extra["list_costs"] = reads
        finally:
            if not kept:
                remove_big_world(ctx, world)
    return rows


def median_of(row: Row, runs: List[Row]) -> None:
    """``row`` becomes the run of median wall time; every run's wall time, requests and peak
    are kept beside it, and the peak RSS is the largest of all runs."""
    done = sorted((r for r in runs if r.wall is not None), key=lambda r: r.wall or 0.0)
    if not done:
        row.note = row.note or SKIPPED
        return
    mid = done[(len(done) - 1) // 2]
    extra = {**row.extra, **mid.extra}
    row.wall, row.requests, row.rc, row.pods, row.note = mid.wall, mid.requests, mid.rc, mid.pods, mid.note
    row.peak_rss_mib = max(r.peak_rss_mib or 0.0 for r in done)
    row.extra = extra
    if len(runs) > 1:
        row.extra["runs"] = [{"wall": r.wall, "requests": r.requests, "peak_rss_mib": r.peak_rss_mib, "rc": r.rc,
                              "load": (r.extra.get("loadavg_before_after") or [[None]])[0][0]} for r in runs]
        row.note = (row.note + "; " if row.note else "") + f"median of {len(done)}: " + ", ".join(
            f"{r.wall}" for r in runs)


def node_lease_seconds() -> Optional[int]:
    """The fake nodes' heartbeat: --node-lease-duration-seconds of this checkout's kwok."""
    import psutil
    from tools import ROOT

    for proc in psutil.process_iter(["name", "cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if proc.info.get("name") == "kwok" and any(str(ROOT) in a for a in cmdline):
            for flag, value in zip(cmdline, cmdline[1:]):
                if flag == "--node-lease-duration-seconds":
                    return int(value)
    return None


# -- B7: the Node Maintenance Operator itself, side by side (issue 24) --------------------------------
B7_BUDGETS: List[Tuple[str, Optional[str]]] = [("no budget", None), ("25% PDB", "25%")]
B7_SPARES = 2  # nodes beside the maintained one, where the replacements go


def fill_b7(world: World, node: str, prefix: str, pods: int, parts: int, budget: Optional[str]) -> int:
    """``pods`` replicas of ``parts`` Deployments on ``node``, each behind a PDB of
    ``maxUnavailable: budget`` when there is one."""
    apps = {f"{prefix}-{name}": count for name, count in spread(pods, parts).items()}
    held = fill_node(world, node, apps)
    if budget:
        for app in apps:
            world.pdb(app, app, max_unavailable=budget)
    return held


def per_pod(row: Row) -> None:
    """B7's figures a pod: the drain in milliseconds, and the requests."""
    pods = row.pods or 0
    drain = row.extra.get("drain_elapsed")
    if pods and drain is not None:
        row.extra["drain_ms_per_pod"] = round(1000 * float(drain) / pods, 1)
    if pods and row.requests is not None:
        row.extra["requests_per_pod"] = round(row.requests / pods, 2)
    # the drain's own share: NMO's requests until it wrote Succeeded, ours the drain task's
    # (the rest of ours is mostly the pre-flight's one dry-run eviction a pod)
    by_task = row.extra.get("requests_by_task") or {}
    drain = (row.extra.get("requests_to_succeeded") if row.tool == OPERATOR else
             sum(sum(c.values()) for task, c in by_task.items() if task.endswith(DRAIN_TASK)) or None)
    if pods and drain:
        row.extra["drain_requests"] = drain
        row.extra["drain_requests_per_pod"] = round(drain / pods, 2)
    preflight = sum(sum(c.values()) for task, c in by_task.items() if "Preflight |" in task)
    if preflight:
        row.extra["preflight_requests"] = preflight


def b7_operator(ctx: Context, operator: Operator, world: World, node: str, row: Row) -> None:
    """NMO maintains ``node``: a NodeMaintenance to Succeeded (the drain), then deleted."""
    load_before = [round(x, 2) for x in os.getloadavg()]
    run = operator.maintain(ctx.client, ctx.audit, node, f"{world.id}-b7", timeout=600)
    row.extra["loadavg_before_after"] = [load_before, [round(x, 2) for x in os.getloadavg()]]
    row.rc = 0
    row.wall = round(run.drain_s, 2)  # NMO's maintenance ends at Succeeded: the node stays drained
    row.extra["drain_elapsed"] = round(run.drain_s, 2)
    row.extra["released_after_delete"] = round(run.released - run.succeeded, 2) if run.released else None
    whole = run.requests()
    row.requests = whole.total
    row.extra["requests_to_succeeded"] = run.requests(until=run.succeeded).total
    row.extra["requests_detail"] = whole.as_dict()
    row.extra["timeline"] = run.timeline()
    row.extra["nm_status"] = {k: run.status.get(k)
                              for k in ("totalpods", "evictionPods", "drainProgress", "lastError", "lastUpdate")}
    row.extra["pods_left_on_node"] = len([p for p in world.pods(node=node)
                                          if not p["metadata"].get("deletionTimestamp")])
    row.peak_rss_mib = operator.peak_rss_mib()
    if run.released is None:
        row.note = "NodeMaintenance still there 120 s after its deletion"
    ctx.log(f"  B7 {row.case} {LABELS[OPERATOR]}: drain {row.wall} s, {row.requests} requests "
            f"({row.extra['requests_to_succeeded']} to Succeeded), released "
            f"{row.extra['released_after_delete']} s after the deletion; load {load_before[0]}")


def b7(ctx: Context) -> List[Row]:
    """The same world shape, the same pods: NMO first (up for it alone), then the role
    standalone with NMO down, so that no NodeMaintenance of ours is ever NMO's to act on."""
    sizes = ctx.sizes
    cases = [(f"{sizes.pods} pods, {label}", budget) for label, budget in B7_BUDGETS]
    theirs = {case: Row("B7", case, OPERATOR, nodes=1, extra={"budget": budget}) for case, budget in cases}
    ours = {case: Row("B7", case, NMO, nodes=1, extra={"budget": budget}) for case, budget in cases}
    # the role once more without its pre-flight (NMO has none): its one dry-run eviction a pod
    # is most of the difference in requests between the two whole maintenances
    bare = {case: Row("B7", case, NMO, nodes=1, extra={"budget": budget, "preflight": "off"}, note="pre-flight off")
            for case, budget in cases}
    rows = [row for case, _budget in cases for row in (theirs[case], ours[case], bare[case])
            if not ctx.skips(row.tool)]
    worlds: Dict[str, World] = {}

    def world_for(case: str) -> World:
        if case not in worlds:
            worlds[case] = new_world(ctx)
            worlds[case].add_nodes(workers=B7_SPARES, pods="500")
        return worlds[case]

    operator = Operator(ctx.tools.cluster, ctx.log)
    try:
        if not ctx.skips(OPERATOR):
            with operator.running():
                for case, budget in cases:
                    if ctx.out_of_time():
                        theirs[case].note = SKIPPED
                        continue
                    world = world_for(case)
                    target = world.add_nodes(workers=1)[0]
                    theirs[case].pods = fill_b7(world, target, "nmo", sizes.pods, sizes.deployments, budget)
                    b7_operator(ctx, operator, world, target, theirs[case])
                    per_pod(theirs[case])
        # NMO is down now, its webhook unregistered: the role's NodeMaintenance is nobody
        # else's (and standalone with NMO running would stop before anything is written).
        for case, budget in cases:
            for row, prefix, preflight in ((ours[case], "ours", "enforce"), (bare[case], "bare", "off")):
                if ctx.skips(NMO):
                    continue
                if ctx.out_of_time():
                    row.note = SKIPPED
                    continue
                world = world_for(case)
                target = world.add_nodes(workers=1)[0]
                row.pods = fill_b7(world, target, prefix, sizes.pods, sizes.deployments, budget)
                inventory = write_inventory(ctx, world, [target], "b7")
                wanted = {"node_maintenance_mode": "standalone", "node_maintenance_preflight": preflight}
                measured(ctx, row, lambda i=inventory, n=target, w=wanted: ctx.tools.rollout(NMO, i, n, 900, extra_vars=w))
                row.extra["left_cordoned"] = unschedulable(world, target)
                per_pod(row)
    finally:
        if operator.is_up:
            operator.down(keep_crd=True)
        for world in worlds.values():
            cleanup(ctx, world)
        try:  # NMO's CRD goes when `up` installed it and no NodeMaintenance is left
            operator.down(keep_crd=False)
        except Exception as exc:  # reported, not fatal to the figures
            ctx.log(f"  hack/medik8s down: {exc}")
    return rows


SCENARIOS: Dict[str, Callable[[Context], List[Row]]] = {"B1": b1, "B2": b2, "B3": b3, "B4": b4, "B5": b5, "B6": b6,
                                                        "B7": b7}
