"""The harness of the real medik8s code (hack/medik8s, tests/medik8s.py) against the local cluster.

These prove the tools, not the collection: the lease tool behaves as medik8s/common's lease
library (what NHC and SNR use), and NMO v0.17.0 runs, reconciles a NodeMaintenance and answers
through its own validating webhook.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from medik8s import NM_PATH, NMO_FINALIZER, NMO_HOLDER
from topology import wait_for

LEASES = "/apis/coordination.k8s.io/v1/namespaces/medik8s-leases/leases"
DRAIN_TAINT = {"key": "medik8s.io/drain", "effect": "NoSchedule"}
EXCLUDE_LABEL = "remediation.medik8s.io/exclude-from-remediation"
MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")  # metav1.MicroTime on the wire


def _nm_manifest(name: str, node: str) -> str:
    return json.dumps({"apiVersion": "nodemaintenance.medik8s.io/v1beta1", "kind": "NodeMaintenance",
                       "metadata": {"name": name}, "spec": {"nodeName": node, "reason": "harness test"}})


def _has_taint(node: dict, taint: dict) -> bool:
    return any(t.get("key") == taint["key"] and t.get("effect") == taint["effect"]
               for t in node.get("spec", {}).get("taints") or [])


# -- (a) the lease library, as NHC uses it ------------------------------------------------
def test_lease_tool_speaks_medik8s_common(medik8s_tools, world, cluster):
    node = world.add_nodes(workers=1)[0]
    uid = world.node(node)["metadata"]["uid"]

    got = medik8s_tools.lease("request", node, "NodeHealthCheck-x", 3600)
    assert got["ok"], got
    raw = cluster.client.get(f"{LEASES}/node-{node}")
    spec = raw["spec"]
    assert spec["holderIdentity"] == "NodeHealthCheck-x"
    assert spec["leaseDurationSeconds"] == 3600
    assert spec["leaseTransitions"] == 0
    assert MICRO_TIME.match(spec["acquireTime"]) and spec["acquireTime"] == spec["renewTime"], spec
    assert raw["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid}]
    assert got["lease"]["validNow"] and got["namespace"] == "medik8s-leases"

    # Another holder (NMO's) is refused while the lease is valid, for request and invalidate.
    other = medik8s_tools.lease("request", node, NMO_HOLDER, 3600)
    assert not other["ok"] and other["alreadyHeld"], other
    assert "held by different owner: NodeHealthCheck-x" in other["error"]
    refused = medik8s_tools.lease("invalidate", node, NMO_HOLDER)
    assert not refused["ok"] and refused["alreadyHeld"], refused
    assert cluster.client.get(f"{LEASES}/node-{node}")["spec"]["holderIdentity"] == "NodeHealthCheck-x"

    # The holder releases it: the lease is deleted.
    released = medik8s_tools.lease("invalidate", node, "NodeHealthCheck-x")
    assert released["ok"], released
    assert cluster.client.get_or_none(f"{LEASES}/node-{node}") is None
    gone = medik8s_tools.lease("get", node)
    assert not gone["ok"] and gone["notFound"], gone


def test_lease_tool_takes_over_an_expired_lease(medik8s_tools, world, cluster):
    node = world.add_nodes(workers=1)[0]
    assert medik8s_tools.lease("request", node, "NodeHealthCheck-x", 1)["ok"]
    # Expired by the library's own rule (renewTime + duration in the past), judged by the tool.
    wait_for(lambda: not medik8s_tools.lease("get", node)["lease"]["validNow"], 10, "the 1 s lease to lapse")
    took = medik8s_tools.lease("request", node, NMO_HOLDER, 3600)
    assert took["ok"], took
    spec = cluster.client.get(f"{LEASES}/node-{node}")["spec"]
    assert spec["holderIdentity"] == NMO_HOLDER and spec["leaseTransitions"] == 1
    assert spec["leaseDurationSeconds"] == 3600
    assert medik8s_tools.lease("invalidate", node, NMO_HOLDER)["ok"]


# -- (b) NMO reconciles a NodeMaintenance -------------------------------------------------
def test_nmo_maintains_and_releases_a_node(medik8s, world, cluster):
    w1, w2 = world.add_nodes(workers=2)
    with world.only_schedulable(w1):
        world.deployment("web", 2)
    assert len(world.pods(node=w1, namespace=world.namespace)) == 2
    name = f"nm-{world.id}"
    cluster.kubectl("create", "-f", "-", input=_nm_manifest(name, w1))

    def phase() -> str:
        return (cluster.client.get(f"{NM_PATH}/{name}").get("status") or {}).get("phase", "")
    wait_for(lambda: phase() == "Succeeded", 90, f"NMO to take {name} to Succeeded")

    nm = cluster.client.get(f"{NM_PATH}/{name}")
    assert NMO_FINALIZER in nm["metadata"]["finalizers"]
    assert nm["status"]["drainProgress"] == 100 and nm["status"]["evictionPods"] == 2, nm["status"]
    node = world.node(w1)
    assert node["spec"].get("unschedulable") is True
    assert _has_taint(node, DRAIN_TAINT), node["spec"].get("taints")
    assert node["metadata"]["labels"].get(EXCLUDE_LABEL) == "true"
    assert cluster.client.get(f"{LEASES}/node-{w1}")["spec"]["holderIdentity"] == NMO_HOLDER
    assert world.pods(node=w1, namespace=world.namespace) == []
    world.wait_pods_ready("app=web", 2)
    assert {p["spec"]["nodeName"] for p in world.pods(namespace=world.namespace)} == {w2}

    # NMO's requests carry its own identity in the audit log.
    audit = Path(cluster.dir) / "audit.log"
    assert any(medik8s.user in line and f"nodemaintenances/{name}" in line and '"status"' in line
               for line in audit.read_text().splitlines()), f"no request of {medik8s.user} for {name} in {audit}"

    # Deleting it: NMO uncordons, untaints, unlabels, releases the lease, removes its finalizer.
    cluster.kubectl("delete", "nodemaintenance", name, "--wait=false")
    wait_for(lambda: cluster.client.get_or_none(f"{NM_PATH}/{name}") is None, 60, f"NMO to remove its finalizer from {name}")
    node = world.node(w1)
    assert not node["spec"].get("unschedulable")
    assert not _has_taint(node, DRAIN_TAINT)
    assert EXCLUDE_LABEL not in node["metadata"]["labels"]
    assert cluster.client.get_or_none(f"{LEASES}/node-{w1}") is None


# -- (c) NMO's own validating webhook -----------------------------------------------------
def test_nmo_webhook_rejects_what_nmo_rejects(medik8s, world, cluster):
    w1 = world.add_nodes(workers=1)[0]
    first = f"nm-{world.id}-a"
    cluster.kubectl("create", "-f", "-", input=_nm_manifest(first, w1))
    second = cluster.kubectl("create", "-f", "-", input=_nm_manifest(f"nm-{world.id}-b", w1), check=False)
    assert second.returncode != 0
    assert "vnodemaintenance.kb.io" in second.stderr, second.stderr
    assert f"invalid nodeName, a NodeMaintenance for node {w1} already exists" in second.stderr, second.stderr
    missing = cluster.kubectl("create", "-f", "-", input=_nm_manifest(f"nm-{world.id}-c", f"{w1}-missing"), check=False)
    assert missing.returncode != 0
    assert f"invalid nodeName, no node with name {w1}-missing found" in missing.stderr, missing.stderr
    assert cluster.client.get_or_none(f"{NM_PATH}/nm-{world.id}-b") is None
    # Let NMO finish the first one before the world goes.
    wait_for(lambda: ((cluster.client.get(f"{NM_PATH}/{first}").get("status") or {}).get("phase")) == "Succeeded",
             60, f"{first} Succeeded")
    cluster.kubectl("delete", "nodemaintenance", first, "--wait=false")
    wait_for(lambda: cluster.client.get_or_none(f"{NM_PATH}/{first}") is None, 60, f"{first} gone")


def test_nmo_stopped_unregisters_its_webhook(medik8s, world, cluster):
    w1 = world.add_nodes(workers=1)[0]
    with medik8s.nmo_stopped():
        assert cluster.client.get_or_none(
            f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{medik8s.webhook_config}") is None
        # Nothing answers for NMO: a NodeMaintenance is accepted and stays untouched.
        name = f"nm-{world.id}"
        cluster.kubectl("create", "-f", "-", input=_nm_manifest(name, w1))
        assert not cluster.client.get(f"{NM_PATH}/{name}")["metadata"].get("finalizers")
        cluster.kubectl("delete", "nodemaintenance", name)
    assert medik8s.running()
    assert cluster.client.get(
        f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{medik8s.webhook_config}")


# -- (d) the signal of a running NMO: its leader-election Lease ----------------------------
def _private_mounts() -> bool:
    return subprocess.run(["unshare", "-m", "--propagation", "private", "true"],
                          capture_output=True, check=False).returncode == 0


@pytest.mark.skipif(not _private_mounts(), reason="leader election outside a pod needs root and unshare -m here")
def test_nmo_with_leader_election_holds_its_lease(medik8s, cluster):
    path = f"/apis/coordination.k8s.io/v1/namespaces/{medik8s.namespace}/leases/{medik8s.leader_lease}"
    with medik8s.configured(leader_elect=True):
        lease = wait_for(lambda: cluster.client.get_or_none(path), 30, "NMO's leader-election Lease")
        first = lease["spec"]["renewTime"]
        assert lease["spec"]["holderIdentity"] and lease["spec"]["leaseDurationSeconds"] == 15
        wait_for(lambda: cluster.client.get(path)["spec"]["renewTime"] != first, 15, "NMO to renew its Lease")
