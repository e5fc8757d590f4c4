#!/usr/bin/env python3
"""The demo's world on the local control plane (hack/cluster): nodes, workloads, PDBs.

    examples/demo_world.py up      3 control-plane nodes with etcd, 4 workers, workloads
    examples/demo_world.py down    remove all of it
    options: --id NAME (default demo), --workers N, --control-planes N,
             --kubevirt: KubeVirt's CRDs (hack/kubevirt/crds.yaml) and the VM of docs/design.md §12.3
             vm-order-processing on worker-02, alone behind minAvailable 1 (run the stand-in,
             hack/kubevirt/standin.py, for its migration: examples/demo.sh --kubevirt does)

The node names match examples/inventory.yml (node-demo-worker-01 ...); the molecule
scenario uses --id mol.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "hack"), str(ROOT / "tests")]

from helpers import collection_path  # noqa: E402

sys.path.insert(0, str(collection_path()))

from kubevirt.world import add_vm, install_crds  # noqa: E402
from topology import World  # noqa: E402

from ansible_collections.nmo.maintenance.plugins.module_utils.api.client import ConnectionOptions, connect  # noqa: E402


def kubeconfig() -> str:
    return subprocess.run([str(ROOT / "hack" / "cluster"), "kubeconfig"], capture_output=True, text=True,
                          check=True).stdout.strip()


def up(world: World, workers: int, control_planes: int, kubevirt: bool = False) -> None:
    if world.client.get("/api/v1/nodes", {"labelSelector": f"nmo.test/world={world.id}"}).get("items"):
        print(f"world {world.id} already there (examples/demo_world.py down --id {world.id} removes it)")
        return
    world.add_nodes(workers=workers, control_planes=control_planes)
    if control_planes:
        world.etcd_members()
    world.daemonset("node-exporter")
    world.deployment("web", 6)
    world.pdb("web", "web", max_unavailable=1)
    # A StatefulSet's pod comes back under the same name. Were it deleted at once, the
    # disruption controller would never see it terminating and would count its successor
    # as still being disrupted for two minutes (the PDB's disruptedPods entry times out);
    # a real kubelet takes a moment to stop a pod, and so does this one.
    world.statefulset("db", 3, grace=2, graceful=True)
    world.pdb("db", "db", min_available=2)
    world.deployment("cache", 4)
    world.pdb("cache", "cache", min_available="50%")
    if kubevirt:
        install_crds(world.client)
        add_vm(world, "vm-order-processing", world.workers[1 if len(world.workers) > 1 else 0])
        print(f"KubeVirt VM vm-order-processing on {world.workers[1 if len(world.workers) > 1 else 0]}, alone behind "
              "PDB kubevirt-disruption-budget-vm-order-processing (minAvailable 1)")
    print(f"world {world.id} up: nodes {', '.join(world.nodes)}; namespace {world.namespace}: "
          "web (6, PDB maxUnavailable 1), db (3, PDB minAvailable 2), cache (4, PDB 50%), node-exporter (DaemonSet)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["up", "down"])
    parser.add_argument("--id", default="demo")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--control-planes", type=int, default=3)
    parser.add_argument("--kubevirt", action="store_true", help="add the KubeVirt VM of docs/design.md §12.3 (see above)")
    args = parser.parse_args()
    world = World(connect(ConnectionOptions(kubeconfig=kubeconfig())), prefix=args.id)
    if args.action == "up":
        up(world, args.workers, args.control_planes, args.kubevirt)
    else:
        world.cleanup()
        print(f"world {world.id} removed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
