"""The real node of the tests on real nodes: real-01 of hack/real-node (a kubelet and a
containerd), started beside the kwok nodes of the local cluster."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest
from topology import wait_for

ROOT = Path(__file__).resolve().parents[3]
HACK = ROOT / "hack"


class RealNode:
    """real-01: its folders, its containerd (through ctr) and its power switch."""

    name = "real-01"

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.dir = Path(cluster.dir) / "real" / self.name
        labels = cluster.client.get(f"/api/v1/nodes/{self.name}")["metadata"]["labels"]
        self.busybox = f"nmo.test/busybox:{labels['nmo.test/busybox-image']}"
        self.manifests = self.dir / "manifests"
        self.kubelet_root = self.dir / "kubelet"

    def ctr(self, *args: str) -> str:
        return subprocess.run(["ctr", "--address", str(self.dir / "containerd.sock"), "--namespace", "k8s.io", *args],
                              capture_output=True, text=True, check=True, timeout=60).stdout

    def running(self) -> List[str]:
        """The ids of the containers whose task is RUNNING in containerd."""
        lines = self.ctr("tasks", "ls").splitlines()[1:]
        return [line.split()[0] for line in lines if line.split()[-1] == "RUNNING"]

    def power(self, action: str) -> None:
        """hack/cluster stop|start kubelet-real-01."""
        self.cluster._component(action, f"kubelet-{self.name}")

    def pod(self, name: str, namespace: str, command: str, extra: Dict[str, Any] | None = None,
            spec: Dict[str, Any] | None = None) -> Dict[str, Any]:
        """A pod of the node's kind: host network, no service account token, the local image."""
        container = {"name": "main", "image": self.busybox, "imagePullPolicy": "Never",
                     "command": ["sh", "-c", command], **(extra or {})}
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
                "spec": {"nodeName": self.name, "hostNetwork": True, "automountServiceAccountToken": False,
                         "containers": [container], **(spec or {})}}


@pytest.fixture(scope="module")
def real_node(cluster: Any) -> Iterator[RealNode]:
    """real-01 Ready (started, with the build and image import, when it is not running), and
    removed after the module: the tests of kwok nodes that run next see no real node."""
    env = {**os.environ, "NMO_CLUSTER_DIR": cluster.dir, "NMO_CLUSTER_REAL_NODES": "1"}
    done = subprocess.run([str(HACK / "cluster"), "up"], capture_output=True, text=True, env=env, timeout=1800,
                          check=False)
    assert done.returncode == 0, f"hack/cluster up with a real node failed: {done.stderr[-3000:]}"
    node = RealNode(cluster)
    # The node's Lease: the kubelet's, owned by this Node (a Node deleted by an earlier
    # module's teardown takes its Lease with it, through the garbage collector, meanwhile).
    uid = cluster.client.get(f"/api/v1/nodes/{node.name}")["metadata"]["uid"]

    def own_lease() -> bool:
        lease = cluster.client.get_or_none(f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{node.name}")
        owners = [o.get("uid") for o in ((lease or {}).get("metadata") or {}).get("ownerReferences") or []]
        return bool(lease) and lease["spec"].get("holderIdentity") == node.name and owners == [uid]
    wait_for(own_lease, 60, f"the kubelet's own Lease of {node.name}")
    try:
        yield node
    finally:
        subprocess.run([str(HACK / "real-node"), "down"], env=env, timeout=300, check=True)
        cluster.client.delete(f"/api/v1/nodes/{RealNode.name}")
