"""The inventory plugin nmo.maintenance.nodes against the local control plane's nodes:
ansible-inventory as a user runs it (groups, selector, keyed_groups, compose, cache), and one
maintenance run with the plugin as its only inventory, limited to a keyed group."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import yaml
from helpers import ansible_env
from topology import WORLD_LABEL

from .maintenance_support import run, slot_prefix

ZONE = "topology.kubernetes.io/zone"
CAMPAIGN = "nmo.maintenance/campaign"


def config(world: Any, directory: Path, name: str = "nodes.nmo.yml", **extra: Any) -> str:
    """The world's nodes, zone_<zone> groups, and what the maintenance playbook needs of them."""
    body: Dict[str, Any] = {
        "plugin": "nmo.maintenance.nodes",
        "label_selector": f"{WORLD_LABEL}={world.id}",
        "keyed_groups": [{"key": f"nmo_labels['{ZONE}'] | default('none')", "prefix": "zone"}],
        "compose": {"ansible_connection": "'local'",
                    "node_maintenance_slot_prefix": f"'{slot_prefix(world)}'",
                    "node_maintenance_etcd_pod_selector": f"'component=etcd,{WORLD_LABEL}={world.id}'",
                    "nmo_zone_upper": f"nmo_labels['{ZONE}'] | default('') | upper"},
        "groups": {"cordoned": "nmo_unschedulable"},
        **extra}
    path = directory / name
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return str(path)


def inventory(kubeconfig: str, path: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).parent / "ansible-inventory"), "-i", path, *args],
                          capture_output=True, text=True, timeout=120, env=ansible_env(kubeconfig), check=False)


def plain(value: Any) -> Any:
    """The JSON as read, without the marks some ansible-core versions put on values from an
    inventory plugin (``{"__ansible_unsafe": ...}``)."""
    if isinstance(value, dict):
        if set(value) == {"__ansible_unsafe"}:
            return value["__ansible_unsafe"]
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def listed(kubeconfig: str, path: str, *args: str) -> Dict[str, Any]:
    done = inventory(kubeconfig, path, "--list", *args)
    assert done.returncode == 0, done.stderr
    return plain(json.loads(done.stdout))


def members(data: Dict[str, Any], group: str) -> List[str]:
    return sorted((data.get(group) or {}).get("hosts") or [])


def test_groups_selector_keyed_groups_compose_and_cache(cluster, world, tmp_path):
    a1, a2 = world.add_nodes(workers=2, labels={ZONE: "a"})
    (b1,) = world.add_nodes(workers=1, labels={ZONE: "b"})
    (cp,) = world.add_nodes(control_planes=1, labels={ZONE: "a"})
    world.cordon(b1)
    path = config(world, tmp_path)

    data = listed(cluster.kubeconfig, path)
    assert members(data, "workers") == sorted([a1, a2, b1])
    assert members(data, "control_plane") == [cp]
    assert members(data, "zone_a") == sorted([a1, a2, cp]) and members(data, "zone_b") == [b1]
    assert members(data, "cordoned") == [b1]
    host = data["_meta"]["hostvars"][a1]
    node = world.node(a1)
    internal = next(a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP")
    assert host["node_maintenance_node"] == a1 and host["ansible_host"] == internal
    assert host["nmo_labels"][ZONE] == "a" and host["nmo_roles"] == ["worker"]
    assert host["nmo_creation_timestamp"] == node["metadata"]["creationTimestamp"] and host["nmo_ready"] is True
    assert host["nmo_zone_upper"] == "A" and host["ansible_connection"] == "local", "compose"
    everyone = {h for g in data.values() if isinstance(g, dict) for h in g.get("hosts") or []}
    assert everyone == {a1, a2, b1, cp}, "only the selector's nodes"

    # a narrower selector, and the node's name as ansible_host
    zone_b = config(world, tmp_path, "zone-b.nmo.yaml", label_selector=f"{WORLD_LABEL}={world.id},{ZONE}=b",
                    host_address="name")
    data = listed(cluster.kubeconfig, zone_b)
    assert members(data, "workers") == [b1] and members(data, "control_plane") == []
    assert data["_meta"]["hostvars"][b1]["ansible_host"] == b1

    # the graph a user looks at
    graph = inventory(cluster.kubeconfig, path, "--graph")
    assert graph.returncode == 0 and "@zone_a:" in graph.stdout and f"--{cp}" in graph.stdout

    # the cache: a fresh one is read, not the cluster; --flush-cache reads the cluster again
    cached = config(world, tmp_path, "cached.nmo.yml", cache=True, cache_plugin="ansible.builtin.jsonfile",
                    cache_connection=str(tmp_path / "cache"), cache_timeout=3600)
    assert members(listed(cluster.kubeconfig, cached), "zone_b") == [b1]
    cluster.client.patch(f"/api/v1/nodes/{a1}", {"metadata": {"labels": {ZONE: "b"}}}, "merge")
    assert members(listed(cluster.kubeconfig, cached), "zone_b") == [b1], "served from the cache"
    assert any((tmp_path / "cache").iterdir()), "the cache was written"
    assert members(listed(cluster.kubeconfig, cached, "--flush-cache"), "zone_b") == sorted([a1, b1])
    assert members(listed(cluster.kubeconfig, path), "zone_b") == sorted([a1, b1]), "without a cache: the cluster"


def test_bad_file_names_and_options_are_refused(cluster, world, tmp_path):
    world.add_nodes(workers=1)
    wrong_name = config(world, tmp_path, "nodes.yml")
    done = inventory(cluster.kubeconfig, wrong_name, "--list")
    assert "nodes.yml" in done.stderr and "_meta" in done.stdout and world.workers[0] not in done.stdout, \
        "a file not named *.nmo.yml is not ours"
    bad = config(world, tmp_path, "bad.nmo.yml", label_selector="zone in (a")
    done = inventory(cluster.kubeconfig, bad, "--list")
    assert "is not a valid label selector" in done.stderr + done.stdout


def test_a_maintenance_run_with_the_plugin_as_its_only_inventory(cluster, world, tmp_path):
    a1, a2 = world.add_nodes(workers=2, labels={ZONE: "a"})
    (b1,) = world.add_nodes(workers=1, labels={ZONE: "b"})
    path = config(world, tmp_path)
    r = run("maintenance.yml", path, cluster.kubeconfig, args=["-l", "zone_a"],
            extra_vars={"node_maintenance_campaign": f"plugin-{world.id}", "node_maintenance_preflight": "off"})
    assert r.proc.returncode == 0, r.output[-3000:]
    for node in (a1, a2):
        assert (world.node(node)["metadata"].get("annotations") or {}).get(CAMPAIGN) == f"plugin-{world.id}"
        assert not world.node(node)["spec"].get("unschedulable")
    assert CAMPAIGN not in (world.node(b1)["metadata"].get("annotations") or {}), "zone_b is not in the limit"
    assert sorted({rec["host"] for rec in r.task("End | Uncordon, remove the label and the taints, release the "
                                                 "leases, delete the NodeMaintenance")}) == sorted([a1, a2])
