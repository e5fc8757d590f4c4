"""The API semantics the collection relies on, proven on the local control plane."""

import time
import uuid
from pathlib import Path

import pytest
from topology import wait_for

from ansible_collections.nmo.maintenance.plugins.module_utils.api.client import Client
from ansible_collections.nmo.maintenance.plugins.module_utils.errors import (
    ApiError,
    Conflict,
    NotFound,
    TooManyRequests,
    UnprocessableEntity,
)

pytestmark = [pytest.mark.cluster, pytest.mark.side_lane]  # CI: beside the main suite (hack/test)


def evict(client, ns, name):
    return client.post(f"/api/v1/namespaces/{ns}/pods/{name}/eviction",
                       {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": ns}})


def test_nodes_are_ready_and_the_server_reports_the_pinned_version(cluster, world):
    world.add_nodes(workers=2)
    out = cluster.kubectl("get", "nodes", "-l", f"nmo.test/world={world.id}", "--no-headers").stdout
    assert out.count(" Ready ") == 2, out
    version = cluster.client.get("/version")
    versions = (Path(__file__).resolve().parents[2] / "hack" / "versions.env").read_text().splitlines()
    pinned = next(line.split("=", 1)[1] for line in versions if line.startswith("KUBERNETES_VERSION="))
    assert version["gitVersion"] == pinned


def test_pdb_refuses_eviction_with_429_then_allows_it(cluster, world):
    world.add_nodes(workers=1)
    world.vm("db")
    pod = "virt-launcher-db"
    with pytest.raises(TooManyRequests) as refused:
        evict(cluster.client, world.namespace, pod)
    assert "Cannot evict pod as it would violate the pod's disruption budget" in refused.value.server_message
    assert cluster.client.get(f"/api/v1/namespaces/{world.namespace}/pods/{pod}")
    cluster.client.patch(f"/apis/policy/v1/namespaces/{world.namespace}/poddisruptionbudgets/kubevirt-disruption-budget-db",
                         {"spec": {"minAvailable": 0}}, "merge")
    wait_for(lambda: cluster.client.get(
        f"/apis/policy/v1/namespaces/{world.namespace}/poddisruptionbudgets/kubevirt-disruption-budget-db")
        ["status"].get("disruptionsAllowed", 0) >= 1, 30, "the PDB to allow a disruption")
    evict(cluster.client, world.namespace, pod)
    wait_for(lambda: cluster.client.get_or_none(f"/api/v1/namespaces/{world.namespace}/pods/{pod}") is None, 30, "pod gone")


def test_json_patch_with_failing_test_is_refused_and_changes_nothing(cluster, world):
    (node,) = world.add_nodes(workers=1)
    path = f"/api/v1/nodes/{node}"
    before = cluster.client.get(path)["spec"].get("taints")
    ops = [{"op": "test", "path": "/spec/taints", "value": [{"key": "someone-else", "effect": "NoSchedule"}]},
           {"op": "add", "path": "/spec/taints", "value": [{"key": "ours", "effect": "NoSchedule"}]}]
    with pytest.raises(UnprocessableEntity):
        cluster.client.patch(path, ops, "json")
    assert cluster.client.get(path)["spec"].get("taints") == before


def test_lease_update_with_stale_resource_version_gets_409(cluster, world):
    ns = world.ensure_namespace()
    base = f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
    lease = cluster.client.post(base, {"metadata": {"name": "probe"}, "spec": {"holderIdentity": "a"}})
    fresh = dict(lease, spec={"holderIdentity": "b"})
    cluster.client.put(f"{base}/probe", fresh)
    stale = dict(lease, spec={"holderIdentity": "c"})  # carries the first resourceVersion
    with pytest.raises(Conflict):
        cluster.client.put(f"{base}/probe", stale)
    assert cluster.client.get(f"{base}/probe")["spec"]["holderIdentity"] == "b"


def served(client, path):
    try:
        return client.get(path) is not None
    except (NotFound, TooManyRequests):  # right after Established, storage may still initialise
        return False


def test_cel_transition_rule_refuses_a_change_with_its_message(cluster):
    group = f"t{uuid.uuid4().hex[:8]}.nmo.test"
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"things.{group}"},
        "spec": {"group": group, "scope": "Cluster", "names": {"kind": "Thing", "plural": "things"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                     "type": "object", "properties": {"spec": {"type": "object", "properties": {"target": {
                         "type": "string", "x-kubernetes-validations": [
                             {"rule": "self == oldSelf", "message": "target is immutable"}]}}}}}}}]},
    }
    crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    cluster.client.post(crds, crd)
    try:
        wait_for(lambda: any(c["type"] == "Established" and c["status"] == "True" for c in
                             cluster.client.get(f"{crds}/things.{group}").get("status", {}).get("conditions") or []),
                 30, "CRD established")
        base = f"/apis/{group}/v1/things"
        wait_for(lambda: served(cluster.client, base), 30, "CRD served")
        cluster.client.post(base, {"apiVersion": f"{group}/v1", "kind": "Thing", "metadata": {"name": "a"},
                                   "spec": {"target": "x"}})
        with pytest.raises(UnprocessableEntity) as refused:
            cluster.client.patch(f"{base}/a", {"spec": {"target": "y"}}, "merge")
        assert "target is immutable" in refused.value.server_message
    finally:
        cluster.client.delete(f"{crds}/things.{group}")


def test_evicted_deployment_pod_is_recreated_on_another_schedulable_node(cluster, world):
    first, second = world.add_nodes(workers=2)
    with world.only_schedulable(first):
        world.deployment("web", 1)
    (pod,) = world.pods(namespace=world.namespace, selector="app=web")
    assert pod["spec"]["nodeName"] == first
    world.cordon(first)
    evict(cluster.client, world.namespace, pod["metadata"]["name"])
    (new,) = world.wait_pods_ready("app=web", 1)
    assert new["metadata"]["uid"] != pod["metadata"]["uid"]
    assert new["spec"]["nodeName"] == second


def test_cordoned_node_receives_no_new_pod(cluster, world):
    first, second = world.add_nodes(workers=2)
    world.cordon(first)
    world.deployment("spread", 4)
    nodes = {p["spec"]["nodeName"] for p in world.pods(namespace=world.namespace, selector="app=spread")}
    assert nodes == {second}


def test_graceful_pod_lasts_its_grace_period(cluster, world):
    world.add_nodes(workers=1)
    world.pod("slow", grace=3, graceful=True)
    path = f"/api/v1/namespaces/{world.namespace}/pods/slow"
    started = time.monotonic()
    cluster.client.delete(path)
    seen_terminating = wait_for(lambda: (cluster.client.get_or_none(path) or {}).get("metadata", {}).get("deletionTimestamp"),
                                5, "pod terminating")
    assert seen_terminating
    wait_for(lambda: cluster.client.get_or_none(path) is None, 15, "pod gone after its grace")
    elapsed = time.monotonic() - started
    # deletionTimestamp has whole seconds, so kwok confirms the deletion up to 1 s early.
    assert elapsed >= 2.0, f"pod went away after {elapsed:.1f} s, before its 3 s grace period"


def test_immediate_pod_goes_at_once(cluster, world):
    world.add_nodes(workers=1)
    world.pod("quick", grace=30)
    path = f"/api/v1/namespaces/{world.namespace}/pods/quick"
    started = time.monotonic()
    cluster.client.delete(path)
    wait_for(lambda: cluster.client.get_or_none(path) is None, 15, "pod gone")
    assert time.monotonic() - started < 25, "an immediate pod waited for its 30 s grace period"


def test_a_world_survives_restarts_of_the_api_server_and_etcd(cluster, world):
    (node,) = world.add_nodes(workers=1)
    world.deployment("web", 2)
    before = sorted(p["metadata"]["uid"] for p in world.pods(namespace=world.namespace))
    one_shot = Client(cluster.client.configuration)  # its own pool: no connection of another test

    try:
        cluster.stop("kube-apiserver")
        cluster.stop("kube-apiserver")  # idempotent
        with pytest.raises(ApiError) as down:
            one_shot.request("GET", "/version", budget=0)
        assert down.value.status == 0, down.value.message
        cluster.start("kube-apiserver")  # returns when ready
        cluster.start("kube-apiserver")  # idempotent: only waits
        assert one_shot.request("GET", "/version", budget=0)["gitVersion"]

        cluster.restart("etcd")
        cluster.restart("kube-apiserver")
    finally:
        cluster.start("etcd")
        cluster.start("kube-apiserver")
        cluster.restart_controllers()
    # The data is kept: same node, same pods, and the shared client carries on.
    assert world.node(node)["metadata"]["name"] == node
    assert sorted(p["metadata"]["uid"] for p in world.pods(namespace=world.namespace)) == before
    assert cluster.kubectl("get", "deployment", "web", "-n", world.namespace, "--no-headers").stdout.startswith("web")
