"""The local cluster's ports (hack/cluster; docs/layout-and-development.md).

A fresh clone's CI once failed by chance: a cluster's port, derived from the checkout's path
inside the kernel's ephemeral range, was held by a client connection of the running suite.
The ports now lie below that range, and `up` moves to another base when one is taken. Here
a port the fresh state folder would use is held by this test, and `up` must come up anyway.
"""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = str(ROOT / "hack" / "cluster")

pytestmark = [pytest.mark.slow, pytest.mark.side_lane]


def cluster(state: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "NMO_CLUSTER_PORT_BASE"}
    return subprocess.run([CLUSTER, *args], capture_output=True, text=True, timeout=300,
                          env={**env, "NMO_CLUSTER_DIR": str(state)}, check=False)


def test_the_ports_lie_below_the_ephemeral_range(tmp_path):
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    base = int(cluster(tmp_path / "a", "ports").stdout)
    assert base >= 10000 and base + 5 < low, (base, low)
    # another state folder, another base: two clusters side by side
    assert int(cluster(tmp_path / "b", "ports").stdout) != base


def test_a_taken_port_is_survived(tmp_path):
    state = tmp_path / "cluster"
    base = int(cluster(state, "ports").stdout)
    with socket.socket() as held:  # the etcd client port of the base the folder derives
        held.bind(("127.0.0.1", base + 1))
        held.listen()
        try:
            up = cluster(state, "up")
            assert up.returncode == 0, up.stderr[-3000:]
            assert f"a port of {base}..{base + 5} is taken" in up.stderr, up.stderr[-3000:]
            moved = int((state / "ports").read_text())
            assert moved != base
            status = cluster(state, "status")
            assert status.returncode == 0 and f"ready at https://127.0.0.1:{moved}" in status.stdout, status.stdout
        finally:
            cluster(state, "down")
