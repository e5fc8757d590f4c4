"""One node's maintenance in a cluster of 1,000 kwok nodes and 4,000 pods stays small: no
process of the run (ansible-playbook, its workers, the run's heartbeat) goes above a bound that
one list of every pod of the world would break (issue 35: the run report held every pod of a
namespace, 442 MiB at 3,000 nodes). The maintained node has two pods of a Deployment, so the
pre-flight looks for their homes and the report for their replacements, and bare pods like
every other node.

Run by ``hack/test scale`` (a step of ``hack/test``) on a cluster of its own with a 600 s node
heartbeat, removed after: the world is built once per cluster and kept (its namespace says
so), each run maintaining another of its nodes.
"""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest
import yaml
from helpers import ansible_env
from process_memory import run_measured
from topology import KWOK_ANNOTATION, WORKER_ROLE, WORLD_LABEL, World, node_ready, wait_for

ROOT = Path(__file__).resolve().parents[2]
NODES = 1000
PODS_A_NODE = 4
BOUND_MIB = 120  # the runs measured 60-75 MiB; every pod of this world held at once is well above it
HOME = "nmo.test/scale-home"
KEPT = "nmo.test/scale-world"  # on the world's namespace: its node count, once complete
BUILT = "nmo.test/scale-built-s"

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def make_node(world: World, name: str, labels: Dict[str, str]) -> None:
    world.client.post("/api/v1/nodes", {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "annotations": dict(KWOK_ANNOTATION),
                     "labels": {WORLD_LABEL: world.id, WORKER_ROLE: "", "kubernetes.io/hostname": name,
                                "kubernetes.io/os": "linux", "type": "kwok", **labels}},
        "status": {"capacity": {"cpu": "32", "memory": "128Gi", "pods": "110"},
                   "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}}})


def each_page(world: World, path: str, query: Dict[str, Any]) -> Iterator[List[Dict[str, Any]]]:
    token = None
    while True:
        page = world.client.get(path, {**query, "limit": 500, "continue": token})
        yield page.get("items") or []
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return


def build(world: World, ns: str) -> None:
    names = [world.node_name("worker", i) for i in range(1, NODES + 1)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda n: make_node(world, n, {HOME: "yes"} if n in names[:2] else {}), names))

    def ready() -> bool:
        pages = each_page(world, "/api/v1/nodes", {"labelSelector": f"{WORLD_LABEL}={world.id}"})
        return sum(1 for page in pages for n in page if node_ready(n) and not any(
            t.get("key", "").startswith("node.kubernetes.io/not-ready") for t in n["spec"].get("taints") or [])) >= NODES

    wait_for(ready, 600, f"{NODES} nodes Ready", interval=5.0)
    spec = world._pod_spec()

    def make_pod(item: Tuple[str, int]) -> None:
        node, i = item
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": world._meta(f"p-{node.rsplit('-', 1)[-1]}-{i}"),
                "spec": {**spec, "nodeName": node}}
        world.client.post(f"/api/v1/namespaces/{ns}/pods", body)

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(make_pod, [(n, i) for n in names for i in range(PODS_A_NODE)]))
    wait_for(lambda: not world.client.get(f"/api/v1/namespaces/{ns}/pods",
                                          {"fieldSelector": "status.phase!=Running", "limit": 1}).get("items"),
             900, f"{NODES * PODS_A_NODE} pods Running", interval=5.0)


@pytest.fixture(scope="module")
def big_world(cluster) -> Tuple[World, float]:
    """The world, built once per cluster (a kept one is used again): (world, its build seconds)."""
    for ns in cluster.client.get("/api/v1/namespaces", {"labelSelector": KEPT}).get("items", []):
        meta = ns["metadata"]
        if BUILT in (meta.get("annotations") or {}) and not meta.get("deletionTimestamp"):
            world = World(cluster.client, prefix=meta["labels"][WORLD_LABEL])
            world.nodes = [world.node_name("worker", i) for i in range(1, NODES + 1)]
            world._namespace_made = True
            return world, float(meta["annotations"][BUILT])
    world = World(cluster.client)
    t0 = time.monotonic()
    cluster.client.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": world.namespace, "labels": {WORLD_LABEL: world.id, KEPT: str(NODES)}}})
    world._namespace_made = True
    world.nodes = [world.node_name("worker", i) for i in range(1, NODES + 1)]
    build(world, world.namespace)
    built = round(time.monotonic() - t0)
    cluster.client.patch(f"/api/v1/namespaces/{world.namespace}",
                         {"metadata": {"annotations": {BUILT: str(built)}}}, "merge")
    return world, built


def untouched(world: World) -> str:
    """A node no earlier run maintained: schedulable, its bare pods all there."""
    for node in world.nodes[2:]:
        if world.node(node).get("spec", {}).get("unschedulable"):
            continue
        pods = world.pods(node=node, namespace=world.namespace)
        if len(pods) == PODS_A_NODE:
            return node
    raise AssertionError("every node of the kept world was maintained: remove its cluster")


def test_one_node_of_a_thousand_is_maintained_without_reading_the_cluster(cluster, big_world, tmp_path):
    world, built = big_world
    target = untouched(world)
    # two pods of a Deployment on the target, their replacements' homes the other labelled nodes
    # (two of the world's, and the targets of earlier runs on a kept world)
    homes = [n["metadata"]["name"] for n in world.client.get("/api/v1/nodes", {"labelSelector": f"{HOME}=yes"})["items"]]
    world.client.patch(f"/api/v1/nodes/{target}", {"metadata": {"labels": {HOME: "yes"}}}, "merge")
    for home in homes:
        world.cordon(home)
    app = f"web-{target.rsplit('-', 1)[-1]}"
    world.deployment(app, 2, wait=False, pod_extra={"nodeSelector": {WORLD_LABEL: world.id, HOME: "yes"}})
    wait_for(lambda: len([p for p in world.pods(node=target, selector=f"app={app}", namespace=world.namespace)
                          if p.get("status", {}).get("phase") == "Running"]) == 2, 120, f"{app} on {target}")
    for home in homes:
        world.cordon(home, False)

    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                 "node_maintenance_slot_prefix": f"t{world.id}-slot",
                 "node_maintenance_etcd_pod_selector": f"component=etcd,{WORLD_LABEL}={world.id}",
                 "node_maintenance_report_dir": str(tmp_path / "report")},
        "children": {"workers": {"hosts": {target: None}}}}}))
    env = ansible_env(cluster.kubeconfig)
    for test_only in ("ANSIBLE_CALLBACK_PLUGINS", "ANSIBLE_CALLBACKS_ENABLED"):  # as a user runs it
        env.pop(test_only, None)
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), str(ROOT / "playbooks" / "maintenance.yml"),
            "-i", str(inventory), "-l", target]
    run = run_measured(argv, env, timeout=600, cwd=str(ROOT))
    print(f"world of {NODES} nodes and {NODES * PODS_A_NODE} pods built in {built:.0f} s; one node's maintenance "
          f"{run.seconds:.1f} s; largest processes: {', '.join(run.largest())}")
    assert run.rc == 0, run.output[-4000:]
    assert run.peaks, "no process of the run was measured"
    assert run.peak <= BOUND_MIB * 2**20, (
        f"a process of one node's maintenance went above {BOUND_MIB} MiB in a cluster of {NODES} nodes: "
        f"{', '.join(run.largest())}; something reads the whole cluster (issue 35)")

    report = json.loads((tmp_path / "report" / "report.json").read_text())
    (node,) = report["nodes"]
    moved = {m["pod"]: m["to"] for m in node["pods_moved"]}
    web = {k: v for k, v in moved.items() if k.startswith(f"{world.namespace}/{app}-")}
    assert len(web) == 2 and all(v in homes for v in web.values()), moved  # the replacements were found
    assert len(moved) == PODS_A_NODE + 2, moved
    assert not node.get("error") and node["outcome"] == "succeeded", node
