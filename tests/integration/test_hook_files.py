"""Hook and gate files that are missing, unreadable or broken (issue 13, point 3).

Before any node is touched, the maintenance playbook checks every host's hook and gate
files (nmo_check_files): a bad one stops the play with the option, the file and the reason,
and nothing is written to the cluster. A file that goes missing after that check is caught
by the check right before its include, an ordinary task failure, so the role's rescue rolls
the node back (an include_tasks of a missing file would end the play, max_fail_percentage
0, without running the rescue).

"Unreadable": the tests run as root, which reads a chmod 000 file anyway, so a directory
stands where the file is expected (open() fails for root too, as a file without read
permission fails for anyone else), and, separately, a file that is not UTF-8 text.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any, Dict, Set

import pytest
import yaml

from ansible_collections.nmo.maintenance.plugins.module_utils.stores.events import COMPONENT

from .maintenance_support import (
    LEASES,
    PLAYBOOKS,
    AuditLog,
    events_of,
    leases_naming,
    maintenance_of,
    nm_name,
    node_clean,
    reasons_of,
    run,
    slot_prefix,
    wait_clean,
    write_inventory,
)

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

GOOD = "- name: Replace the memory\n  ansible.builtin.debug:\n    msg: memory replaced\n"
BROKEN_YAML = "- name: Replace the memory\n  ansible.builtin.debug:\n    msg: [unclosed\n"


def run_leases(client: Any) -> Set[str]:
    """The run leases (nmo-run-<id>) in medik8s-leases."""
    items = (client.get_or_none(LEASES) or {}).get("items", [])
    return {item["metadata"]["name"] for item in items if item["metadata"]["name"].startswith("nmo-run-")}


def make_bad(tmp_path: Path, kind: str) -> tuple[str, str]:
    """A bad task file of the given kind: its path, and the reason the check must give."""
    path = tmp_path / f"{kind}.yml"
    if kind == "missing":
        return str(path), "not found"
    if kind == "directory":
        path.mkdir()
        return str(path), "a directory, not a task file"
    if kind == "not-utf8":
        path.write_bytes(b"- name: \xff\xfe firmware\n  ansible.builtin.debug: {}\n")
        return str(path), "is not UTF-8 text"
    if kind == "broken-yaml":
        path.write_text(BROKEN_YAML)
        return str(path), "is not valid YAML"
    if kind == "not-a-task-list":
        path.write_text("name: Replace the memory\nansible.builtin.debug: {}\n")
        return str(path), "is YAML but not a task list"
    raise ValueError(kind)


def with_host_vars(inventory: str, host: str, **host_vars: Any) -> str:
    """The inventory with variables for one host only."""
    data: Dict[str, Any] = yaml.safe_load(Path(inventory).read_text())
    data["all"]["children"]["workers"]["hosts"][host] = host_vars
    Path(inventory).write_text(yaml.safe_dump(data, sort_keys=False))
    return inventory


@pytest.mark.parametrize("option,kind", [
    ("node_maintenance_hooks_work", "missing"),
    ("node_maintenance_hooks_before_drain", "directory"),
    ("node_maintenance_hooks_after", "not-utf8"),
    ("node_maintenance_hooks_work", "broken-yaml"),
    ("node_maintenance_hooks_before_drain", "not-a-task-list"),
    ("node_maintenance_gate", "missing"),
    ("node_maintenance_gate", "directory"),
    ("node_maintenance_gate", "broken-yaml"),
])
def test_a_bad_hook_or_gate_file_stops_the_play_before_any_node_is_touched(cluster, world, user, tmp_path,
                                                                           option, kind):
    """The bad file is the second worker's only: without the check before the first node,
    the first worker would be maintained before the second one's file was ever read."""
    w1, w2 = world.add_nodes(workers=2)
    world.deployment("web", 2)
    bad, reason = make_bad(tmp_path, kind)
    good = tmp_path / "good.yml"
    good.write_text(GOOD)
    value = bad if option == "node_maintenance_gate" else [str(good), bad]
    inventory = with_host_vars(write_inventory(world, tmp_path), w2, **{option: value})
    runs_before = run_leases(cluster.client)

    result = run("maintenance.yml", inventory, user.kubeconfig, args=["-l", "workers"])

    assert result.proc.returncode != 0, result.output[-3000:]
    assert f"{option}: {bad}: {reason}" in result.output, result.output[-3000:]
    assert "nothing was done to the node" in result.output
    for node in (w1, w2):
        assert maintenance_of(cluster.client, node) is None, f"{node}: a NodeMaintenance was made"
        assert node_clean(cluster.client, node) is None, f"{node} was touched"
        ours = [e["reason"] for name in (node, nm_name(node)) for e in events_of(cluster.client, name)
                if e.get("reportingComponent") == COMPONENT]
        assert ours == [], f"{node}: events recorded {ours}"
    assert leases_naming(cluster.client, [w1, w2], slot_prefix(world)) == [], "a lease was taken"
    assert run_leases(cluster.client) - runs_before == set(), "the run started (its run lease was written)"
    assert not any(r["task"].endswith("Begin | NodeMaintenance, leases and etcd guard, taints, cordon and label")
                   for r in result.records()), "the role began a node"


@pytest.mark.parametrize("option", ["node_maintenance_hooks_work", "node_maintenance_gate"])
def test_a_file_that_disappears_after_the_check_lands_in_the_rescue(cluster, world, user, tmp_path, option):
    """The before-drain hook removes the work hook (or the gate) once the play-start check
    has passed: the include that follows fails in the rescue's reach, and the node is rolled
    back: NodeMaintenance Failed with the file named, node in service, leases released, and
    the play stops there (the second worker is not started)."""
    w1, w2 = world.add_nodes(workers=2)
    world.deployment("web", 2)
    doomed = tmp_path / "doomed.yml"
    doomed.write_text(GOOD)
    remover = tmp_path / "remove.yml"
    remover.write_text("- name: Something removes the next file\n  ansible.builtin.file:\n"
                       f"    path: {doomed}\n    state: absent\n")
    inventory = write_inventory(world, tmp_path)
    # rollback asked for: under the default (auto) a work hook or gate that fails keeps the node out
    extra = {"node_maintenance_hooks_before_drain": [str(remover)], option: [str(doomed)]
             if option == "node_maintenance_hooks_work" else str(doomed), "node_maintenance_failure_policy": "rollback"}

    result = run("maintenance.yml", inventory, user.kubeconfig, args=["-l", "workers"], extra_vars=extra)

    assert result.proc.returncode != 0
    assert not doomed.exists(), "the remover hook did not run"
    assert f"maintenance of node {w1} failed" in result.output, result.output[-4000:]
    assert "It was rolled back" in result.output
    nm = maintenance_of(cluster.client, w1)
    assert nm is not None and nm["status"]["phase"] == "Failed", result.output[-4000:]
    assert f"{option}: {doomed}: not found" in nm["status"]["lastError"], nm["status"]
    assert "FailedMaintenance" in reasons_of(cluster.client, nm["metadata"]["name"])
    wait_clean(cluster.client, [w1])
    assert leases_naming(cluster.client, [w1, w2], slot_prefix(world)) == [], "the rollback released the leases"
    assert maintenance_of(cluster.client, w2) is None and events_of(cluster.client, nm_name(w2)) == []
    recap = [line for line in result.lines if line.startswith(w1)]
    # the role's rescue ran (the gate's own rescue adds one for the gate)
    assert recap and re.search(r"rescued=[12]\b", recap[-1]), recap


def test_relative_hook_paths_are_found_where_include_tasks_finds_them(cluster, world, user, tmp_path):
    """A hook path relative to the playbook's folder passes the check and runs (the check
    looks where include_tasks looks; it must not refuse what the include would find)."""
    (w1,) = world.add_nodes(workers=1)
    folder = tmp_path / "site"
    (folder / "hooks").mkdir(parents=True)
    (folder / "hooks" / "work.yml").write_text(GOOD)
    playbook = folder / "maintenance.yml"
    shutil.copy(PLAYBOOKS / "maintenance.yml", playbook)
    result = run(str(playbook), write_inventory(world, tmp_path), user.kubeconfig, args=["-l", w1],
                 extra_vars={"node_maintenance_hooks_work": ["hooks/work.yml"]})
    assert result.proc.returncode == 0, result.output[-4000:]
    assert "memory replaced" in result.output
    wait_clean(cluster.client, [w1])
    assert maintenance_of(cluster.client, w1) is None


def test_broken_file_message_names_the_line(cluster, world, user, tmp_path):
    """Not only the file: where in it (Ansible's YAML error position)."""
    (w1,) = world.add_nodes(workers=1)
    bad = tmp_path / "broken.yml"
    bad.write_text(BROKEN_YAML)
    result = run("maintenance.yml", write_inventory(world, tmp_path), user.kubeconfig, args=["-l", w1],
                 extra_vars={"node_maintenance_hooks_work": [str(bad)]})
    assert result.proc.returncode != 0
    assert f"node_maintenance_hooks_work: {bad}: is not valid YAML" in result.output
    assert "broken.yml:" in result.output.split("is not valid YAML", 1)[1].split("\n", 1)[0]
    assert maintenance_of(cluster.client, w1) is None


def test_a_hook_with_an_unknown_module_is_refused_up_front(cluster, world, user, tmp_path):
    """Valid YAML, but a module that does not exist: include_tasks would end the whole play
    with a parser error; the check loads the tasks as the include would and refuses it."""
    (w1,) = world.add_nodes(workers=1)
    bad = tmp_path / "typo.yml"
    bad.write_text("- name: Reboot\n  ansible.builtin.reboott: {}\n")
    result = run("maintenance.yml", write_inventory(world, tmp_path), user.kubeconfig, args=["-l", w1],
                 extra_vars={"node_maintenance_hooks_work": [str(bad)]})
    assert result.proc.returncode != 0
    assert f"node_maintenance_hooks_work: {bad}: is not a valid task list: couldn't resolve module/action " \
           "'ansible.builtin.reboott'" in result.output, result.output[-3000:]
    assert maintenance_of(cluster.client, w1) is None and node_clean(cluster.client, w1) is None


def test_a_pause_in_a_work_hook_is_refused_before_any_write_above_concurrency_one(cluster, world, user, tmp_path):
    """Issue 32, item 4: the free strategy (concurrency 2) fails a pause when it reaches it, after
    the drain. The check refuses it before the run starts (the pause inside a block's rescue,
    spelled as ansible.legacy), naming the file, the task, the module and what to use instead;
    the audit log shows that the run wrote nothing at all."""
    w1, w2 = world.add_nodes(workers=2)
    hook = tmp_path / "flash.yml"
    hook.write_text("- name: Flash\n  block:\n    - name: Flash the firmware\n      ansible.builtin.debug:\n"
                    "        msg: flashing\n  rescue:\n    - name: Let it cool down\n      ansible.legacy.pause:\n"
                    "        seconds: 5\n")
    audit = AuditLog(cluster)

    result = run("maintenance.yml", write_inventory(world, tmp_path), user.kubeconfig, args=["-l", "workers"],
                 extra_vars={"node_maintenance_concurrency": 2, "node_maintenance_hooks_work": [str(hook)]})

    assert result.proc.returncode != 0, result.output[-3000:]
    assert (f"node_maintenance_hooks_work: {hook}: task 'Let it cool down' uses ansible.legacy.pause, which bypasses "
            "Ansible's host loop") in result.output, result.output[-3000:]
    assert "use ansible.builtin.wait_for with timeout instead" in result.output
    assert audit.settled().writes_of(user.name) == [], "the run wrote to the cluster before refusing"
    for node in (w1, w2):
        assert maintenance_of(cluster.client, node) is None and node_clean(cluster.client, node) is None
