"""B10 of issue 41: a rollout's use of a zone budget at concurrency 8.

40 kwok workers in 4 zones of 10 (the inventory lists a zone's nodes together, as an inventory
by rack or zone does), a Deployment of one pod a worker behind a maxUnavailable 1 budget,
``node_maintenance_concurrency`` 8, the budget ``{topology_key: zone, max: 2}`` (8 places in
all). Once in the inventory's order (``node_maintenance_order: inventory``, the default before
issue 41: a batch is one zone's nodes, of which 2 may go) and once in the default order
(``auto``: the zones interleaved), with Ansible's forks 8 (the concurrency: the fewest the run
accepts); then the default order with forks 16, where up to 8 more nodes get ready and wait in
their begin for a place (the strategy host_pinned starts as many nodes as the forks allow). A
watch of the world's nodes gives how many are cordoned at once: the most, and the mean over
time from the first cordon to the last uncordon. The requests a node are the audit log's, as B6 counts them.
"""

from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Tuple

from scenarios import Context, Row, cleanup, measured, new_world, write_inventory
from tools import NMO, ROOT
from topology import WORLD_LABEL

from ansible_collections.nmo.maintenance.plugins.module_utils.api.waiter import Watcher

ZONE = "topology.kubernetes.io/zone"
ZONES, PER_ZONE, CONCURRENCY, MAX = 4, 10, 8, 2


class OutOfService(threading.Thread):
    """(time, cordoned nodes) after every change the watch of the world's nodes brings."""

    def __init__(self, client: Any, world_id: str) -> None:
        super().__init__(daemon=True)
        self.watcher = Watcher(client, "/api/v1/nodes", {"labelSelector": f"{WORLD_LABEL}={world_id}"})
        self.samples: List[Tuple[float, int]] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            self.watcher.drain_events(0.2)
            count = sum(1 for n in self.watcher.objects.values() if (n.get("spec") or {}).get("unschedulable"))
            if not self.samples or self.samples[-1][1] != count:
                self.samples.append((time.monotonic(), count))

    def summary(self) -> Dict[str, float]:
        active = [i for i, (_t, c) in enumerate(self.samples) if c > 0]
        if not active:
            return {"most_out": 0, "mean_out": 0.0}
        first, last = active[0], active[-1] + 1
        window = self.samples[first:last + 1] if last < len(self.samples) else self.samples[first:] + [
            (time.monotonic(), 0)]
        weighted = sum(c * (window[i + 1][0] - t) for i, (t, c) in enumerate(window[:-1]))
        span = window[-1][0] - window[0][0]
        return {"most_out": max(c for _t, c in self.samples), "mean_out": round(weighted / span, 2) if span else 0.0,
                "out_seconds": round(span, 1)}


@contextmanager
def nodes_out(ctx: Context, world_id: str, row: Row, nodes: int) -> Iterator[OutOfService]:
    """Watch the world's cordoned nodes while the block runs; then the most and the mean out at
    once, and the requests a node, in ``row``."""
    watch = OutOfService(ctx.client, world_id)
    watch.watcher.start()
    watch.start()
    try:
        yield watch
    finally:
        watch.done.set()
        watch.join()
        watch.watcher.close()
    row.extra.update(watch.summary())
    if row.requests is not None:
        row.extra["requests_per_node"] = round(row.requests / nodes, 1)


def b10(ctx: Context) -> List[Row]:
    rows: List[Row] = []
    n = ZONES * PER_ZONE
    # the same world one node at a time first: the requests a node that the waits add are measured against it
    for order, concurrency, forks in (("inventory", 1, 5), ("inventory", CONCURRENCY, CONCURRENCY),
                                      ("auto", CONCURRENCY, CONCURRENCY), ("auto", CONCURRENCY, 2 * CONCURRENCY)):
        row = Row("B10", f"{n} workers, {ZONES} zones x {MAX}, c{concurrency}, order {order}, forks {forks}", NMO,
                  nodes=n)
        rows.append(row)
        if ctx.out_of_time():
            row.note = "skipped: out of time"
            continue
        world = new_world(ctx)
        try:
            for zone in range(ZONES):
                world.add_nodes(workers=PER_ZONE, labels={ZONE: f"{world.id}-z{zone}"}, wait=False)
            world.deployment("app", n, wait=False)
            world.wait_pods_ready(f"{WORLD_LABEL}={world.id}", n, timeout=300)
            world.pdb("app", "app", max_unavailable=1)
            row.pods = n
            inventory = write_inventory(ctx, world, world.workers, "b10")
            extra = {"node_maintenance_concurrency": concurrency, "node_maintenance_order": order,
                     "node_maintenance_budgets": [{"topology_key": ZONE, "max": MAX}],
                     "node_maintenance_lease_timeout": 900}
            args = ["-i", inventory, "-l", "workers", "-f", str(forks), "-e", json.dumps(extra)]
            with nodes_out(ctx, world.id, row, n):
                measured(ctx, row, lambda a=args: ctx.tools.playbook(NMO, ROOT / "playbooks" / "maintenance.yml", a, 3600))
            ctx.log(f"  B10 order {order} forks {forks}: {row.extra}")
        finally:
            cleanup(ctx, world)
    return rows


def register(scenarios: Dict[str, Any]) -> None:
    scenarios["B10"] = b10
