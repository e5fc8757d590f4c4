"""bench/run: nmo.maintenance against kubectl drain and kubernetes.core.k8s_drain (issue 8),
and against the Node Maintenance Operator itself (B7, issue 24).

    bench/run [--quick] [--minutes N] [--out DIR] [--scale 50,5000] [--tools nmo] [--heartbeat S] [B1 .. B7]
    bench/run --world 5000 [--heartbeat S]   build a B5 world and keep it (B5 then uses it); the
                                              stretched heartbeat stays while it is kept
    bench/run --remove-worlds                 remove the kept worlds, the heartbeat back to 40 s

Run it through bench/run, which prepares bench/.venv and the import paths.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from contextlib import contextmanager
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import inventory_scale  # B8: the inventory plugin at scale (issue 26)
import real_node  # B9: the same drain on a real node and on a kwok node (issue 34)
import rollout_budget  # B10: a zone budget's use at concurrency 8 (issue 41)
import rollout_slices  # B11: one rollout over AWX job slices against one process (issue 45)
from measure import AuditLog, become_subreaper, machine
from report import add_ratios, table, targets, targets_text
from scenarios import (
    SCENARIOS,
    Context,
    Row,
    Sizes,
    build_world,
    control_plane_rss,
    kept_worlds,
    node_lease_seconds,
    remove_big_world,
)
from tools import ROOT, Tools, cluster_env, set_node_lease

from ansible_collections.nmo.maintenance.plugins.module_utils.api.client import ConnectionOptions, connect

inventory_scale.register(SCENARIOS)
real_node.register(SCENARIOS)
rollout_budget.register(SCENARIOS)
rollout_slices.register(SCENARIOS)


def log(message: str) -> None:
    print(message, flush=True)


def background_rate(audit: AuditLog, seconds: float = 3.0) -> float:
    """Requests a second the API server took from everyone (other developers' tests included)."""
    mark = audit.mark()
    time.sleep(seconds)
    if audit.path.stat().st_ino != mark.inode:
        return -1.0
    with open(audit.path, "rb") as handle:
        handle.seek(mark.offset)
        lines = sum(1 for _line in handle)
    return round(lines / seconds, 1)


def cluster_size(client: Any) -> Dict[str, int]:
    nodes = client.get("/api/v1/nodes").get("items", [])
    pods = client.get("/api/v1/pods", {"limit": 500})
    count = len(pods.get("items", [])) + int(pods.get("metadata", {}).get("remainingItemCount") or 0)
    return {"nodes": len(nodes), "pods": count}


def auto_heartbeat(sizes: List[int]) -> Optional[int]:
    """The fake nodes' lease B5 uses unless told: stretched to 600 s above 1,000 nodes.
    5,000 kwok nodes renewing every 10 s are 500 writes a second, which a real control plane
    is sized for and this 2-core rig is not; 600 s makes that 33 a second."""
    return 600 if max(sizes, default=0) > 1000 else None


@contextmanager
def heartbeat(seconds: Optional[int]) -> Iterator[None]:
    """kwok and the controller manager with the nodes' lease at ``seconds`` inside the block."""
    before = node_lease_seconds()
    if not seconds or seconds == before:
        log(f"  heartbeat: the nodes' lease is {before} s (kwok --node-lease-duration-seconds)")
        yield
        return
    log(f"  heartbeat: the nodes' lease set from {before} s to {seconds} s for this run")
    set_node_lease(seconds, lengthen=before is None or seconds > before)
    try:
        yield
    finally:
        log(f"  heartbeat: the nodes' lease back to {before or 40} s")
        set_node_lease(before or 40, lengthen=(before or 40) > seconds)


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench/run", description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("scenarios", nargs="*", metavar="B1..B7", help="scenarios to run (default: all)")
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke test of the harness, not figures")
    parser.add_argument("--minutes", type=float, default=60, help="no new run starts after this (default 60)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"), help="where the JSON goes")
    parser.add_argument("--scale", help="B5's cluster sizes, e.g. 50,5000 (issue 17's; default 50,500); "
                                        "5,000 nodes need about 2 GiB for the local API server and etcd")
    parser.add_argument("--scale-pods", type=int, help="B5's pods a node (default 10)")
    parser.add_argument("--scale-inventory", type=int, metavar="N",
                        help="B5 also runs the Ansible tools with an inventory of N hosts on the larger worlds "
                             "(the cluster as large, the inventory not): what ansible-playbook's own handling "
                             "of a 5,000-host inventory costs")
    parser.add_argument("--scale-repeat", type=int, help="B5's runs of each tool a size, taking turns, each on a "
                                                         "node of its own; the table gives the median (default 1)")
    parser.add_argument("--tools", help="only these tools, e.g. nmo or nmo,kubectl (default: every one; "
                                        "B7's peer is nmo_operator)")
    parser.add_argument("--heartbeat", type=int, metavar="S",
                        help="B5 (and --world) with the fake nodes' lease stretched to S seconds: kwok and the "
                             "controller manager are restarted with it (hack/cluster NMO_CLUSTER_NODE_LEASE_SECONDS) "
                             "and restored after. Default: 600 when a B5 size is above 1,000 nodes (the 2-core "
                             "rig cannot take 5,000 kwok nodes renewing every 10 s besides the run measured)")
    parser.add_argument("--world", type=int, metavar="N",
                        help="build a B5 world of N nodes and keep it; B5 uses a kept world of its size")
    parser.add_argument("--remove-worlds", action="store_true", help="remove the kept B5 worlds")
    parser.add_argument("--role-var", action="append", default=[], metavar="NAME=VALUE",
                        help="a role variable for this collection's rollouts (B4, B6), e.g. "
                             "node_maintenance_settle_timeout=0 to measure without a wait; repeatable")
    args = parser.parse_args(argv)
    chosen = [s.upper() for s in args.scenarios] or list(SCENARIOS)
    unknown = [s for s in chosen if s not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario(s) {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}")

    become_subreaper()
    env = cluster_env()
    out = Path(args.out)
    workdir = out / "work"
    workdir.mkdir(parents=True, exist_ok=True)
    audit = AuditLog(Path(env["NMO_CLUSTER_DIR"]) / "audit.log")
    client = connect(ConnectionOptions(kubeconfig=env["KUBECONFIG"]), pool_size=32)

    host = machine()
    rate = background_rate(audit)
    load = host["loadavg"]
    log(f"machine: {host['nproc']} cores, {host['memory_gib']} GiB, {host['cpu_model']}; "
        f"load average {load[0]} {load[1]} {load[2]}; API server busy with {rate} requests/s from others")
    if load[0] > 0.5 or rate > 20:
        log(f"WARNING: the machine is not quiet (load {load[0]} on {host['nproc']} cores, {rate} requests/s on the API "
            "server before the benchmark): timings will be noisy; run again when it is idle for figures to quote")
    if args.quick:
        log("--quick: small sizes; the figures check the harness, they are not the benchmark's")

    log("preparing identities (one client certificate per tool)")
    tools = Tools(env, workdir / "identities")
    versions = tools.versions()
    log("versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    sizes = Sizes.quick() if args.quick else Sizes()
    if args.scale:
        sizes.scale = [int(x) for x in args.scale.split(",") if x.strip()]
    if args.scale_pods is not None:  # 0 is a size: B8 lists nodes without pods
        sizes.scale_pods = args.scale_pods
    if args.scale_repeat:
        sizes.scale_repeat = args.scale_repeat
    if args.scale_inventory:
        sizes.scale_inventory = args.scale_inventory
    ctx = Context(client, tools, audit, sizes, workdir, time.monotonic() + args.minutes * 60, log,
                  tools_asked=[t.strip() for t in args.tools.split(",")] if args.tools else None,
                  role_vars=dict(v.split("=", 1) for v in args.role_var))
    if args.remove_worlds:
        for world, _meta in kept_worlds(ctx):
            log(f"removing the kept world {world.id} ({len(world.nodes)} nodes)")
            remove_big_world(ctx, world)
        if (node_lease_seconds() or 40) != 40:
            log("the nodes' lease back to 40 s")
            set_node_lease(40, lengthen=False)
        return 0
    if args.world:
        # The stretched heartbeat stays while the world is kept: at 40 s its nodes' leases
        # alone would keep the rig busy (bench/run --remove-worlds restores it).
        lease = args.heartbeat or auto_heartbeat([args.world])
        if lease and lease != node_lease_seconds():
            log(f"  heartbeat: the nodes' lease stretched to {lease} s while the world is kept")
            set_node_lease(lease, lengthen=lease > (node_lease_seconds() or 40))
        t0 = time.monotonic()
        world, built = build_world(ctx, args.world, keep=True)
        log(f"kept world {world.id}: {args.world} nodes, {args.world * sizes.scale_pods} pods, built in {built} s "
            f"(load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}); "
            f"control plane RSS {control_plane_rss()}; nodes' lease {node_lease_seconds()} s")
        return 0
    started = datetime.now(timezone.utc)
    before = cluster_size(client)

    rows: List[Row] = []
    for name in chosen:
        log(f"{name} ...")
        t0 = time.monotonic()
        try:
            if name in ("B5", "B8"):  # B8 lists B5's worlds
                with heartbeat(args.heartbeat or auto_heartbeat(sizes.scale)):
                    rows.extend(SCENARIOS[name](ctx))
            else:
                rows.extend(SCENARIOS[name](ctx))
        except Exception as exc:  # one scenario's broken world does not lose the others' figures
            log(f"  {name} failed: {type(exc).__name__}: {exc}")
            rows.append(Row(name, "-", "-", note=f"scenario failed: {exc}"))
        log(f"{name} done in {time.monotonic() - t0:.0f} s")

    add_ratios(rows)
    checked = targets(rows)
    report: Dict[str, Any] = {
        "started": started.isoformat(timespec="seconds"), "quick": args.quick, "scenarios": chosen,
        "machine": host, "load_at_end": [round(x, 2) for x in os.getloadavg()],
        "api_requests_per_s_from_others_at_start": rate, "cluster_at_start": before, "versions": versions,
        "sizes": asdict(sizes), "rows": [asdict(r) for r in rows], "targets": checked,
    }
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    path = out / f"bench-{stamp}{'-quick' if args.quick else ''}.json"
    path.write_text(json.dumps(report, indent=1, default=str))
    (out / "latest.json").write_text(json.dumps(report, indent=1, default=str))
    log("")
    log(table(rows))
    log("")
    log("targets (issues 8, 17 and 24), ratios from this run:")
    log(targets_text(checked) or "(none measured)")
    log(f"\nJSON: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
