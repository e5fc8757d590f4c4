"""The maintenance playbook run as AWX runs a job: ansible-runner, a private data dir, the
awx_display event stream and set_stats artifacts; no one at a terminal."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import ansible_runner
import pytest
from helpers import ansible_env

from .maintenance_support import PLAYBOOKS, leases_naming, maintenance_of, slot_prefix, wait_clean

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

GATE = """\
- name: Storage health check (fails on its first attempt)
  ansible.builtin.shell: |
    set -e
    n=$(cat {counter} 2>/dev/null || echo 0)
    echo $((n + 1)) > {counter}
    [ "$n" -ge 1 ]
  changed_when: false
"""


def test_job_through_ansible_runner_leaves_a_per_node_summary_and_events(cluster, world, user, tmp_path):
    world.add_nodes(workers=2)
    w1, w2 = world.workers
    world.deployment("web", 2)
    gate = tmp_path / "gate.yml"
    gate.write_text(GATE.format(counter=tmp_path / "gate-attempts"))
    data = tmp_path / "private"
    (data / "inventory").mkdir(parents=True)
    (data / "inventory" / "hosts.json").write_text(json.dumps({"workers": {"hosts": {w1: {}, w2: {}}}, "all": {"vars": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}))
    env = ansible_env(user.kubeconfig)
    env.pop("ANSIBLE_CALLBACKS_ENABLED", None)  # AWX's own callback only
    result = ansible_runner.run(
        private_data_dir=str(data), playbook=str(PLAYBOOKS / "maintenance.yml"), limit="workers",
        envvars={k: v for k, v in env.items() if k.startswith(("ANSIBLE_", "K8S_AUTH_", "PATH"))},
        extravars={"node_maintenance_slot_prefix": slot_prefix(world), "node_maintenance_confirm": True,
                   "node_maintenance_gate": str(gate), "node_maintenance_gate_delay": 1,
                   "node_maintenance_campaign": f"awx-{world.id}"},
        quiet=True)
    stdout = result.stdout.read()
    assert result.status == "successful" and result.rc == 0, stdout[-4000:]

    events = list(result.events)
    stats = [e for e in events if e["event"] == "playbook_on_stats"]
    assert len(stats) == 1
    summary = stats[0]["event_data"]["artifact_data"]["nmo_maintenance"]
    assert set(summary) == {w1, w2}
    for node in (w1, w2):
        assert summary[node]["result"] == "succeeded" and summary[node]["error"] == ""
        assert summary[node]["maintenance"] == "maintenance-" + node.removeprefix("node-")
    assert summary[w1]["evicted"] + summary[w2]["evicted"] >= 1

    ok = [e for e in events if e["event"] == "runner_on_ok"]
    tasks = {e["event_data"]["task"] for e in ok}
    assert {"Begin | NodeMaintenance, leases and etcd guard, taints, cordon and label",
            "Drain | Evict the pods (PodDisruptionBudgets respected)",
            "End | Uncordon, remove the label and the taints, release the leases, delete the NodeMaintenance"} <= tasks
    asked = [e for e in ok if e["event_data"]["task"] == "Confirm | No terminal to ask on"]
    assert {e["event_data"]["host"] for e in asked} == {w1, w2}, "confirmation must not prompt under AWX"
    assert not [e for e in ok if e["event_data"]["task"] == "Confirm | Return the node to service?"]
    gate_failures = [e for e in events if e["event"] == "runner_on_failed"
                     and e["event_data"]["task"] == "Storage health check (fails on its first attempt)"]
    assert len(gate_failures) == 1 and gate_failures[0]["event_data"]["host"] == w1, "the gate was not retried"
    on_disk = list((Path(result.config.artifact_dir) / "job_events").glob("*.json"))
    assert len(on_disk) == len(events)

    wait_clean(cluster.client, [w1, w2])
    assert maintenance_of(cluster.client, w1) is None and maintenance_of(cluster.client, w2) is None
    assert leases_naming(cluster.client, [w1, w2], slot_prefix(world)) == []
