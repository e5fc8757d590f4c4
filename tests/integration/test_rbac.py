"""The shipped RBAC (meta/rbac/) is what the collection uses, nothing more (issue 13, point 6).

A whole maintenance run as a user bound only to it succeeds, the audit log shows no request
of that user refused and leases only in medik8s-leases, events only in default, no pod
deleted; and the API server itself (SubjectAccessReviews, through kubectl auth can-i --as)
says that user cannot touch node heartbeats, leader election, other namespaces' pods and
events, namespaces or the CRD.
"""

from __future__ import annotations

from typing import Any, Dict, Set, Tuple

import pytest
from helpers import run_module
from topology import wait_for

from ansible_collections.nmo.maintenance.plugins.module_utils.api.client import ConnectionOptions, connect
from ansible_collections.nmo.maintenance.plugins.module_utils.errors import NmoError
from ansible_collections.nmo.maintenance.plugins.module_utils.model import leases
from ansible_collections.nmo.maintenance.plugins.module_utils.stores import crd
from ansible_collections.nmo.maintenance.plugins.module_utils.stores import leases as lease_store
from ansible_collections.nmo.maintenance.plugins.module_utils.stores.crd import (
    CRD_NAME,
    CRD_PATH,
    REVISION_ANNOTATION,
    SCHEMA_REVISION,
    installed_revision,
)

from .maintenance_support import (
    LEASES,
    AuditLog,
    RestrictedUser,
    leases_naming,
    maintenance_of,
    nm_name,
    reasons_of,
    run,
    slot_prefix,
    wait_clean,
    write_inventory,
)

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def run_leases(client: Any) -> Set[str]:
    items = (client.get_or_none(LEASES) or {}).get("items", [])
    return {item["metadata"]["name"] for item in items if item["metadata"]["name"].startswith("nmo-run-")}


def resource_of(entry: Dict[str, Any]) -> Tuple[str, str, str]:
    ref = entry.get("objectRef") or {}
    resource = ref.get("resource", entry.get("requestURI", ""))
    if ref.get("subresource"):
        resource += "/" + ref["subresource"]
    return entry["verb"], resource, ref.get("namespace", "")


def test_a_whole_run_under_the_shipped_rbac_uses_only_what_it_grants(cluster, world, user, tmp_path):
    w1, w2 = world.add_nodes(workers=2)
    world.daemonset("agent")
    world.deployment("web", 2)
    world.pdb("web", "web", max_unavailable=1)
    # A finished pod under a budget that allows no disruption: evicted all the same (the
    # API server does not count finished pods), with no pod delete permission.
    world.pod("job-done", node=w1, phase="Succeeded", labels={"app": "job"})
    world.pdb("job", "job", min_available=1)
    inventory = write_inventory(world, tmp_path)
    audit = AuditLog(cluster)
    runs_before = run_leases(cluster.client)

    result = run("maintenance.yml", inventory, user.kubeconfig, args=["-l", "workers"])

    assert result.proc.returncode == 0, result.output[-4000:]
    # the run's heartbeat deletes its run lease once ansible-playbook is gone: that request too
    wait_for(lambda: run_leases(cluster.client) <= runs_before, 30, "the run lease to be released")
    wait_clean(cluster.client, [w1, w2])
    assert maintenance_of(cluster.client, w1) is None and maintenance_of(cluster.client, w2) is None
    assert leases_naming(cluster.client, [w1, w2], slot_prefix(world)) == []
    assert "UncordonNode" in reasons_of(cluster.client, w1) and "Drain" in reasons_of(cluster.client, nm_name(w1))
    assert cluster.client.get_or_none(f"/api/v1/namespaces/{world.namespace}/pods/job-done") is None

    requests = audit.requests_of(user.name)
    used = sorted({resource_of(e) for e in requests})
    print("\nrequests of the run, by verb, resource and namespace:\n" + "\n".join(
        f"  {sum(1 for e in requests if resource_of(e) == u):4d}  {u[0]:<7} {u[1]:<32} {u[2]}" for u in used))
    assert len(requests) > 20, "the audit log did not record the run"
    refused = [(resource_of(e), e.get("responseStatus", {})) for e in requests
               if e.get("responseStatus", {}).get("code") == 403]
    assert refused == [], f"requests refused by RBAC: {refused}"
    assert {ns for _v, r, ns in used if r == "leases"} == {"medik8s-leases"}
    assert {ns for _v, r, ns in used if r == "events"} == {"default"}
    assert not [u for u in used if u[1] == "pods" and u[0] == "delete"], "a pod was deleted, not evicted"
    assert ("create", "pods/eviction", world.namespace) in used
    assert not [u for u in used if u[1] in ("namespaces", "customresourcedefinitions") and u[0] != "get"], used

    # What the identity cannot do, asked of the API server itself.
    lease_writes = ("update", "delete", "create", "patch")
    denied = [
        *[(verb, "leases", ns) for ns in ("kube-node-lease", "kube-system") for verb in lease_writes],
        ("delete", "pods", world.namespace), ("delete", "pods", "*"), ("create", "pods", world.namespace),
        ("create", "events", "kube-system"), ("create", "events", world.namespace), ("patch", "events", "kube-system"),
        ("create", "namespaces", None), ("delete", "namespaces", None),
        ("update", "customresourcedefinitions", None), ("create", "customresourcedefinitions", None),
        ("delete", "customresourcedefinitions", None),
        ("update", "leases", "*"), ("list", "secrets", "*"),
    ]
    allowed = [(verb, "leases", "medik8s-leases") for verb in ("get", "list", "watch", *lease_writes)]
    allowed += [("list", "pods", "*"), ("watch", "pods", "*"), ("create", "pods/eviction", "*"),
                ("create", "events", "default"), ("patch", "events", "default"), ("get", "namespaces", None),
                ("patch", "nodes", None), ("patch", "nodemaintenances", None), ("delete", "nodemaintenances", None)]
    assert [d for d in denied if user.can(*d)] == [], "the identity may do more than the collection needs"
    assert [a for a in allowed if not user.can(*a)] == [], "the identity may not do what the collection needs"
    assert user.can("get", "customresourcedefinitions", name=CRD_NAME)
    assert not user.can("update", "customresourcedefinitions", name=CRD_NAME)


def test_pod_delete_is_opt_in(cluster, world, user, tmp_path):
    """disable_eviction deletes pods: refused, with the server's message, under the base
    RBAC; done once clusterrole-pod-delete.yml is bound as well."""
    (w1,) = world.add_nodes(workers=1)
    world.pod("loner", node=w1)
    world.cordon(w1)
    args = {"node": w1, "disable_eviction": True, "timeout": 30}

    refused = run_module("nmo_drain", args, user.kubeconfig)
    assert refused.get("failed"), refused
    assert "403" in refused["msg"] and 'cannot delete resource "pods"' in refused["msg"], refused["msg"]
    assert cluster.client.get_or_none(f"/api/v1/namespaces/{world.namespace}/pods/loner") is not None

    with RestrictedUser(cluster, tmp_path, extra_cluster_roles=("nmo-maintenance-pod-delete",)) as deleter:
        assert deleter.can("delete", "pods", "*") and not user.can("delete", "pods", "*")
        done = run_module("nmo_drain", args, deleter.kubeconfig)
    assert not done.get("failed"), done.get("msg")
    assert [p["name"] for p in done["deleted"]] == ["loner"]


def test_crd_install_is_opt_in(cluster, user, tmp_path):
    """The base role reads the CRD; only nmo-maintenance-crd-install may create or upgrade
    it. An older revision met without it is an error that names that role, and nothing is
    written; with it bound, the same call upgrades the CRD."""
    checked = run_module("nmo_crd", {"object": "crd"}, user.kubeconfig)  # installed and current: a read
    assert not checked.get("failed") and not checked["changed"], checked

    path = f"{CRD_PATH}/{CRD_NAME}"
    cluster.client.patch(path, {"metadata": {"annotations": {REVISION_ANNOTATION: "0"}}}, "merge")
    try:
        refused = run_module("nmo_crd", {"object": "crd"}, user.kubeconfig)
        assert refused.get("failed"), refused
        assert f"the NodeMaintenance CRD {CRD_NAME} is at revision 0, this collection ships {SCHEMA_REVISION}, " \
               "and this identity may not upgrade it" in refused["msg"], refused["msg"]
        assert "nmo-maintenance-crd-install" in refused["msg"]
        assert installed_revision(cluster.client.get(path)) == "0", "the refused upgrade wrote something"
        with RestrictedUser(cluster, tmp_path, extra_cluster_roles=("nmo-maintenance-crd-install",)) as installer:
            assert installer.can("update", "customresourcedefinitions", name=CRD_NAME)
            assert installer.can("create", "customresourcedefinitions")
            assert not installer.can("delete", "customresourcedefinitions", name=CRD_NAME)
            upgraded = run_module("nmo_crd", {"object": "crd"}, installer.kubeconfig)
        assert not upgraded.get("failed") and upgraded["changed"], upgraded
    finally:
        crd.ensure(cluster.client)  # as the admin: the CRD current again for the other tests
    assert installed_revision(cluster.client.get(path)) == SCHEMA_REVISION


def test_a_missing_lease_namespace_is_named_with_what_to_apply(cluster, world, user):
    """The identity may not create namespaces: a missing one is an error that says what an
    admin applies, and nothing is created."""
    absent = f"nmo-absent-{world.id}"
    client = connect(ConnectionOptions(kubeconfig=user.kubeconfig))
    with pytest.raises(NmoError) as raised:
        lease_store.ensure_namespace(client, absent)
    message = str(raised.value)
    assert f"the lease namespace {absent} does not exist and this identity may not create it" in message
    assert f"kubectl create namespace {absent}" in message and "403" not in message.split("(", 1)[0]
    assert cluster.client.get_or_none(f"/api/v1/namespaces/{absent}") is None
    assert "kubectl apply -f meta/rbac/" in lease_store.missing_namespace_message(leases.LEASE_NAMESPACE)
    assert lease_store.ensure_namespace(client) is False, "medik8s-leases is there (meta/rbac/namespace.yml)"


def test_first_crd_install_needs_the_opt_in_role(cluster, user, tmp_path):
    """On a cluster without the CRD, the base identity is told which role installs it; the
    crd-install role installs it (create, then a watch on that one name until Established)."""
    path = f"{CRD_PATH}/{CRD_NAME}"
    try:
        cluster.client.delete(path)
        wait_for(lambda: cluster.client.get_or_none(path) is None, 60, "the CRD to be deleted")
        refused = run_module("nmo_crd", {"object": "crd"}, user.kubeconfig)
        assert refused.get("failed"), refused
        assert f"the NodeMaintenance CRD {CRD_NAME} is not installed, and this identity may not install it" \
               in refused["msg"] and "clusterrole-crd-install.yml" in refused["msg"], refused["msg"]
        assert cluster.client.get_or_none(path) is None
        with RestrictedUser(cluster, tmp_path, extra_cluster_roles=("nmo-maintenance-crd-install",)) as installer:
            installed = run_module("nmo_crd", {"object": "crd"}, installer.kubeconfig)
        assert not installed.get("failed") and installed["crd"]["state"] == "created", installed
    finally:
        crd.ensure(cluster.client)
    assert installed_revision(cluster.client.get(path)) == SCHEMA_REVISION
