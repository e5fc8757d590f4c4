"""recover.yml and status.yml with names the cluster does not have, and slots of any prefix.

The playbooks run as an operator runs them after an incident: without the inventory
(``-i localhost,``), with names typed by hand.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest
from helpers import run_module, run_playbook

from .maintenance_support import LEASES, leases_naming, maintenance_of, node_clean, wait_clean

pytestmark = [pytest.mark.cluster]

PLAYBOOKS = Path(__file__).resolve().parents[2] / "playbooks"


def playbook(name: str, cluster: Any, extra: Optional[Dict[str, Any]] = None) -> Any:
    args: List[str] = []
    for key, value in (extra or {}).items():
        args += ["-e", f"{key}={value}"]
    return run_playbook(None, cluster.kubeconfig, args=args, playbook_path=str(PLAYBOOKS / name))


def begin(cluster: Any, node: str, prefix: str) -> None:
    result = run_module("nmo_maintenance", {"node": node, "install_crd": True, "slot_prefix": prefix, "wait": False},
                        cluster.kubeconfig)
    assert not result.get("failed"), result.get("msg")
    assert node_clean(cluster.client, node) is not None and maintenance_of(cluster.client, node) is not None


def slots_held_by(cluster: Any, node: str) -> List[str]:
    return sorted(lease["metadata"]["name"] for lease in cluster.client.get(LEASES).get("items", [])
                  if lease.get("spec", {}).get("holderIdentity") == node)


def test_a_typo_is_reported_and_the_real_nodes_are_still_recovered(cluster, world):
    w1, w2 = world.add_nodes(workers=2)
    prefix = f"t{world.id}-slot"
    begin(cluster, w1, prefix)
    begin(cluster, w2, f"t{world.id}-other")  # a second run's slot prefix

    typo = w1.replace("worker", "wroker")
    names = f"{typo},{w1},Node_X,..,{w2}"
    recovered = playbook("recover.yml", cluster, {"nmo_nodes": names})

    assert recovered.rc != 0, "unknown names must fail the run"
    failure = recovered.last("fail")["msg"]
    assert f"Unknown node name(s), not recovered: {typo}, Node_X, .." in failure, failure
    assert "Still held" not in failure and "Failed to end" not in failure, failure
    wait_clean(cluster.client, [w1, w2])
    assert maintenance_of(cluster.client, w1) is None and maintenance_of(cluster.client, w2) is None
    # no inventory, no prefix given: the slots were found by their label, whatever their prefix
    assert slots_held_by(cluster, w1) == [] and slots_held_by(cluster, w2) == []
    assert leases_naming(cluster.client, [w1, w2], f"t{world.id}-") == []


def test_a_custom_slot_prefix_is_accepted_and_a_slot_it_cannot_release_is_reported(cluster, world):
    w1, w2 = world.add_nodes(workers=2)
    custom = f"t{world.id}-custom"
    begin(cluster, w1, custom)
    begin(cluster, w2, f"t{world.id}-elsewhere")

    given = playbook("recover.yml", cluster, {"nmo_nodes": w1, "node_maintenance_slot_prefix": custom})
    assert given.rc == 0, given.stdout[-3000:]
    wait_clean(cluster.client, [w1])
    assert slots_held_by(cluster, w1) == [] and maintenance_of(cluster.client, w1) is None

    # the prefix given is not the one w2's slot has: the node is ended, the slot named as left
    other = playbook("recover.yml", cluster, {"nmo_nodes": w2, "node_maintenance_slot_prefix": custom})
    assert other.rc != 0, "a slot left held must fail the run"
    failure = other.last("fail")["msg"]
    assert f"{w2}: lease t{world.id}-elsewhere-0 (holder {w2})" in failure, failure
    assert slots_held_by(cluster, w2) == [f"t{world.id}-elsewhere-0"]
    assert maintenance_of(cluster.client, w2) is None and node_clean(cluster.client, w2) is None

    # without a prefix, the slot is found by its label and released
    again = playbook("recover.yml", cluster, {"nmo_nodes": w2})
    assert again.rc == 0, again.stdout[-3000:]
    assert slots_held_by(cluster, w2) == []


def test_status_names_the_unknown_nodes_and_shows_the_others(cluster, world):
    (w1,) = world.add_nodes(workers=1)
    typo = w1 + "x"
    status = playbook("status.yml", cluster, {"nmo_nodes": f"{w1},{typo}"})
    assert status.rc != 0
    assert f"Unknown node name(s): {typo}" in status.stdout
    assert f"{w1}  Ready" in status.stdout, "the known node's table is shown"
    assert status.last("fail")["msg"] == f"Unknown node name(s), no such node in the cluster: {typo}"
