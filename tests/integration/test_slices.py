"""One rollout over AWX job slices (issue 45; docs/awx.md "Job slicing", design §18.6).

AWX runs a sliced job template as a workflow job whose slice jobs each run ``ansible-playbook``
through ``ansible-runner`` (what its execution nodes run) on a pared inventory: the template's
hosts by name, every n-th from the slice's offset. Every slice job gets the workflow job's
``awx_workflow_job_id`` and its own ``awx_job_id``; slices start at once or later. Here the
slices are real ``ansible-runner`` processes given exactly that.

Three slices of one sliced job over six workers, concurrency 2 (the rollout's), a work hook
that holds each node until the test says pass or fail. Slice 1 starts and takes both places;
slice 2 starts and waits for one; slice 1's first node fails; its second passes and frees a
place. Slice 2 must begin nothing (it stopped with the rollout), and slice 3, started after
the failure, nothing either, and its check mode says so first. Then AWX's relaunch of the
workflow (new ids, the same campaign) resumes the rollout. On 4033560 (each slice a rollout of
its own) slice 2 took the freed place and maintained its nodes, and so did slice 3.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest
import yaml
from helpers import ROOT, ansible_env
from topology import WORLD_LABEL, wait_for

from .blocked_support import DRAIN_TIMEOUT, block
from .maintenance_support import NodeRecorder, Run, maintenance_of, slot_prefix, wait_clean
from .rollout_support import write_hook

pytestmark = [pytest.mark.cluster, pytest.mark.side_lane]  # CI: beside the main suite (hack/test)

LEASES = "/apis/coordination.k8s.io/v1/namespaces/medik8s-leases/leases"

# The work hook: says the node is in it, then waits for the test's word on it: pass or fail.
WORK = """\
- name: Tell the test this node is in its work hook
  ansible.builtin.copy:
    dest: "{{ test_dir }}/{{ inventory_hostname }}.work"
    content: "in"
    mode: "0644"
- name: Wait for the test's word on this node
  ansible.builtin.wait_for:
    path: "{{ test_dir }}/{{ inventory_hostname }}.word"
    timeout: 300
- name: The firmware flash fails where the test says so
  ansible.builtin.fail:
    msg: firmware flash failed
  when: lookup('ansible.builtin.file', test_dir ~ '/' ~ inventory_hostname ~ '.word') == 'fail'
"""


def sliced(hosts: List[str], count: int) -> List[List[str]]:
    """AWX's split of a sliced job's hosts: by name, every ``count``-th from the slice's offset."""
    ordered = sorted(hosts)
    return [ordered[offset::count] for offset in range(count)]


class Slice:
    """One slice job: ansible-runner on a private data folder holding the slice's pared
    inventory and the extra variables AWX gives it."""

    def __init__(self, directory: Path, world: Any, hosts: List[str], kubeconfig: str, job_id: int,
                 extra: Dict[str, Any], check: bool = False) -> None:
        self.directory = directory
        (directory / "inventory").mkdir(parents=True)
        (directory / "env").mkdir()
        inventory = {"all": {"vars": {
            "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
            "node_maintenance_slot_prefix": slot_prefix(world),
            "node_maintenance_etcd_pod_selector": f"component=etcd,{WORLD_LABEL}={world.id}"},
            "children": {"workers": {"hosts": {h: None for h in hosts}}}}}
        (directory / "inventory" / "hosts.yml").write_text(yaml.safe_dump(inventory))
        (directory / "env" / "extravars").write_text(json.dumps({"awx_job_id": job_id, **extra}))
        env = ansible_env(kubeconfig)
        env.pop("ANSIBLE_CALLBACKS_ENABLED", None)  # the runner's own event callback, as under AWX
        runner = str(Path(sys.executable).parent / "ansible-runner")
        self.proc = subprocess.Popen(
            [runner, "run", str(directory), "-p", str(ROOT / "playbooks" / "maintenance.yml"), "--ident", "job",
             *(["--cmdline=--check"] if check else [])],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, env=env, cwd=str(ROOT), start_new_session=True)

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout)

    def kill(self) -> None:
        """The runner and its ansible-playbook, which the runner starts in a session of its own
        (a pty): a slice left running would hold its job id's run lease for the next test."""
        if self.proc.poll() is not None:
            return
        tree, found = {self.proc.pid}, True
        while found:
            found = False
            for stat in Path("/proc").glob("[0-9]*/stat"):
                try:
                    pid, ppid = int(stat.parent.name), int(stat.read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, ValueError, IndexError):
                    continue
                if ppid in tree and pid not in tree:
                    tree.add(pid)
                    found = True
        for pid in tree:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()

    @property
    def output(self) -> str:
        path = self.directory / "artifacts" / "job" / "stdout"
        return path.read_text(errors="replace") if path.exists() else ""


def rollout_lease(client: Any, rollout: str) -> Dict[str, Any]:
    return client.get_or_none(f"{LEASES}/nmo-rollout-{rollout}") or {}


def test_slices_share_the_stop_and_the_concurrency_and_a_late_slice_begins_nothing(cluster, world, user, tmp_path):
    workers = world.add_nodes(workers=6)
    one, two, three = sliced(workers, 3)
    failing, passing = one
    workflow = int(world.id, 16) % 100000
    rollout = f"awx-wf-{workflow}"
    extra = {"awx_workflow_job_id": workflow, "node_maintenance_concurrency": 2,
             "node_maintenance_lease_timeout": 240, "node_maintenance_order": "inventory",
             "node_maintenance_hooks_work": [write_hook(tmp_path, "work.yml", WORK)],
             "test_dir": str(tmp_path), "node_maintenance_report_dir": str(tmp_path / "reports"),
             "node_maintenance_campaign": f"night-{world.id}"}

    def in_work(node: str) -> bool:
        return (tmp_path / f"{node}.work").exists()

    slices: List[Slice] = []
    try:
        with NodeRecorder(cluster.client, world) as seen:
            slices.append(Slice(tmp_path / "slice-1", world, one, user.kubeconfig, 9101, extra))
            wait_for(lambda: in_work(failing) and in_work(passing), 240, "slice 1's two nodes in their work")
            slices.append(Slice(tmp_path / "slice-2", world, two, user.kubeconfig, 9102, extra))
            wait_for(lambda: "waits for a place" in slices[1].output or "Waiting to acquire" in slices[1].output
                     or any(maintenance_of(cluster.client, n) for n in two), 240, "slice 2 waiting for a place")
            (tmp_path / f"{failing}.word").write_text("fail")
            wait_for(lambda: (rollout_lease(cluster.client, rollout).get("metadata", {}).get("annotations") or {})
                     .get("nmo.maintenance/stopped-after", "").startswith(f"{failing}/"), 120,
                     "the failure of slice 1 said on the rollout's lease")
            notes = rollout_lease(cluster.client, rollout)["metadata"]["annotations"]
            assert notes["nmo.maintenance/stopped-run"] == "awx-9101", notes
            status = Run("status.yml", "localhost,", user.kubeconfig, args=["-c", "local"])
            assert status.wait(120) == 0, status.output[-3000:]
            assert (f"rollout {rollout}: STOPPED after {failing} failed (in the work phase, run awx-9101): no node "
                    "of it begins; ") in status.output, status.output[-3000:]
            (tmp_path / f"{passing}.word").write_text("pass")  # a place is free again
            assert slices[1].wait(300) == 2, slices[1].output[-3000:]
            # check mode says what the late slice will do: its run wrote no lease, yet it sees the stop
            checked = Slice(tmp_path / "slice-3-check", world, three, user.kubeconfig, 9103,
                            {**extra, "node_maintenance_report_dir": str(tmp_path / "check")}, check=True)
            assert checked.wait(300) == 2, checked.output[-3000:]
            assert f"not started: rollout {rollout} stopped after {failing} failed" in checked.output, \
                checked.output[-3000:]
            # a slice that starts after the stop begins nothing
            slices.append(Slice(tmp_path / "slice-3", world, three, user.kubeconfig, 9103, extra))
            assert slices[2].wait(300) == 2, slices[2].output[-3000:]
            assert slices[0].wait(300) != 0, slices[0].output[-3000:]
        assert seen.most_at_once <= 2, seen.history
        assert set(seen.order) == {failing, passing}, seen.order
        for node in two + three:
            assert maintenance_of(cluster.client, node) is None, node
        for late in slices[1:]:
            said = late.output
            assert f"not started: rollout {rollout} stopped after {failing} failed" in said, said[-3000:]
            assert "run awx-9101, another run of the rollout" in said, said[-3000:]
        # one report for the rollout: each slice's in a folder of its own, the merge of all beside them
        reports = tmp_path / "reports"
        assert sorted(p.name for p in reports.iterdir() if p.is_dir()) == ["awx-9101", "awx-9102", "awx-9103"]
        merged = json.loads((reports / "report.json").read_text())
        assert merged["run"]["id"] == rollout and sorted(merged["run"]["runs"]) == ["awx-9101", "awx-9102", "awx-9103"]
        outcomes = {n["name"]: n["outcome"] for n in merged["nodes"]}
        assert outcomes == {failing: "failed", passing: "succeeded", **{n: "not started" for n in two + three}}, outcomes
        assert merged["run"]["outcome"] == "failed"
        rebuilt = Run("report.yml", "localhost,", user.kubeconfig, args=["-c", "local"],
                      extra_vars={"rollout": rollout, "report_dir": str(reports)})
        assert rebuilt.wait(120) == 0, rebuilt.output[-3000:]
        assert "changed=0" in rebuilt.output and f"rollout {rollout}: 6 node(s) of 3 run(s), failed" in rebuilt.output

        # AWX's relaunch of the failed workflow: new workflow and job ids, the same extra
        # variables. The campaign resumes the rollout as a rerun does: the node it finished is
        # skipped, every other one is maintained, the rollout's concurrency still held.
        for node in workers:
            (tmp_path / f"{node}.word").write_text("pass")
        again = {**extra, "awx_workflow_job_id": workflow + 1, "node_maintenance_report_dir": str(tmp_path / "again")}
        with NodeRecorder(cluster.client, world) as seen_again:
            slices += [Slice(tmp_path / f"relaunch-{i}", world, share, user.kubeconfig, 9110 + i, again)
                       for i, share in enumerate((one, two, three), 1)]
            codes = [s.wait(600) for s in slices[3:]]
        assert codes == [0, 0, 0], [s.output[-2000:] for s in slices[3:]]
        assert set(seen_again.order) == set(workers) - {passing}, seen_again.order
        assert seen_again.most_at_once <= 2, seen_again.history
        relaunched = json.loads((tmp_path / "again" / "report.json").read_text())
        assert relaunched["run"]["id"] == f"awx-wf-{workflow + 1}" and relaunched["run"]["outcome"] == "succeeded"
        assert {n["name"]: n["outcome"] for n in relaunched["nodes"]}[passing] == "skipped", relaunched["nodes"]
        wait_clean(cluster.client, workers)
    finally:
        for node in workers:
            (tmp_path / f"{node}.word").write_text("pass")
        for s in slices:
            s.kill()
        for name in (rollout, f"awx-wf-{workflow + 1}"):
            if rollout_lease(cluster.client, name):
                cluster.client.delete(f"{LEASES}/nmo-rollout-{name}")  # kept a day otherwise


def test_max_blocked_bounds_the_rollout_not_each_slice(cluster, world, user, tmp_path):
    """Two slices, each with a node whose drain a PodDisruptionBudget blocks, skip with
    max_blocked 1, concurrency 1: the first blocked node of the rollout is skipped, the second
    (in the other slice) is one too many and stops the rollout. On 4033560 each slice counted
    its own: both were skipped and the rollout went on."""
    workers = world.add_nodes(workers=4)
    one, two = sliced(workers, 2)
    for node, app in ((one[0], "db1"), (two[0], "db2")):
        block(world, node, app)
    workflow = int(world.id, 16) % 100000 + 100000
    rollout = f"awx-wf-{workflow}"
    extra = {"awx_workflow_job_id": workflow, "node_maintenance_concurrency": 1, "node_maintenance_order": "inventory",
             "node_maintenance_on_blocked": "skip", "node_maintenance_max_blocked": 1,
             "node_maintenance_preflight": "warn", "node_maintenance_drain": {"timeout": DRAIN_TIMEOUT},
             "node_maintenance_settle_timeout": 0, "node_maintenance_lease_timeout": 300,
             "node_maintenance_report_dir": str(tmp_path / "reports")}
    slices = [Slice(tmp_path / "slice-1", world, one, user.kubeconfig, 9201, extra),
              Slice(tmp_path / "slice-2", world, two, user.kubeconfig, 9202, extra)]
    try:
        codes = [s.wait(600) for s in slices]
        blocked = [one[0], two[0]]
        records = {n: maintenance_of(cluster.client, n) for n in blocked}
        failed = [n for n in blocked if records[n] is not None]
        assert len(failed) == 1, ({n: (r or {}).get("status") for n, r in records.items()},
                                  [s.output[-2000:] for s in slices])
        (second,) = failed
        (first,) = [n for n in blocked if n != second]
        status = records[second]["status"]
        assert status["phase"] == "Failed", status
        assert status["lastError"].startswith(
            f"its drain is blocked, the 2nd blocked node of rollout {rollout}: more than node_maintenance_max_blocked "
            "(1) stops the rollout. "), status
        notes = rollout_lease(cluster.client, rollout)["metadata"]["annotations"]
        assert notes["nmo.maintenance/blocked"] == first and notes["nmo.maintenance/stopped-after"].startswith(second)
        assert sorted(codes) != [0, 0], codes
    finally:
        for s in slices:
            s.kill()
        if rollout_lease(cluster.client, rollout):
            cluster.client.delete(f"{LEASES}/nmo-rollout-{rollout}")
