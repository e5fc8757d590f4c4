"""Lease times are the API server's: a controller whose clock is off neither takes over a
fresh lease nor writes one that others take for lapsed.

The skewed controller is a whole ansible-playbook process tree under libfaketime (Debian's
faketime package, which hack/test installs).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Dict

import pytest
from helpers import run_module

from ansible_collections.nmo.maintenance.plugins.module_utils.model import leases

from .maintenance_support import LEASES, slot_prefix

pytestmark = [pytest.mark.cluster]

LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
SKEWS = ["-60s", "-5s", "+5s", "+60s"]


def skewed(offset: str) -> Dict[str, str]:
    return {"LD_PRELOAD": LIBFAKETIME, "FAKETIME": offset, "FAKETIME_DONT_RESET": "1",
            "NMO_MAINTENANCE_IN_PROCESS": "true"}


def lease_args(world: Any, node: str, **extra: Any) -> Dict[str, Any]:
    return {"node": node, "slot_prefix": slot_prefix(world), "duration": 30, **extra}


def server_time(cluster: Any) -> datetime:
    return cluster.client.server_now()


@pytest.mark.parametrize("offset", SKEWS)
def test_a_skewed_controller_respects_a_fresh_lease_and_writes_the_servers_time(cluster, world, offset):
    world.add_nodes(workers=2)
    w1, w2 = world.workers
    held = run_module("nmo_lease", lease_args(world, w1), cluster.kubeconfig)  # the controller on time
    assert not held.get("failed"), held.get("msg")

    # the only slot is fresh (30 s): the skewed controller must wait for it, whatever its clock says
    blocked = run_module("nmo_lease", lease_args(world, w2), cluster.kubeconfig, env=skewed(offset))
    assert blocked.get("failed") and "maintenance slot(s) are held" in blocked["msg"], blocked
    assert leases.holder(cluster.client.get(f"{LEASES}/node-{w1}")) == leases.HOLDER

    # and its own lease says the server's time, so the controller on time does not take it for lapsed
    released = run_module("nmo_lease", {**lease_args(world, w1), "state": "released"}, cluster.kubeconfig)
    assert not released.get("failed"), released.get("msg")
    taken = run_module("nmo_lease", lease_args(world, w2), cluster.kubeconfig, env=skewed(offset))
    assert not taken.get("failed"), taken.get("msg")
    now = server_time(cluster)
    for name in (f"node-{w2}", f"{slot_prefix(world)}-0"):
        renewed = leases.parse_time(cluster.client.get(f"{LEASES}/{name}")["spec"]["renewTime"])
        assert abs(renewed - now) < timedelta(seconds=3), f"{name} renewed at {renewed}, server time {now}"
    again = run_module("nmo_lease", lease_args(world, w1), cluster.kubeconfig)
    assert again.get("failed") and "maintenance slot(s) are held" in again["msg"], again


@pytest.mark.parametrize("offset", ["-60s", "+60s"])
def test_a_truly_lapsed_lease_is_taken_over_whatever_the_controllers_clock(cluster, world, offset):
    world.add_nodes(workers=1)
    (w1,) = world.workers
    lapsed = (server_time(cluster) - timedelta(seconds=30)).strftime("%Y-%m-%dT%H:%M:%S.000000Z")
    cluster.client.post(LEASES, {"metadata": {"name": f"node-{w1}", "namespace": "medik8s-leases"},
                                 "spec": {"holderIdentity": "NodeHealthCheck-x", "leaseDurationSeconds": 10,
                                          "acquireTime": lapsed, "renewTime": lapsed}})
    taken = run_module("nmo_lease", lease_args(world, w1), cluster.kubeconfig, env=skewed(offset))
    assert not taken.get("failed"), taken.get("msg")
    spec = cluster.client.get(f"{LEASES}/node-{w1}")["spec"]
    assert spec["holderIdentity"] == leases.HOLDER and spec["leaseTransitions"] == 1
    run_module("nmo_lease", {**lease_args(world, w1), "state": "released"}, cluster.kubeconfig)
