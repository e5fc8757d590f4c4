"""B9 of issue 34: the same drain on a real node and on a kwok node, to say how far the
simulator is from the real thing.

The same bare pods (``b9_pods``, default 10; 4 with --quick) on ``real-01`` of hack/real-node (a
kubelet and a containerd; started for B9 when it is not running, and removed again after) and
on a kwok node of a world of its own: each exits on SIGTERM, with a grace period of 30 s. On
the kwok node a deleted pod goes away at once (kwok); on the real node when the kubelet has
stopped its container and reported it. Both drains are this collection's
(``bench/playbooks/nmo_drain.yml``: cordon, then nmo_drain), as the bench-nmo identity, whose
requests the audit log counts.
"""

from __future__ import annotations

import os
import subprocess
from typing import Any, Dict, List

from scenarios import SKIPPED, Context, Row, cleanup, measured, new_world
from tools import NMO, ROOT
from topology import wait_for

REAL_NODE = "real-01"
PODS = 10
QUICK_PODS = 4
GRACE_S = 30


def real_node_env(ctx: Context) -> Dict[str, str]:
    return {**os.environ, "NMO_CLUSTER_DIR": ctx.tools.cluster["NMO_CLUSTER_DIR"]}


def real_node_up(ctx: Context) -> bool:
    """real-01 Ready; True when B9 started it (and so removes it after)."""
    running = ctx.client.get_or_none(f"/api/v1/nodes/{REAL_NODE}") is not None
    subprocess.run([str(ROOT / "hack" / "real-node"), "up", "1"], env=real_node_env(ctx), check=True,
                   capture_output=True, text=True, timeout=1800)
    return not running


def real_node_down(ctx: Context) -> None:
    subprocess.run([str(ROOT / "hack" / "real-node"), "down"], env=real_node_env(ctx), check=True,
                   capture_output=True, text=True, timeout=300)
    ctx.client.delete(f"/api/v1/nodes/{REAL_NODE}")


def pod(name: str, namespace: str, node: str, image: str) -> Dict[str, Any]:
    """A pod a real node can run (host network, no token, the imported image) and a kwok node
    can fake; it exits at once on SIGTERM."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"nodeName": node, "hostNetwork": True, "automountServiceAccountToken": False,
                     "terminationGracePeriodSeconds": GRACE_S,
                     "tolerations": [{"operator": "Exists"}],
                     "containers": [{"name": "main", "image": image, "imagePullPolicy": "Never",
                                     "command": ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]}]}}


def fill(ctx: Context, world: Any, node: str, image: str, count: int) -> int:
    namespace = world.ensure_namespace()
    for i in range(count):
        ctx.client.post(f"/api/v1/namespaces/{namespace}/pods", pod(f"{node}-{i:02d}", namespace, node, image))

    def running() -> bool:
        pods = world.pods(node=node, namespace=namespace)
        return len([p for p in pods if (p.get("status") or {}).get("phase") == "Running"]) >= count
    wait_for(running, 180, f"{count} pods running on {node}", interval=0.5)
    return count


def uncordon(ctx: Context, node: str) -> None:
    ctx.client.patch(f"/api/v1/nodes/{node}", {"spec": {"unschedulable": None}}, "merge")


def b9(ctx: Context) -> List[Row]:
    count = QUICK_PODS if ctx.sizes.pods < 110 else PODS
    case = f"{count} pods, exit on SIGTERM"
    rows = [Row("B9", case, NMO, nodes=1, note="real node"), Row("B9", case, NMO, nodes=1, note="kwok node")]
    if ctx.skips(NMO):
        return []
    if ctx.out_of_time():
        for row in rows:
            row.note += f"; {SKIPPED}"
        return rows
    started = real_node_up(ctx)
    labels = ctx.client.get(f"/api/v1/nodes/{REAL_NODE}")["metadata"]["labels"]
    image = f"nmo.test/busybox:{labels['nmo.test/busybox-image']}"
    world = new_world(ctx)
    try:
        kwok_node = world.add_nodes(workers=1)[0]
        for row, node in zip(rows, (REAL_NODE, kwok_node)):
            row.pods = fill(ctx, world, node, image, count)
            try:
                measured(ctx, row, lambda n=node: ctx.tools.drain(NMO, n, 300))
            finally:
                uncordon(ctx, node)
            row.extra["pods_left_on_node"] = len(world.pods(node=node))
            if row.wall and row.pods:
                row.extra["ms_per_pod"] = round(1000 * row.wall / row.pods, 1)
        real, kwok = rows
        drains = [row.extra.get("module_elapsed") for row in rows]
        if all(drains):
            real.note += f": drain {float(drains[0]) / float(drains[1]):.1f}x the kwok node's, " \
                         f"{real.requests} against {kwok.requests} requests"
    finally:
        cleanup(ctx, world)
        if started:
            real_node_down(ctx)
    return rows


def register(scenarios: Dict[str, Any]) -> None:
    scenarios["B9"] = b9
