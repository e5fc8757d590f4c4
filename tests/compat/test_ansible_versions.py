"""The collection on one ansible-core, as its users have it: run by hack/compat once per
declared version, with this Python the version's virtual environment, ansible-playbook its
own, and the collection installed from the built tarball (NMO_COLLECTIONS_PATH), not this
checkout. One worker goes through playbooks/maintenance.yml in process and once shipped;
hack/compat runs the parity test (tests/integration/test_parity.py) beside this module.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from ansible.release import __version__ as core_version
from helpers import collection_path
from integration.maintenance_support import maintenance_of, nm_name, reasons_of, run, wait_clean, write_inventory

pytestmark = [pytest.mark.cluster,
              pytest.mark.skipif(not os.environ.get("NMO_COMPAT_CORE"), reason="run by hack/compat")]

PATHS = {"in_process": {}, "shipped": {"NMO_MAINTENANCE_IN_PROCESS": "false"}}
STORY = ["BeginMaintenance", "LeaseAcquired", "Cordon", "SucceedMaintenance", "LeaseReleased", "RemovedMaintenance"]


def installed() -> Path:
    return collection_path() / "ansible_collections" / "nmo" / "maintenance"


def test_the_version_and_the_collection_under_test() -> None:
    assert core_version == os.environ["NMO_COMPAT_CORE"]
    assert not installed().is_symlink() and (installed() / "MANIFEST.json").is_file(), \
        "the collection must come from its tarball, not from this checkout"


def pods_on(cluster, world, node: str) -> int:
    pods = cluster.client.get(f"/api/v1/namespaces/{world.namespace}/pods")["items"]
    return len([p for p in pods if p["spec"].get("nodeName") == node and not p["metadata"].get("deletionTimestamp")])


def test_one_worker_through_maintenance_in_process_then_shipped(cluster, world, tmp_path) -> None:
    """Each path takes one of two workers through maintenance.yml; the other takes its pods
    (the pre-flight finds room). One world for both: a world's cleanup is a good part of the
    step's time."""
    nodes = world.add_nodes(workers=2)
    on_first = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "preference": {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [nodes[0]]}]}}]}}
    world.deployment("web", 2, pod_extra={"affinity": on_first})
    inventory = write_inventory(world, tmp_path)
    for path, node in zip(PATHS, nodes):
        placed = pods_on(cluster, world, node)
        assert placed, f"{path}: no pod on {node}"
        reports = tmp_path / f"report-{path}"
        done = run(str(installed() / "playbooks" / "maintenance.yml"), inventory, cluster.kubeconfig,
                   args=["-l", node, "-vvv"], env=PATHS[path], extra_vars={"node_maintenance_report_dir": str(reports)})
        out = done.output
        assert done.proc.returncode == 0, f"{path}: {out[-4000:]}"
        assert "modules are shipped" not in " ".join(out.split()), f"{path}: this ansible-core lacks what the path needs"
        worker_lines = re.findall(r"nmo\.maintenance\.nmo_\w+: running in Ansible's worker", out)
        shipped = re.findall(r"AnsiballZ_nmo_\w+\.py", out)
        if path == "in_process":
            assert worker_lines and not shipped, f"shipped: {sorted(set(shipped))}"
        else:
            assert shipped and not worker_lines, f"in process: {sorted(set(worker_lines))}"
        wait_clean(cluster.client, [node])
        assert maintenance_of(cluster.client, node) is None, f"{path}: the NodeMaintenance is left"
        story = reasons_of(cluster.client, nm_name(node))
        assert [r for r in STORY if r not in story] == [], f"{path}: events {story}"
        drained = done.task("Drain | Evict the pods (PodDisruptionBudgets respected)")
        assert sum(len(r["result"]["evicted"]) for r in drained) == placed, f"{path}: the drain evicted the node's pods"
        # the run report, from the callback beside the installed playbook (docs/report.md), on this version
        report = json.loads((reports / "report.json").read_text())
        assert [(n["name"], n["outcome"]) for n in report["nodes"]] == [(node, "succeeded")], f"{path}: {report}"
        assert len(report["nodes"][0]["pods_moved"]) == placed and (reports / "report.html").is_file()
        world.wait_pods_ready("app=web", 2)  # back to two running pods before the next node goes
