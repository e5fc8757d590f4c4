"""B11 of issue 45: one rollout over AWX job slices against one process.

N kwok workers (``NMO_B11_NODES``, default 1,000), no pods (what is measured is the run around
the nodes, not a drain), ``node_maintenance_concurrency`` 8 as the rollout's, forks 8 a process.
Once as one ``ansible-playbook`` over every node, once as 4 slices the way AWX makes them (the
hosts by name, every 4th from the slice's offset, each a pared inventory of its own; every slice
given the same ``awx_workflow_job_id`` and its own ``awx_job_id``), started at once. The slices
run under one shell that waits for all of them, so the harness measures them as one tree: wall
from the start to the last slice's end, the largest process's peak RSS (a slice's controller, or
one of its workers), the requests a node from the audit log. A watch of the world's nodes gives
the most and the mean cordoned at once (rollout_budget.OutOfService).
"""

from __future__ import annotations

import json
import os
import shlex
from typing import Any, Dict, List

from rollout_budget import nodes_out
from scenarios import Context, Row, cleanup, measured, new_world, write_inventory
from tools import NMO, ROOT, VENV_BIN

CONCURRENCY, SLICES = 8, 4


def nodes_asked() -> int:
    return int(os.environ.get("NMO_B11_NODES", "1000"))


def sliced(hosts: List[str], count: int) -> List[List[str]]:
    ordered = sorted(hosts)
    return [ordered[offset::count] for offset in range(count)]


def slices_script(inventories: List[str], extra: Dict[str, Any], workflow: int) -> str:
    """One shell: the slices started at once, each with AWX's variables, waited for; its rc the worst."""
    playbook = str(ROOT / "playbooks" / "maintenance.yml")
    lines = ["rc=0"]
    for index, inventory in enumerate(inventories, 1):
        slice_vars = {**extra, "awx_workflow_job_id": workflow, "awx_job_id": workflow * 10 + index}
        argv = [str(VENV_BIN / "ansible-playbook"), playbook, "-i", inventory, "-f", str(CONCURRENCY),
                "-e", json.dumps(slice_vars)]
        lines.append(" ".join(shlex.quote(a) for a in argv) + f" > slice-{index}.log 2>&1 & p{index}=$!")
    for index in range(1, len(inventories) + 1):
        lines.append(f'wait "$p{index}" || {{ s=$?; [ "$s" -gt "$rc" ] && rc=$s; }}')
    lines.append('exit "$rc"')
    return "\n".join(lines)


def b11(ctx: Context) -> List[Row]:
    rows: List[Row] = []
    n = nodes_asked()
    for how in ("1 process", f"{SLICES} slices"):
        row = Row("B11", f"{n} workers, c{CONCURRENCY}, {how}", NMO, nodes=n)
        rows.append(row)
        if ctx.out_of_time():
            row.note = "skipped: out of time"
            continue
        world = new_world(ctx)
        try:
            world.add_nodes(workers=n, wait=False)
            workers = list(world.workers)
            extra = {"node_maintenance_concurrency": CONCURRENCY, "node_maintenance_lease_timeout": 3600,
                     "node_maintenance_report_dir": str(ctx.workdir / f"b11-{world.id}")}
            with nodes_out(ctx, world.id, row, n):
                if how == "1 process":
                    inventory = write_inventory(ctx, world, workers, "b11")
                    args = ["-i", inventory, "-f", str(CONCURRENCY), "-e", json.dumps(extra)]
                    measured(ctx, row, lambda a=args: ctx.tools.playbook(
                        NMO, ROOT / "playbooks" / "maintenance.yml", a, 4 * 3600))
                else:
                    inventories = [write_inventory(ctx, world, share, f"b11-slice-{i}")
                                   for i, share in enumerate(sliced(workers, SLICES), 1)]
                    workflow = int(world.id[1:], 16) % 100000
                    script = slices_script(inventories, extra, workflow)
                    logs = ctx.workdir / f"b11-{world.id}"
                    logs.mkdir(parents=True, exist_ok=True)
                    measured(ctx, row, lambda s=script, d=str(logs): ctx.tools.shell(NMO, s, 4 * 3600, cwd=d))
            ctx.log(f"  B11 {how}: wall {row.wall} s, peak {row.peak_rss_mib} MiB, {row.extra}")
        finally:
            cleanup(ctx, world)
    return rows


def register(scenarios: Dict[str, Any]) -> None:
    scenarios["B11"] = b11
