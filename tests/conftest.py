"""Fixtures: one local control plane for the whole run; each test its own world."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "hack"))
sys.path.insert(0, str(ROOT / "tests"))

from helpers import collection_path  # noqa: E402

sys.path.insert(0, str(collection_path()))

from topology import World, wait_for  # noqa: E402

from ansible_collections.nmo.maintenance.plugins.module_utils.api.client import ConnectionOptions, connect  # noqa: E402


class Cluster:
    def __init__(self, env: dict) -> None:
        self.kubeconfig = env["KUBECONFIG"]
        self.bin = env["NMO_CLUSTER_BIN"]
        self.dir = env["NMO_CLUSTER_DIR"]
        self.api = env["NMO_CLUSTER_API"]
        self.client = connect(ConnectionOptions(kubeconfig=self.kubeconfig), pool_size=32)

    def kubectl(self, *args: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([f"{self.bin}/kubectl", "--kubeconfig", self.kubeconfig, *args],
                              capture_output=True, text=True, check=check, input=input, timeout=120)

    # One component stopped, started or restarted with its data (hack/cluster stop|start|restart):
    # what a test of an API server restart needs. start and restart return once it is ready.
    def stop(self, component: str) -> None:
        self._component("stop", component)

    def start(self, component: str) -> None:
        self._component("start", component)

    def restart(self, component: str) -> None:
        self._component("restart", component)

    def restart_controllers(self) -> None:
        """Restart what talks to the API server (controller manager, scheduler, kwok) after it
        was down, as a real control plane's controllers do when they lose their leader lease.
        Left alone, ours come back only after their client's backoff, up to a minute, and the
        next test waits for a node's not-ready taint or a PDB's status in the meantime."""
        for component in ("kube-controller-manager", "kube-scheduler", "kwok"):
            self.restart(component)

    def _component(self, action: str, component: str) -> None:
        done = subprocess.run([str(ROOT / "hack" / "cluster"), action, component], capture_output=True, text=True,
                              check=False, timeout=120, env={**os.environ, "NMO_CLUSTER_DIR": self.dir})
        assert done.returncode == 0, f"hack/cluster {action} {component} failed: {done.stderr[-2000:]}"


def _cluster_env() -> dict:
    out = subprocess.run([str(ROOT / "hack" / "cluster"), "env"], capture_output=True, text=True, check=True).stdout
    env = {}
    for line in out.splitlines():
        key, _sep, value = line.removeprefix("export ").partition("=")
        env[key] = value.strip("'").split("'")[0]
    return env


@pytest.fixture(scope="session")
def cluster() -> Cluster:
    status = subprocess.run([str(ROOT / "hack" / "cluster"), "status"], capture_output=True, text=True, check=False)
    if status.returncode != 0:
        if os.environ.get("NMO_NO_CLUSTER_START"):
            pytest.skip("local control plane not running and NMO_NO_CLUSTER_START is set")
        subprocess.run([str(ROOT / "hack" / "cluster"), "up"], check=True)
    return Cluster(_cluster_env())


@pytest.fixture
def world(cluster: Cluster) -> Iterator[World]:
    w = World(cluster.client)
    try:
        yield w
    finally:
        w.cleanup()


def pytest_collection_modifyitems(items: list) -> None:
    for item in items:
        if "cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.cluster)


@pytest.fixture(scope="session")
def medik8s_tools(cluster: Cluster):
    """The real medik8s code built (cached per user and version), NMO not started: for the
    lease tool (``medik8s_tools.lease(...)``, medik8s/common's lease library as NHC uses it)."""
    from medik8s import Medik8s
    return Medik8s(cluster)


def _deleting_for_nmo(cluster: Cluster) -> list:
    """NodeMaintenances being deleted that wait for NMO to remove its finalizer."""
    from medik8s import NM_PATH, NMO_FINALIZER
    items = (cluster.client.get_or_none(NM_PATH) or {}).get("items", [])
    return [nm["metadata"]["name"] for nm in items
            if NMO_FINALIZER in (nm["metadata"].get("finalizers") or []) and nm["metadata"].get("deletionTimestamp")]


@pytest.fixture(scope="module")
def medik8s(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator:
    """NMO v0.17.0 running against the local cluster for the module, its webhook registered.

    Options (``Medik8s``'s keyword arguments) through indirect parametrization, e.g. NMO
    with leader election (its Lease 135b1886.medik8s.io), on a test or a class whose tests
    all use the fixture::

        @pytest.mark.parametrize("medik8s", [{"leader_elect": True}], indirect=True)

    When no NodeMaintenance CRD is installed, NMO's own is applied, and removed again after
    the module. Afterwards nothing of NMO is left to block later tests: no webhook
    registration, no NodeMaintenance waiting for NMO's finalizer."""
    from medik8s import NM_PATH, NMO_CRD, NMO_FINALIZER, Medik8s
    m = Medik8s(cluster, **getattr(request, "param", {}))
    crd_path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{NMO_CRD}"
    had_crd = cluster.client.get_or_none(crd_path) is not None
    m.up()
    try:
        yield m
    finally:
        try:  # NMO finishes what is being deleted while it still runs
            wait_for(lambda: not _deleting_for_nmo(cluster), 60, "NMO to finish the NodeMaintenances being deleted")
        except AssertionError:
            pass
        m.down()
        # Whatever still carries NMO's finalizer would hang forever without NMO.
        for nm in (cluster.client.get_or_none(NM_PATH) or {}).get("items", []):
            finalizers = nm["metadata"].get("finalizers") or []
            if NMO_FINALIZER in finalizers:
                kept = [f for f in finalizers if f != NMO_FINALIZER]
                cluster.client.patch(f"{NM_PATH}/{nm['metadata']['name']}",
                                     {"metadata": {"finalizers": kept or None}}, "merge")
        if not had_crd:
            try:
                cluster.client.delete(crd_path)
            except Exception as exc:
                if getattr(exc, "status", None) != 404:
                    raise
