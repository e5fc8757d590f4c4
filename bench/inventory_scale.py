"""B8 of issue 26: the inventory plugin nmo.maintenance.nodes on B5's worlds (--scale, default
50,500; issue 26's 5,000 with --scale 5000 --scale-pods 0).

For each size, as the bench-nmo identity (its requests counted in the audit log):

* ``ansible-inventory -i <world>.nmo.yml --list``: the whole command, wall time and peak RSS;
* the plugin's parse alone (``inventory_parse.py``: the plugin loaded as Ansible loads it, its
  ``parse`` timed in process, the process's RSS before and its peak after);
* ``--list`` again with the inventory cache (jsonfile), once to fill it and once served from it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Dict, List

import yaml
from measure import run_measured
from scenarios import SKIPPED, Context, Row, build_world, control_plane_rss, kept_worlds, measured, remove_big_world
from tools import NMO, ROOT, VENV_BIN
from topology import WORLD_LABEL

PARSE = Path(__file__).resolve().parent / "inventory_parse.py"


def config(ctx: Context, world: Any, name: str, **extra: Any) -> str:
    body = {"plugin": "nmo.maintenance.nodes", "label_selector": f"{WORLD_LABEL}={world.id}",
            "keyed_groups": [{"key": "nmo_labels['kubernetes.io/os'] | default('none')", "prefix": "os"}],
            "compose": {"ansible_connection": "'local'"}, **extra}
    path = ctx.workdir / f"{name}-{world.id}.nmo.yml"
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return str(path)


def listed(ctx: Context, path: str, *args: str) -> Any:
    env = ctx.tools.ansible_env(NMO, str(ctx.workdir / "b8-records.jsonl"))
    return run_measured([str(VENV_BIN / "ansible-inventory"), "-i", path, "--list", *args], env, 900, cwd=str(ROOT))


def parsed(ctx: Context, path: str) -> Any:
    env = ctx.tools.ansible_env(NMO, str(ctx.workdir / "b8-records.jsonl"))
    return run_measured([sys.executable, str(PARSE), path], env, 900, cwd=str(ROOT))


def hosts_in(stdout: str) -> int:
    try:
        return len(json.loads(stdout).get("_meta", {}).get("hostvars", {}))
    except ValueError:
        return -1


def b8(ctx: Context) -> List[Row]:
    rows: List[Row] = []
    for size in ctx.sizes.scale:
        cases = [Row("B8", f"{size} nodes, --list", NMO, nodes=size),
                 Row("B8", f"{size} nodes, parse alone", NMO, nodes=size),
                 Row("B8", f"{size} nodes, --list filling the cache", NMO, nodes=size),
                 Row("B8", f"{size} nodes, --list from the cache", NMO, nodes=size)]
        rows.extend(cases)
        if ctx.out_of_time():
            for row in cases:
                row.note = SKIPPED
            continue
        kept = kept_worlds(ctx, size)
        world, built = (kept[0][0], int(kept[0][1]["annotations"]["nmo.bench/built-s"])) if kept \
            else build_world(ctx, size)
        try:
            servers = control_plane_rss()
            ctx.log(f"  B8 world of {size} nodes built in {built} s; control plane RSS {servers}")
            plain = config(ctx, world, "b8")
            cached = config(ctx, world, "b8-cached", cache=True, cache_plugin="ansible.builtin.jsonfile",
                            cache_connection=str(ctx.workdir / f"b8-cache-{world.id}"), cache_timeout=3600)
            whole, alone, filling, served = cases
            result = measured(ctx, whole, lambda p=plain: listed(ctx, p))
            whole.extra["hosts"] = hosts_in(result.stdout)
            result = measured(ctx, alone, lambda p=plain: parsed(ctx, p))
            try:
                alone.extra.update(json.loads(result.stdout.strip().splitlines()[-1]))
                alone.note = (f"parse {alone.extra['parse_s']} s, RSS {alone.extra['rss_before_mib']} -> "
                              f"{alone.extra['peak_mib']} MiB peak, {alone.extra['hosts']} hosts")
            except (ValueError, IndexError, KeyError):
                alone.note = "no result: " + result.stderr[-200:]
            result = measured(ctx, filling, lambda p=cached: listed(ctx, p, "--flush-cache"))
            filling.extra["hosts"] = hosts_in(result.stdout)
            result = measured(ctx, served, lambda p=cached: listed(ctx, p))
            served.extra["hosts"] = hosts_in(result.stdout)
            for row in cases:
                row.extra.update({"world_built_s": built, "control_plane_rss_mib": servers, "world_kept": bool(kept)})
                if row is not alone:
                    row.note = row.note or f"{row.extra.get('hosts')} hosts"
        finally:
            if not kept:
                remove_big_world(ctx, world)
    return rows


def register(scenarios: Dict[str, Any]) -> None:
    scenarios["B8"] = b8
