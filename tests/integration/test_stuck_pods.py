"""Pods that do not leave, named (issue 33's three "Why" cases): a finalizer, a budget that
allows nothing because its pods are not Ready, a node without its kubelet.

One role run for the first two (the pre-flight, the progress lines, the failure message at
the drain's timeout, the NodeMaintenance's lastError, report.json), one drain and one
pre-flight of the modules' cores for the third.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from topology import pod_ready, wait_for

from ansible_collections.nmo.maintenance.plugins.module_utils.api.client import Client
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows.drain import DrainOptions, drain
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows.preflight import PreflightOptions, preflight

from .maintenance_support import Background, events_of, nm_status, run, start_maintenance, write_inventory
from .test_truth_preflight import down_node

pytestmark = pytest.mark.cluster

HOLD = "example.com/hold"
PDB = "/apis/policy/v1/namespaces/{}/poddisruptionbudgets/{}"


def own_client(cluster: Any) -> Client:
    return Client(cluster.client.configuration, pool_size=8)


def release(cluster: Any, world: Any) -> None:
    """Take the finalizer off every held pod, so the world can be cleaned up."""
    for pod in world.pods(namespace=world.namespace, selector="app=held"):
        cluster.client.patch(f"/api/v1/namespaces/{world.namespace}/pods/{pod['metadata']['name']}",
                             {"metadata": {"finalizers": None}}, "merge")


def test_finalizer_and_unhealthy_budget_are_named_from_preflight_to_timeout(cluster, world, crd_installed, tmp_path):
    """Why 1 and 2: a Deployment's pod held by a finalizer nobody removes, and a budget that
    allows nothing because 2 of its 3 pods are not Ready; app's refusal, over once its
    replacement is Ready, is not the last error of a drain that waits for the others."""
    a, _b = world.add_nodes(workers=2)
    try:
        with world.only_schedulable(a):
            world.deployment("app", 2)
            world.deployment("flaky", 3)
            world.deployment("held", 1, grace=1)  # its grace is over a second after the eviction
            # the template's finalizer goes onto the pod the ReplicaSet makes (a rollout)
            cluster.client.patch(f"/apis/apps/v1/namespaces/{world.namespace}/deployments/held",
                                 {"spec": {"template": {"metadata": {"finalizers": [HOLD]}}}}, "merge")
            held = wait_for(lambda: [p for p in world.pods(namespace=world.namespace, selector="app=held")
                                     if HOLD in (p["metadata"].get("finalizers") or [])
                                     and not p["metadata"].get("deletionTimestamp") and pod_ready(p)], 60,
                            "held's pod with the finalizer, Ready")
            wait_for(lambda: len(world.pods(namespace=world.namespace, selector="app=held")) == 1, 60,
                     "held's old pod gone")
        world.pdb("app", "app", min_available=1)
        world.pdb("flaky", "flaky", max_unavailable=1)
        flaky = sorted(p["metadata"]["name"] for p in world.pods(namespace=world.namespace, selector="app=flaky"))
        for name in flaky[:2]:
            world.set_pod_ready(world.namespace, name, False)
        wait_for(lambda: cluster.client.get(PDB.format(world.namespace, "flaky")).get("status", {})
                 .get("currentHealthy") == 1, 30, "flaky's budget to count 1 healthy pod")
        reports = tmp_path / "reports"
        inventory = write_inventory(world, tmp_path, node_maintenance_drain={"timeout": 15},
                                    node_maintenance_progress_interval=2, node_maintenance_report_dir=str(reports))
        played = run("maintenance.yml", inventory, cluster.kubeconfig, args=["-l", a])
        out = played.output
        assert played.proc.returncode != 0, out[-4000:]

        # the pre-flight names the finalizer and the unhealthy budget, AlwaysAllow included
        checked = played.last("Preflight | What would block the maintenance of the play's nodes")
        assert checked is not None, out[-4000:]
        warnings = " | ".join(checked["result"]["nodes"][0]["warnings"])
        assert f"{world.namespace}/{held[0]['metadata']['name']} has finalizer {HOLD}" in warnings, warnings
        assert (f"PDB {world.namespace}/flaky allows 0 disruptions because 2 of 3 pod(s) are not Ready" in warnings
                and "unhealthyPodEvictionPolicy: AlwaysAllow" in warnings), warnings

        # progress lines: the hold is named; once app's pods are gone its refusal is no longer said
        progress = [line for line in out.splitlines() if f"{a}: drainProgress" in line]
        assert any(f"held by finalizer {HOLD}" in line for line in progress), "\n".join(progress)
        assert any("2 of 3 pod(s) are not Ready" in line for line in progress), "\n".join(progress)
        assert "disruption budget app" not in progress[-1], "\n".join(progress)

        # the failure at the drain's timeout names both
        failed = re.search(r"timed out after 15 s; still pending: (.*)", out)
        assert failed is not None, out[-4000:]
        assert f"held by finalizer {HOLD}" in failed.group(1) and "2 of 3 pod(s) are not Ready" in failed.group(1)
        assert "disruption budget app" not in failed.group(1), failed.group(1)

        # (lastError is what the progress lines print; the rollback deleted the NodeMaintenance
        # since, with its events) and the blocker table of report.json
        report = json.loads((reports / "report.json").read_text())
        blocked = [b for n in report["nodes"] for b in n["blocked"]]
        assert any(b["reason"].startswith(f"held by finalizer {HOLD}") for b in blocked), blocked
        assert any("2 of 3 pod(s) are not Ready" in b["reason"] and b["pdb"] == "flaky" for b in blocked), blocked
    finally:
        release(cluster, world)


def test_a_node_without_its_kubelet_is_named_and_skip_wait_names_what_it_left(cluster, world, crd_installed):
    """Why 3: pods on a node no kubelet keeps Ready; skip_wait_for_delete_timeout lets the drain
    finish as kubectl's does, naming the pods it left Terminating and why."""
    down = down_node(cluster, world)
    world.ensure_namespace()
    for i in range(2):
        world.pod(f"stranded-{i}", node=down, wait=False)
    start_maintenance(cluster, world, down)
    name = f"maintenance-{down}"

    judged = preflight(own_client(cluster), PreflightOptions(nodes=(down,)))
    assert judged["nodes"][0]["verdict"] == "no-go"
    assert "evictions there wait for a kubelet that is not there" in judged["nodes"][0]["blockers"][0]

    running = Background(lambda: drain(own_client(cluster), DrainOptions(
        node=down, maintenance=name, timeout=60, grace_period=1, skip_wait_for_delete_timeout=3)))
    said = wait_for(lambda: "the kubelet is not there to finish it" in nm_status(cluster, name).get("lastError", "")
                    and nm_status(cluster, name)["lastError"], 30, "lastError to say the kubelet is not there")
    assert f"terminating on node {down}, which is " in said, said
    messages = [e["message"] for e in events_of(cluster.client, name)]
    assert any(f"does not leave: terminating on node {down}" in m for m in messages), messages
    result = running.join(90)
    left = sorted(p["name"] for p in result["left_terminating"])
    assert left == ["stranded-0", "stranded-1"], result
    assert all("skip_wait_for_delete_timeout (3 s)" in p["reason"] and "kubelet is not there" in p["reason"]
               for p in result["left_terminating"]), result["left_terminating"]
    assert result["evicted"] == [] and result["pending"] == []
    assert any("2 pod(s) still terminating were left behind" in w for w in result["warnings"]), result["warnings"]
    assert all(p["metadata"].get("deletionTimestamp") for p in world.pods(node=down)), "left Terminating, as kubectl"

    # the pre-flight, now: the pods terminating there are named with the same reason
    judged = preflight(own_client(cluster), PreflightOptions(nodes=(down,), skip_wait_for_delete_timeout=3600))
    warned = " | ".join(judged["nodes"][0]["warnings"])
    assert "stranded-0: terminating on node" in warned and "the kubelet is not there" in warned, warned
