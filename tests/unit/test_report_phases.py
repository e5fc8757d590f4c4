"""The run report finds a node's phases in what the role says (node_maintenance_phase on the
includes of its phase files, tasks/main.yml; plugins/plugin_utils/report_model.py), not in its
tasks' names.

The real maintenance playbook and role run through ansible-playbook with the real report
callback, three nodes, no cluster: every module of the collection is a stand-in action that
answers as the module would (a fake collection tree beside the real one, whose other plugins
are the real ones). node-a is maintained, node-b's work hook fails (the failure path), node-c's
settle fails (the settle's rescue), node-d is not started and fails the run (the begin's
fails_run): the last three say their last line with last_line.yml. The same run again with every task of the role and of the
playbook renamed at random, names of the other phases' tasks among them, writes the same report.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, List

import pytest
import yaml
from ansible.release import __version__ as core_version

from ansible_collections.nmo.maintenance.plugins.module_utils.model import record
from ansible_collections.nmo.maintenance.plugins.plugin_utils import report_model

ROOT = Path(__file__).resolve().parents[2]
ROLE = ROOT / "roles" / "node_maintenance"
MODULES = sorted(p.stem for p in (ROOT / "plugins" / "modules").glob("nmo_*.py"))
NODES = ("node-a", "node-b", "node-c", "node-d")
CORE = tuple(int(part) for part in core_version.split(".")[:2])
pytestmark = pytest.mark.slow

# Every module of the collection, as an action that answers what the role reads of the module's
# result, and nothing from a cluster. node-c's settle fails; node-d's begin says it was not started.
FAKE = '''
from ansible.plugins.action import ActionBase

NAME = {name!r}


class ActionModule(ActionBase):
    def run(self, tmp=None, task_vars=None):
        args = dict(self._task.args)
        host = (task_vars or {{}}).get("inventory_hostname", "")
        out = {{"changed": False, "api_requests": 1, "api_requests_by": {{"get " + NAME: 1}}}}
        if NAME == "nmo_check_files":
            out["inputs"] = {{"drain": {{}}, "refuse_not_ready": True}}
        elif NAME == "nmo_run":
            out.update(run="r1", rollout="r1", mode="standalone", kubernetes="v1.37.2", operator={{"signal": ""}})
        elif NAME == "nmo_plan" and args.get("nodes") is not None:
            nodes = list(args["nodes"])
            out.update(plans={{n: {{"plan": "full", "resume": False, "report": {{}}}} for n in nodes}}, order=nodes,
                       turns={{n: i for i, n in enumerate(nodes)}}, reordered=False, missing=[])
        elif NAME == "nmo_plan":
            out.update(plan="full", say="", outcome="succeeded", resume=False, planned_at=0.0, report={{}})
        elif NAME == "nmo_maintenance" and host == "node-d" and not args.get("state"):
            out.update(plan="stopped", fails_run=True, outcome="not started (a kept node holds its place)",
                       say="node node-d was not started: a kept node of a gone run holds its place")
        elif NAME == "nmo_maintenance" and args.get("state") == "failed":
            out.update(phase="work", policy="auto", kept=True, rolled_back=False, reached=[], outcome="kept out of service",
                       message="maintenance of node " + host + " failed (work phase): kept out of service")
        elif NAME == "nmo_maintenance":
            out.update(changed=True, maintenance={{"name": "maintenance-" + host}}, waited=0.0,
                       lease={{"waited": 0.0, "holders": [], "etcd": None, "acquired": []}})
        elif NAME == "nmo_drain":
            out.update(evicted=[], deleted=[], blocked=[])
        elif NAME == "nmo_progress":
            out["record"] = {{"held": "all"}}
        elif NAME == "nmo_settle" and host == "node-c":
            out.update(failed=True, msg="a workload is not whole again")
        return out
'''

WORK_HOOK = """
- name: Replace the memory
  ansible.builtin.fail:
    msg: DIMM slot 3 not detected
  when: inventory_hostname == 'node-b'
- name: Power it on
  ansible.builtin.debug:
    msg: on
"""
HOOK = "- name: Look at the node\n  ansible.builtin.debug:\n    msg: fine\n"


def collection(tmp: Path, rename: bool) -> Path:
    """An ansible_collections tree whose nmo.maintenance is this checkout's role, playbooks and
    plugins, its modules stand-ins; with ``rename``, every task of the role and the playbook
    named at random."""
    top = tmp / "ansible_collections" / "nmo" / "maintenance"
    (top / "plugins" / "action").mkdir(parents=True)
    for part in ("meta", "galaxy.yml"):
        (top / part).symlink_to(ROOT / part)
    for part in ("callback", "filter", "plugin_utils", "module_utils", "doc_fragments"):
        (top / "plugins" / part).symlink_to(ROOT / "plugins" / part)
    for name in MODULES:
        (top / "plugins" / "action" / f"{name}.py").write_text(FAKE.format(name=name))
    shutil.copytree(ROLE, top / "roles" / "node_maintenance")
    shutil.copytree(ROOT / "playbooks", top / "playbooks")
    if rename:
        files = sorted((top / "roles" / "node_maintenance" / "tasks").glob("*.yml")) + [top / "playbooks" / "maintenance.yml"]
        rename_tasks(files, random.Random(44))
    return tmp


def items(data: Any) -> List[Dict[str, Any]]:
    """Every task and block of a task list or playbook, blocks' rescue and always too."""
    out: List[Dict[str, Any]] = []
    for item in data if isinstance(data, list) else []:
        if not isinstance(item, dict):
            continue
        out.append(item)
        for key in ("tasks", "pre_tasks", "post_tasks", "block", "rescue", "always"):
            out += items(item.get(key))
    return out


def rename_tasks(files: List[Path], rng: random.Random) -> None:
    """Every task and block gets a random name: another task's name (of another phase, as often
    as not) or a made-up one, with or without a group prefix. Plays keep theirs."""
    loaded = {path: yaml.safe_load(path.read_text()) for path in files}
    names = [i["name"] for data in loaded.values() for i in items(data) if "name" in i and "hosts" not in i]
    for path, data in loaded.items():
        for item in items(data):
            if "hosts" in item:
                continue
            made_up = "".join(rng.choices("abcdefghij", k=8))
            item["name"] = rng.choice([rng.choice(names), f"{made_up.title()} | {made_up}", made_up])
        path.write_text(yaml.safe_dump(data, sort_keys=False))


def run(tmp: Path, rename: bool) -> Dict[str, Any]:
    trees = collection(tmp / "collections", rename)
    playbooks = trees / "ansible_collections" / "nmo" / "maintenance" / "playbooks"
    hooks = {"work": tmp / "work.yml", "other": tmp / "hook.yml", "gate": tmp / "gate.yml"}
    hooks["work"].write_text(WORK_HOOK)
    hooks["other"].write_text(HOOK)
    hooks["gate"].write_text(HOOK)
    inventory = tmp / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {n: {} for n in NODES}, "vars": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}))
    extra = {"node_maintenance_hooks_before_drain": [str(hooks["other"])], "node_maintenance_hooks_work": [str(hooks["work"])],
             "node_maintenance_hooks_after": [str(hooks["other"])], "node_maintenance_gate": str(hooks["gate"]),
             "node_maintenance_confirm": True, "awx_job_id": 7,  # no terminal to ask on: the confirmation says so
             "node_maintenance_preflight": "off", "node_maintenance_report_dir": str(tmp / "report")}
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(trees), ANSIBLE_NOCOLOR="1", ANSIBLE_LOCALHOST_WARNING="False",
               ANSIBLE_HOST_KEY_CHECKING="False", ANSIBLE_RETRY_FILES_ENABLED="False", PYTHONDONTWRITEBYTECODE="1",
               ANSIBLE_LOCAL_TEMP=str(tmp / "ansible-tmp"), ANSIBLE_HOME=str(tmp / "ansible-home"))
    done = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), str(playbooks / "maintenance.yml"),
                           "-i", str(inventory), "-e", json.dumps(extra)],
                          capture_output=True, text=True, env=env, cwd=str(tmp), timeout=300, check=False)
    path = tmp / "report" / "report.json"
    assert path.exists(), done.stdout[-6000:] + done.stderr[-3000:]
    assert done.returncode != 0, "node-b and node-c fail the run"
    return json.loads(path.read_text())


def timeless(report: Dict[str, Any]) -> Dict[str, Any]:
    """The report without what two runs never share: times, the playbook's path, the controller."""
    times = {"start", "end", "seconds", "playbook", "who"}

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in times}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(report)


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> Dict[str, Dict[str, Any]]:
    """Both runs at once (each is mostly Ansible's own overhead, about 15 s on 2 busy cores)."""
    with ThreadPoolExecutor(2) as pool:
        runs = {how: pool.submit(run, tmp_path_factory.mktemp(how), how == "renamed") for how in ("named", "renamed")}
        return {how: future.result() for how, future in runs.items()}


def test_the_report_finds_every_phase_of_the_role(reports):
    nodes = {n["name"]: n for n in reports["named"]["nodes"]}
    every = [record.REPORTED[p] for p in (*record.PHASES, record.SETTLE, record.AFTER)]
    assert [p["name"] for p in nodes["node-a"]["phases"]] == every
    assert nodes["node-a"]["outcome"] == "succeeded"
    b = nodes["node-b"]
    assert [p["name"] for p in b["phases"]] == every[:every.index("hooks work") + 1] + ["failed"]
    assert (b["outcome"], b["failed_phase"]) == ("failed", "work") and "DIMM slot 3 not detected" in b["error"], b
    if CORE < (2, 17):  # ansible-core 2.16 ends the play at the first host ended in a rescue (node-b's)
        assert [nodes[n]["outcome"] for n in ("node-c", "node-d")] == ["not reached"] * 2
        return
    c = nodes["node-c"]
    assert [p["name"] for p in c["phases"]] == every[:-1], "the settle's rescue is the settle's"
    assert c["outcome"] == "failed" and "its settle failed: a workload is not whole again" in c["error"], c
    d = nodes["node-d"]
    assert [p["name"] for p in d["phases"]] == ["begin"] and d["outcome"] == "not started", d
    assert "a kept node of a gone run holds its place" in d["error"], d
    assert reports["named"]["run"]["outcome"] == "failed"
    assert all(n["api_requests"] > 0 for n in nodes.values())


def test_tasks_renamed_at_random_give_the_same_report(reports):
    assert timeless(reports["renamed"]) == timeless(reports["named"])


def test_the_report_reads_no_task_name():
    """What read phases from names is gone; a record's name is the console's only."""
    for gone in ("GROUPS", "PREFIX", "INCLUDES", "group_of", "phase_name"):
        assert not hasattr(report_model, gone), gone
    c = report_model.Collector(0.0)
    c.add(report_model.TaskRecord("n", "Drain | Decide", report_model.PLAN_TASK, 0, 1, "ok", {"plan": "full"}))
    for name in ("Drain | Evict the pods", "Hooks | Run on the node the hooks of phase work", "End | Uncordon"):
        c.add(report_model.TaskRecord("n", name, "ansible.builtin.debug", 1, 2, "ok", {}, record.BEGIN))
    assert [p.name for p in c.stories["n"].phases] == ["begin"]


def role_items():
    """(file, task or block) of every task file of the role."""
    for path in sorted((ROLE / "tasks").glob("*.yml")):
        for item in items(yaml.safe_load(path.read_text())):
            yield path.name, item


def included(item: Dict[str, Any]) -> str:
    return str(item.get("ansible.builtin.import_tasks") or item.get("ansible.builtin.include_tasks") or "")


def test_the_role_names_its_phases_from_the_one_table():
    """Every phase of model/record.py's table is named by the role, and nothing else; a phase
    file that writes its phase to the node's progress record writes the one it is included as."""
    named = [(f, i, (i.get("vars") or {})[report_model.PHASE_VAR]) for f, i in role_items()
             if report_model.PHASE_VAR in (i.get("vars") or {})]
    assert sorted({v for _f, _i, v in named}) == sorted(record.REPORTED)
    assert all(f == "main.yml" for f, _i, _v in named), "the phases are named where the phase files are included"
    writes = {f: i["nmo.maintenance.nmo_progress"]["phase"] for f, i in role_items() if "nmo.maintenance.nmo_progress" in i}
    # the Ready wait writes its phase itself (nmo_info record_phase)
    writes.update({f: i["nmo.maintenance.nmo_info"]["record_phase"] for f, i in role_items()
                   if "record_phase" in (i.get("nmo.maintenance.nmo_info") or {})})
    assert writes["ready.yml"] == record.READY
    for _f, item, phase in named:
        if included(item) in writes and included(item) != "hooks.yml":
            assert writes[included(item)] == phase, (included(item), phase)
    assert writes["hooks.yml"] == "{{ " + report_model.PHASE_VAR + " }}"


def test_the_nodes_last_line_is_one_file_the_three_places_include():
    """The failure path, the settle's rescue and a begin that fails the run say the node's last
    line with last_line.yml; its tasks are in the including phase, so it needs no copy a phase."""
    assert sorted(f for f, i in role_items() if included(i) == "last_line.yml") == ["failed.yml", "main.yml", "not_begun.yml"]
    kept = {f for f, i in role_items() if "node_maintenance_last_line" in (i.get("ansible.builtin.set_fact") or {})}
    grouped = {f for f, i in role_items() if (i.get("ansible.builtin.group_by") or {}).get("key") == "nmo_failed"}
    assert kept == grouped == {"last_line.yml"}
