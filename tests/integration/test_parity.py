"""Every module returns the same in Ansible's worker as shipped (NMO_MAINTENANCE_IN_PROCESS=false).

One playbook runs every module (real changes, check mode with diff, bad input, an unknown
option, validate_certs with its alias verify_ssl, an api_key) against a node of its own;
it runs once in process and once shipped, at -vvv, and each task's result is compared:
the keys returned, changed, failed, msg, warnings, deprecations, invocation and (where it is
stable) diff. Each run also stands on its own: the path taken is the path under test (the
worker line or the AnsiballZ file, for every module), the api_key's value is nowhere in
the output, check mode wrote nothing, and the cluster shows what the real tasks did.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List

import pytest
from helpers import run_playbook

pytestmark = [pytest.mark.cluster]

MODULES = ["nmo_taint", "nmo_cordon", "nmo_crd", "nmo_info", "nmo_plan", "nmo_lease", "nmo_drain", "nmo_preflight",
           "nmo_maintenance", "nmo_recover", "nmo_silence", "nmo_notify"]
PATHS = {"in_process": {}, "shipped": {"NMO_MAINTENANCE_IN_PROCESS": "false"}}
SECRET = "parity-token-0f3c9a"  # an api_key nobody may see
# Stable keys of a result; diffs only where they hold no times or resource versions.
COMPARED = ("changed", "failed", "msg", "warnings", "deprecations", "invocation")
STABLE_DIFF = {"cordon", "taint check", "cordon check", "uncordon"}
ALIAS_WARNING = "Both option validate_certs and its alias verify_ssl are set."


def tasks(node: str, prefix: str) -> List[Dict[str, Any]]:
    m = {name: f"nmo.maintenance.{name}" for name in MODULES}
    lease = {"node": node, "slot_prefix": prefix}
    check = {"check_mode": True, "diff": True}

    def task(name: str, module: str, args: Dict[str, Any], **keywords: Any) -> Dict[str, Any]:
        return {"name": name, m[module]: args, "ignore_errors": True, **keywords}

    return [
        task("crd", "nmo_crd", {"object": "crd"}),
        task("info aliases", "nmo_info", {"node": node, "events_limit": 0, "validate_certs": True,
                                          "verify_ssl": True}),
        task("info api_key", "nmo_info", {"node": node, "api_key": "{{ parity_key }}"}),
        task("info bad type", "nmo_info", {"node": node, "events_limit": "many"}),
        task("plan", "nmo_plan", {"node": node, "campaign": "parity"}),
        task("taint check", "nmo_taint", {"node": node}, **check),
        task("cordon check", "nmo_cordon", {"node": node}, **check),
        task("nm check", "nmo_crd", {"node": node, "reason": "parity"}, **check),
        task("lease check", "nmo_lease", lease, **check),
        task("drain check", "nmo_drain", {"node": node}, **check),
        task("begin check", "nmo_maintenance", {**lease, "reason": "parity"}, **check),
        task("preflight", "nmo_preflight", {"nodes": [node]}),
        # cordon first: the node-lifecycle controller mirrors spec.unschedulable into the taint
        task("cordon", "nmo_cordon", {"node": node}, diff=True),
        task("taint", "nmo_taint", {"node": node}, diff=True),
        task("taint again", "nmo_taint", {"node": node}),
        task("lease", "nmo_lease", lease),
        task("drain", "nmo_drain", {"node": node, "progress_interval": 0}),
        task("drain bad", "nmo_drain", {"node": node, "parallelism": 0}),
        task("uncordon", "nmo_cordon", {"node": node, "state": "uncordoned"}, diff=True),
        task("untaint", "nmo_taint", {"node": node, "state": "absent"}, diff=True),
        task("release", "nmo_lease", {**lease, "state": "released"}),
        task("begin", "nmo_maintenance", {**lease, "reason": "parity"}),
        # nobody listens on port 9: a warning on both paths, the same one
        task("silence down", "nmo_silence", {"node": node, "alertmanager": {"url": "http://127.0.0.1:9"}}),
        task("notify check", "nmo_notify", {"targets": [{"url": "http://127.0.0.1:9/{{ parity_key }}"}],
                                            "event": "node_begun", "run_id": "parity", "node": node}, **check),
        task("end", "nmo_maintenance", {**lease, "state": "absent"}),
        task("recover check", "nmo_recover", {"nodes": [node], "slot_prefix": prefix}, **check),
        task("taint bad node", "nmo_taint", {"node": ".."}),
        task("cordon unknown option", "nmo_cordon", {"node": node, "bogus": 1}),
        task("lease missing node", "nmo_lease", {"slot_prefix": prefix}),
    ]


def run_path(cluster, node: str, prefix: str, path: str):
    # the key comes from a variable, as from a vault: Ansible shows the playbook's source around a failed task
    # module_defaults per module: each must reach its own module only (an action redirect breaks that)
    defaults = {"nmo.maintenance.nmo_info": {"events_limit": 0}, "nmo.maintenance.nmo_maintenance": {"install_crd": False}}
    play = [{"hosts": "localhost", "gather_facts": False, "vars": {"parity_key": SECRET}, "module_defaults": defaults,
             "tasks": tasks(node, prefix)}]
    # ansible-core 2.21 adds `invocation` to a result only when asked (it is compared here)
    return run_playbook(play, cluster.kubeconfig, ["-vvv"], env={**PATHS[path], "ANSIBLE_INJECT_INVOCATION": "true"})


def projection(record: Dict[str, Any], node: str) -> Dict[str, Any]:
    """What must be equal on both paths, with this path's node name made neutral."""
    result = json.loads(json.dumps(record["result"], default=str).replace(node, "NODE"))
    seen = {key: result.get(key) for key in COMPARED}
    seen["keys"] = sorted(result)
    if record["task"] in STABLE_DIFF:
        seen["diff"] = result.get("diff")
    return seen


def check_path(cluster, run, node: str, path: str) -> Dict[str, Dict[str, Any]]:
    """The run's results by task, after the checks that need no other path."""
    records = {r["task"]: r for r in run.records if r["task"] in {t["name"] for t in tasks(node, "x")}}
    assert len(records) == len(tasks(node, "x")), f"rc={run.rc}\n{run.stdout[-3000:]}\n{run.stderr[-2000:]}"
    for module in MODULES:  # every module went the way under test
        shipped = f"AnsiballZ_{module}.py" in run.stdout
        here = f"nmo.maintenance.{module}: running in Ansible's worker" in run.stdout
        assert (shipped, here) == (path == "shipped", path == "in_process"), (module, path)
    assert SECRET not in run.stdout + run.stderr + json.dumps(run.records, default=str), "api_key shown"

    r = {name: rec["result"] for name, rec in records.items()}
    for name, result in r.items():
        if not name.endswith(("bad type", "bad", "bad node", "unknown option", "missing node")):
            assert not result.get("failed"), (name, result.get("msg"))
    assert ALIAS_WARNING in r["info aliases"]["warnings"]
    assert r["info api_key"]["invocation"]["module_args"]["api_key"] == "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"
    assert r["info api_key"]["invocation"]["module_args"]["events_limit"] == 0, "nmo_info's module_defaults"
    assert any("api_key is sent together with" in w for w in r["info api_key"]["warnings"])
    # the value is named from ansible-core 2.17 on; 2.16 names only its type
    assert "events_limit" in r["info bad type"]["msg"] and "many" in r["info bad type"]["msg"] \
        or "cannot be converted to an int" in r["info bad type"]["msg"], r["info bad type"]["msg"]
    assert (r["plan"]["plan"], r["plan"]["resume"], r["plan"]["report"]["node"]) == ("full", False, node), r["plan"]
    assert r["taint check"]["changed"] and r["taint check"]["diff"]["after"]["taints"]
    assert r["cordon check"]["changed"] and r["cordon check"]["diff"]["after"]["unschedulable"] is True
    assert r["taint"]["changed"] and not r["taint again"]["changed"]
    assert r["silence down"]["action"] == "none" and "goes on without a silence" in r["silence down"]["warnings"][0]
    assert r["notify check"]["message"].startswith(f"Node {node}: maintenance begun") and r["notify check"]["targets"] == []
    assert r["drain bad"]["failed"] and "parallelism: 0" in r["drain bad"]["msg"]
    assert r["taint bad node"]["failed"] and "node: '..'" in r["taint bad node"]["msg"]
    assert r["cordon unknown option"]["msg"].startswith(
        "Unsupported parameters for (nmo.maintenance.nmo_cordon) module: bogus"), r["cordon unknown option"]["msg"]
    assert r["lease missing node"]["msg"] == "missing required arguments: node"
    assert r["begin"]["changed"] and r["end"]["changed"]
    obj = cluster.client.get(f"/api/v1/nodes/{node}")
    assert not obj["spec"].get("unschedulable") and not obj["spec"].get("taints"), "the node was not given back"
    return records


def test_every_module_same_in_process_and_shipped(cluster, world, crd_installed):
    # crd_installed: the first path must not be the one that installs the CRD (changed there only)
    nodes = world.add_nodes(workers=2)
    prefix = f"t{world.id}-par"
    seen = {}
    for path, node in zip(PATHS, nodes):
        run = run_path(cluster, node, f"{prefix}-{path[0]}", path)
        records = check_path(cluster, run, node, path)
        seen[path] = {name: projection(rec, node) for name, rec in records.items()}
        for name in seen[path]:  # the slot prefix differs by one letter on purpose: neutral
            seen[path][name] = json.loads(json.dumps(seen[path][name]).replace(f"{prefix}-{path[0]}", "PREFIX"))
    differ = {name: (seen["in_process"][name], seen["shipped"][name]) for name in seen["shipped"]
              if seen["in_process"][name] != seen["shipped"][name]}
    assert not differ, json.dumps(differ, indent=1, default=str)[:6000]


# An ansible-core without a name the in-process path needs, made from this one: the
# ansible-playbook process (only it: a shipped module's Python needs nothing of this) loses
# AnsibleModule's argument buffer before any plugin is loaded.
HIDE_ARGS_BUFFER = """\
import os, sys
if os.path.basename(sys.argv[0]) == "ansible-playbook":
    import ansible.module_utils.basic
    del ansible.module_utils.basic._ANSIBLE_ARGS
"""


def test_a_core_without_what_the_path_needs_ships_every_module_with_one_warning(cluster, world, tmp_path):
    (node,) = world.add_nodes(workers=1)
    (tmp_path / "sitecustomize.py").write_text(HIDE_ARGS_BUFFER)
    names = ["info", "taint check", "cordon check", "info again"]
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": names[0], "nmo.maintenance.nmo_info": {"node": node, "events_limit": 0}},
        {"name": names[1], "nmo.maintenance.nmo_taint": {"node": node}, "check_mode": True},
        {"name": names[2], "nmo.maintenance.nmo_cordon": {"node": node}, "check_mode": True},
        {"name": names[3], "nmo.maintenance.nmo_info": {"node": node, "events_limit": 0}}]}]
    run = run_playbook(play, cluster.kubeconfig, ["-vvv"], env={"PYTHONPATH": str(tmp_path)})
    assert run.rc == 0, f"{run.stdout[-3000:]}\n{run.stderr[-2000:]}"
    assert [r["task"] for r in run.records] == names and not any(r["result"].get("failed") for r in run.records)
    assert "running in Ansible's worker" not in run.stdout
    for module in ("nmo_info", "nmo_taint", "nmo_cordon"):
        assert f"AnsiballZ_{module}.py" in run.stdout, f"{module} was not shipped"
    output = " ".join((run.stdout + run.stderr).split())  # Display wraps long warnings
    warning = "ansible.module_utils.basic._ANSIBLE_ARGS missing; modules are shipped"
    assert output.count(warning) == 1, f"the reason once a run, not once a task: {output.count(warning)}"
    assert not cluster.client.get(f"/api/v1/nodes/{node}")["spec"].get("unschedulable"), "check mode wrote"
