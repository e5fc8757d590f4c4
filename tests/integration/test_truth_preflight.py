"""The pre-flight refuses what the begin would refuse, and nothing is written for such a node.

Three nodes the begin cannot take: a control-plane node holding the only etcd member, a node
whose 250-character name makes names too long, and a node no kubelet keeps Ready. With
``node_maintenance_preflight: enforce`` (the default) the play stops at the pre-flight; with
``warn`` the begin refuses each of them before its first write (the node without its kubelet
unless the drain's ``skip_wait_for_delete_timeout`` lets the drain go on without it), and the
last line says nothing was written. What was written is read from the API server's audit log."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest
import yaml
from topology import KWOK_ANNOTATION, WORLD_LABEL, wait_for

from .maintenance_support import AuditLog, maintenance_of, run, slot_prefix

pytestmark = [pytest.mark.cluster]

STOP = "Preflight | Stop before any node is touched"


def long_node(cluster: Any, world: Any) -> str:
    """A kwok node (Ready) whose name is 250 characters: maintenance-<name> would be 262."""
    labels, name = [f"n{world.id}"], ""
    while len(".".join(labels)) < 250:
        labels.append("x" * min(62, 250 - len(".".join(labels)) - 1))
    name = ".".join(labels)[:250]
    assert len(name) == 250
    cluster.client.post("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": name, "annotations": dict(KWOK_ANNOTATION),
        "labels": {WORLD_LABEL: world.id, "node-role.kubernetes.io/worker": "", "type": "kwok"}},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}})
    world.nodes.append(name)
    wait_for(lambda: any(c.get("type") == "Ready" and c.get("status") == "True" for c in
                         cluster.client.get(f"/api/v1/nodes/{name}").get("status", {}).get("conditions") or []),
             60, "the long-named node Ready")
    return name


def down_node(cluster: Any, world: Any) -> str:
    """A node that no kubelet (nor kwok) keeps Ready."""
    name = f"node-{world.id}-down-01"
    cluster.client.post("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": name, "labels": {WORLD_LABEL: world.id}}})
    world.nodes.append(name)
    return name


def inventory(world: Any, folder: Path, hosts: Dict[str, Dict[str, Any]], **more: Any) -> str:
    doc = {"all": {"vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                            "node_maintenance_slot_prefix": slot_prefix(world),
                            "node_maintenance_etcd_pod_selector": f"component=etcd,{WORLD_LABEL}={world.id}",
                            **more},
                   "children": {"nodes": {"hosts": hosts}}}}
    path = folder / f"inventory-{len(list(folder.glob('inventory-*')))}.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return str(path)


def writes_about(audit: AuditLog, user: str, nodes: List[str]) -> List[str]:
    """Every write of ``user`` to a NodeMaintenance, or naming one of ``nodes`` (the Node, its
    node lease, an event about it)."""
    found = []
    for entry in audit.settled().writes_of(user):
        ref = entry.get("objectRef") or {}
        text = f"{entry['verb']} {entry['requestURI']}"
        body = str(entry.get("requestObject") or "")
        if ref.get("resource") == "nodemaintenances" or any(n in text or n in body for n in nodes):
            found.append(text)
    return found


def last_line(result: Any, node: str) -> str:
    # the playbook fails the node in its last play; the role's own task is then skipped
    stopped = [r for r in result.task("Failed | Stop here") if r["host"] == node and r["status"] == "failed"]
    assert stopped, result.output[-4000:]
    return stopped[0]["result"]["msg"]


def test_the_preflight_refuses_what_the_begin_would_and_nothing_is_written(cluster, world, user, tmp_path):
    (cp,) = world.add_nodes(control_planes=1)
    world.etcd_members()  # the only member
    long = long_node(cluster, world)
    down = down_node(cluster, world)

    # enforce: the play stops at the pre-flight, each node named with its reason
    audit = AuditLog(cluster)
    enforced = run("maintenance.yml", inventory(world, tmp_path, {cp: None, long: None, down: None}),
                   user.kubeconfig)
    assert enforced.proc.returncode != 0
    stop = enforced.last(STOP)
    assert stop is not None and stop["status"] == "failed", enforced.output[-4000:]
    said = stop["result"]["msg"]
    assert "no-go: 3 of 3 node(s) blocked" in said, said
    assert f"node {cp} can never be maintained under this guard: with 1 member(s) etcd cannot lose one" in said
    assert "Add control-plane nodes (etcd members) first" in said
    assert f"etcd quorum would not be kept while node {cp} is in maintenance" in said and "remediated" not in said
    assert "its NodeMaintenance cannot be made: node:" in said and "would be 262 characters" in said
    assert "its node lease cannot be made" in said and "would be 255 characters" in said
    assert f"node {down} is not Ready (it has no Ready condition" in said or f"node {down} is unreachable" in said
    assert "evictions there wait for a kubelet that is not there" in said
    assert writes_about(audit, user.name, [cp, long, down]) == []

    # warn, the long name with node_maintenance_name: the begin refuses it before its first
    # write; the last line says nothing was written, and names no maintenance-<node>
    audit = AuditLog(cluster)
    named = run("maintenance.yml", inventory(world, tmp_path, {long: {"node_maintenance_name": "fw-2026"}},
                                             node_maintenance_preflight="warn"), user.kubeconfig)
    assert named.proc.returncode != 0
    said = last_line(named, long)
    assert "would be 255 characters" in said and "Nothing was written for it: the node is as it was" in said, said
    assert "could not be recorded" not in said and "rolled back" not in said and "maintenance-n" not in said, said

    # warn, the only etcd member: refused by the begin before its NodeMaintenance is made
    refused = run("maintenance.yml", inventory(world, tmp_path, {cp: None}, node_maintenance_preflight="warn"),
                  user.kubeconfig)
    assert refused.proc.returncode != 0
    said = last_line(refused, cp)
    assert f"node {cp} can never be maintained under this guard" in said and "Nothing was written" in said, said
    assert "could not be recorded" not in said and "rolled back" not in said, said

    # warn, the node no kubelet keeps Ready: refused by the begin too, with the pre-flight's words
    unready = run("maintenance.yml", inventory(world, tmp_path, {down: None}, node_maintenance_preflight="warn"),
                  user.kubeconfig)
    assert unready.proc.returncode != 0
    said = last_line(unready, down)
    assert "evictions there wait for a kubelet that is not there" in said and "Nothing was written" in said, said
    assert "skip_wait_for_delete_timeout" in said and "could not be recorded" not in said, said
    assert maintenance_of(cluster.client, cp) is None and maintenance_of(cluster.client, long) is None
    assert maintenance_of(cluster.client, down) is None
    assert writes_about(audit, user.name, [cp, long, down]) == []
