"""What the collection relies on in the API server, checked on the version the cluster runs
(hack/test runs this file on the current Kubernetes and, as ``k8s-oldest``, on 1.31)."""

from __future__ import annotations

import copy
import os
from pathlib import Path

import pytest
from helpers import run_module

from ansible_collections.nmo.maintenance.plugins.module_utils.api import server
from ansible_collections.nmo.maintenance.plugins.module_utils.errors import ApiError
from ansible_collections.nmo.maintenance.plugins.module_utils.stores import crd

HACK = Path(__file__).resolve().parents[2] / "hack"
CRD_URL = f"{crd.CRD_PATH}/{crd.CRD_NAME}"


def pinned_version() -> str:
    """KUBERNETES_VERSION of the pins hack/cluster used for NMO_CLUSTER_VERSION."""
    current = (HACK / "versions.env").read_text()
    pins = current
    minor = os.environ.get("NMO_CLUSTER_VERSION", "").lstrip("v")
    if minor and (HACK / f"build-{minor}" / "versions.env").exists():
        pins = (HACK / f"build-{minor}" / "versions.env").read_text()
    return next(line.split("=", 1)[1] for line in pins.splitlines() if line.startswith("KUBERNETES_VERSION="))


def test_the_server_runs_the_pinned_version_and_is_supported(cluster) -> None:
    found = server.read(cluster.client)
    assert found.git_version == pinned_version()
    assert found.warning is None, found.warning  # 1.31 and 1.37 are both inside the tested range


def test_the_crd_keeps_its_validation_rule_and_the_server_enforces_it(cluster, world, crd_installed) -> None:
    stored = cluster.client.get(CRD_URL)
    assert not crd.rule_dropped(stored)
    installed = run_module("nmo_crd", {"object": "crd"}, cluster.kubeconfig)
    assert not installed.get("failed"), installed.get("msg")
    assert not installed.get("warnings"), installed.get("warnings")
    first, second = world.add_nodes(workers=2)
    name = run_module("nmo_crd", {"node": first}, cluster.kubeconfig)["maintenance"]["name"]
    path = f"/apis/{crd.GROUP}/{crd.VERSION}/{crd.PLURAL}/{name}"
    with pytest.raises(ApiError) as refused:
        cluster.client.patch(path, {"spec": {"nodeName": second}})
    assert refused.value.status == 422 and crd.NODE_NAME_IMMUTABLE in refused.value.server_message
    assert cluster.client.get(path)["spec"]["nodeName"] == first


def test_a_crd_stored_without_its_rule_is_warned_about(cluster, crd_installed) -> None:
    # What a server without CRD validation rules stores: our CRD, the rule gone.
    original = cluster.client.get(CRD_URL)
    bare = copy.deepcopy(original)
    node_name = bare["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["nodeName"]
    node_name.pop("x-kubernetes-validations")
    cluster.client.put(CRD_URL, bare)
    try:
        checked = run_module("nmo_crd", {"object": "crd"}, cluster.kubeconfig)
        assert not checked.get("failed"), checked.get("msg")
        assert checked["crd"]["state"] == "unchanged" and checked["crd"]["warning"] == crd.RULE_DROPPED
        assert crd.RULE_DROPPED in checked.get("warnings", []), checked.get("warnings")
    finally:
        current = cluster.client.get(CRD_URL)
        restored = crd.manifest()
        restored["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        cluster.client.put(CRD_URL, restored)
    assert not crd.rule_dropped(cluster.client.get(CRD_URL))
