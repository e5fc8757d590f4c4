"""Bad input, as a hostile operator would give it: every module refuses it before its first
write, with a message that names the option and the value, and the cluster is as it was.

All the cases of one path run as the tasks of one playbook (each with ignore_errors), in
process and shipped; then the cluster is compared with a snapshot taken before.
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

import pytest
from helpers import run_playbook

from ansible_collections.nmo.maintenance.plugins.module_utils.model.leases import RUN_LEASE_PREFIX

pytestmark = [pytest.mark.cluster]

NM_API = "/apis/nodemaintenance.medik8s.io/v1beta1/nodemaintenances"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/medik8s-leases/leases"
PATHS = {"in-process": {}, "shipped": {"NMO_MAINTENANCE_IN_PROCESS": "false"}}

Case = Tuple[str, str, Dict[str, Any], List[str]]  # id, module, arguments, what the message must hold


def cases(node: str, prefix: str) -> List[Case]:
    begin = {"node": node, "slot_prefix": prefix, "wait": False}
    lease = {"node": node, "slot_prefix": prefix}
    long_name = "a" * 300
    return [
        # node names: one check for every module that takes a node
        ("begin node empty", "nmo_maintenance", {**begin, "node": ""}, ["node: '' is empty"]),
        ("begin node blank", "nmo_maintenance", {**begin, "node": " "}, ["node: ' ' is not a valid node name"]),
        ("begin node dot", "nmo_maintenance", {**begin, "node": "."}, ["node: '.' is not a valid node name"]),
        ("begin node dotdot", "nmo_maintenance", {**begin, "node": ".."}, ["node: '..' is not a valid node name"]),
        ("begin node traversal", "nmo_maintenance", {**begin, "node": "../x"}, ["node: '../x'"]),
        ("begin node upper", "nmo_maintenance", {**begin, "node": node.upper()}, [f"node: '{node.upper()}'"]),
        ("begin node unicode", "nmo_maintenance", {**begin, "node": "nöde-1"}, ["node: 'nöde-1'"]),
        ("begin node huge", "nmo_maintenance", {**begin, "node": long_name}, ["node: 'aaaa", "300 characters"]),
        ("end node dotdot", "nmo_maintenance", {"node": "..", "state": "absent"}, ["node: '..'"]),
        ("taint node dotdot", "nmo_taint", {"node": ".."}, ["node: '..'"]),
        ("taint node empty", "nmo_taint", {"node": ""}, ["node: '' is empty"]),
        ("cordon node dot", "nmo_cordon", {"node": "."}, ["node: '.'"]),
        ("cordon node slash", "nmo_cordon", {"node": "a/b"}, ["node: 'a/b'"]),
        ("lease node dotdot", "nmo_lease", {**lease, "node": ".."}, ["node: '..'"]),
        ("drain node dotdot", "nmo_drain", {"node": ".."}, ["node: '..'"]),
        ("crd node dotdot", "nmo_crd", {"node": ".."}, ["node: '..'"]),
        ("crd node empty", "nmo_crd", {"node": ""}, ["node: '' is empty"]),
        ("info node dotdot", "nmo_info", {"node": ".."}, ["node: '..'"]),
        # begin: everything checked before the NodeMaintenance is made
        ("begin label_key empty", "nmo_maintenance", {**begin, "label_key": ""}, ["label_key: '' is empty"]),
        ("begin label_key bad", "nmo_maintenance", {**begin, "label_key": "a/b/c"}, ["label_key: 'a/b/c'"]),
        ("begin etcd selector", "nmo_maintenance", {**begin, "etcd_pod_selector": "component in (etcd"},
         ["etcd_pod_selector: 'component in (etcd'"]),
        ("begin etcd namespace", "nmo_maintenance", {**begin, "etcd_pod_namespace": "Kube System"},
         ["etcd_pod_namespace: 'Kube System'"]),
        ("begin duration int32", "nmo_maintenance", {**begin, "duration": 2**31}, ["duration: 2147483648"]),
        ("begin duration huge", "nmo_maintenance", {**begin, "duration": 10**20}, ["duration: 100000000000000000000"]),
        ("begin duration zero", "nmo_maintenance", {**begin, "duration": 0}, ["duration: 0"]),
        ("begin timeout negative", "nmo_maintenance", {**begin, "timeout": -1}, ["timeout: -1"]),
        ("begin timeout nan", "nmo_maintenance", {**begin, "timeout": "nan"}, ["timeout", "nan"]),
        ("begin concurrency zero", "nmo_maintenance", {**begin, "concurrency": 0}, ["concurrency: 0"]),
        ("begin concurrency huge", "nmo_maintenance", {**begin, "concurrency": 10**9}, ["concurrency: 1000000000"]),
        ("begin slot_prefix", "nmo_maintenance", {**begin, "slot_prefix": "../x"}, ["slot_prefix: '../x'"]),
        ("begin slot_prefix node-", "nmo_maintenance", {**begin, "slot_prefix": "node-x"}, ["slot_prefix: 'node-x'"]),
        ("begin name", "nmo_maintenance", {**begin, "name": "../x"}, ["name: '../x'"]),
        ("begin reason huge", "nmo_maintenance", {**begin, "reason": "r" * 5000}, ["reason: 'rrr", "5000 characters"]),
        ("end annotation", "nmo_maintenance", {"node": node, "state": "absent", "annotations": {"bad key": "v"}},
         ["annotations key: 'bad key'"]),
        ("end event reason", "nmo_maintenance", {"node": node, "state": "absent", "events": [{"reason": ""}]},
         ["events[0].reason: ''"]),
        # the single-purpose modules
        ("taint key", "nmo_taint", {"node": node, "taints": [{"key": "a b", "effect": "NoSchedule"}]},
         ["taints[0].key: 'a b'"]),
        ("taint value", "nmo_taint", {"node": node, "taints": [{"key": "a", "value": "v" * 70, "effect": "NoSchedule"}]},
         ["taints[0].value: 'vvv"]),
        ("taint effect", "nmo_taint", {"node": node, "taints": [{"key": "a", "effect": "Never"}]},
         ["taints[0].effect: 'Never'"]),
        ("cordon label_key", "nmo_cordon", {"node": node, "label_key": "a/b/c"}, ["label_key: 'a/b/c'"]),
        ("cordon annotation value", "nmo_cordon", {"node": node, "annotations": {"a": 5}}, ["annotations[a]: 5"]),
        ("cordon maintenance", "nmo_cordon", {"node": node, "maintenance": ".."}, ["maintenance: '..'"]),
        ("lease duration", "nmo_lease", {**lease, "duration": 2**31}, ["duration: 2147483648"]),
        ("lease concurrency", "nmo_lease", {**lease, "concurrency": -1}, ["concurrency: -1"]),
        ("lease maintenance", "nmo_lease", {**lease, "maintenance": "../x"}, ["maintenance: '../x'"]),
        ("lease release prefix", "nmo_lease", {**lease, "state": "released", "slot_prefix": "Bad"},
         ["slot_prefix: 'Bad'"]),
        ("drain timeout nan", "nmo_drain", {"node": node, "timeout": "nan"}, ["timeout: nan must be a finite number"]),
        ("drain timeout inf", "nmo_drain", {"node": node, "timeout": "inf"}, ["timeout: inf must be a finite number"]),
        ("drain timeout negative", "nmo_drain", {"node": node, "timeout": -1}, ["timeout: -1"]),
        ("drain retry_delay nan", "nmo_drain", {"node": node, "retry_delay": "nan"}, ["retry_delay: nan"]),
        ("drain grace_period", "nmo_drain", {"node": node, "grace_period": -5}, ["grace_period: -5"]),
        ("drain fallback nan", "nmo_drain", {"node": node, "delete_fallback_after": "nan"},
         ["delete_fallback_after: nan"]),
        ("drain parallelism huge", "nmo_drain", {"node": node, "parallelism": 10**9}, ["parallelism: 1000000000"]),
        ("drain pod_selector", "nmo_drain", {"node": node, "pod_selector": "app in (a"}, ["pod_selector: 'app in (a'"]),
        ("drain progress_interval", "nmo_drain", {"node": node, "progress_interval": -1}, ["progress_interval: -1"]),
        ("drain validate_only", "nmo_drain", {"node": node, "timeout": 0, "validate_only": True}, ["timeout: 0"]),
        ("crd name", "nmo_crd", {"node": node, "name": "Bad Name"}, ["name: 'Bad Name'"]),
        ("crd progress", "nmo_crd", {"node": node, "status": {"drainProgress": 101}}, ["status.drainProgress: 101"]),
        ("crd pending pods", "nmo_crd", {"node": node, "status": {"pendingPods": ["../x"]}},
         ["status.pendingPods[0]: '../x'"]),
        ("crd event reason", "nmo_crd", {"node": node, "events": [{"reason": "two words"}]},
         ["events[0].reason: 'two words'"]),
        ("info events_limit", "nmo_info", {"node": node, "events_limit": -1}, ["events_limit: -1"]),
        ("info label_selector", "nmo_info", {"label_selector": "a in ("}, ["label_selector: 'a in ('"]),
        ("preflight concurrency", "nmo_preflight", {"nodes": [node], "concurrency": 0}, ["concurrency: 0"]),
        ("preflight skip wait", "nmo_preflight", {"nodes": [node], "skip_wait_for_delete_timeout": -1},
         ["skip_wait_for_delete_timeout: -1"]),
    ]


# The node-lifecycle controller adds these to a new node (from kubernetes.io/os and /arch) at
# its own pace, sometimes after the snapshot before the run: not a write of ours.
CONTROLLER_LABELS = ("beta.kubernetes.io/os", "beta.kubernetes.io/arch")


def snapshot(client: Any, nodes: List[str]) -> Dict[str, Any]:
    """What a write would change: the nodes' marks, every NodeMaintenance, every lease."""
    marks = {}
    for name in nodes:
        obj = client.get(f"/api/v1/nodes/{name}")
        labels = {k: v for k, v in (obj["metadata"].get("labels") or {}).items() if k not in CONTROLLER_LABELS}
        marks[name] = {"taints": obj["spec"].get("taints"), "unschedulable": obj["spec"].get("unschedulable"),
                       "labels": labels, "annotations": obj["metadata"].get("annotations")}
    nms = sorted(nm["metadata"]["name"] for nm in (client.get_or_none(NM_API) or {}).get("items", []))
    # a playbook run's own run lease (nmo-run-<id>, run.py) comes and goes with the run itself
    leases = sorted((lease["metadata"]["name"], lease["metadata"]["resourceVersion"])
                    for lease in (client.get_or_none(LEASES) or {}).get("items", [])
                    if not lease["metadata"]["name"].startswith(RUN_LEASE_PREFIX))
    return {"nodes": marks, "nodemaintenances": nms, "leases": leases}


@pytest.mark.parametrize("path", list(PATHS))
def test_bad_input_is_refused_before_any_write(cluster, world, path):
    (node,) = world.add_nodes(workers=1)
    prefix = f"t{world.id}-slot"
    table = cases(node, prefix)
    installed = run_playbook([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"nmo.maintenance.nmo_crd": {"object": "crd"}}]}], cluster.kubeconfig)
    assert installed.rc == 0, installed.stdout[-2000:]
    before = snapshot(cluster.client, [node])

    play = [{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": case_id, f"nmo.maintenance.{module}": args, "ignore_errors": True}
        for case_id, module, args, _wanted in table]}]
    run = run_playbook(play, cluster.kubeconfig, env=PATHS[path], timeout=900)

    results = {r["task"]: r for r in run.records}
    problems = []
    for case_id, module, args, wanted in table:
        record = results.get(case_id)
        if record is None:
            problems.append(f"{case_id}: no result")
            continue
        msg = str(record["result"].get("msg", ""))
        if record["status"] != "failed":
            problems.append(f"{case_id}: {module} {args} did not fail ({record['status']})")
        elif "Traceback" in msg or "Task failed:" in msg or not all(w in msg for w in wanted):
            problems.append(f"{case_id}: message {msg[:300]!r} does not hold {wanted}")
    assert problems == [], "\n".join(problems)
    assert snapshot(cluster.client, [node]) == before, "bad input changed the cluster"
    assert cluster.client.get_or_none(f"{NM_API}/maintenance-..") is None


@pytest.mark.parametrize("extra,wanted", [
    ({"node_maintenance_drain_timeout": -1}, "timeout: -1"),
    ({"node_maintenance_drain_pod_selector": "app in (web", "node_maintenance_preflight": "off"},
     "pod_selector: 'app in (web'"),
    ({"node_maintenance_drain_retry_delay": 0}, "retry_delay: 0"),
    ({"node_maintenance_ready_timeout": -1}, "node_maintenance_ready_timeout: -1 must be between 0 and 604800"),
    ({"node_maintenance_lease_duration": 2**31}, "duration: 2147483648 must be between 30 and 604800"),
    ({"node_maintenance_etcd_pod_selector": "component in (etcd"}, "etcd_pod_selector: 'component in (etcd'"),
    ({"node_maintenance_label_key": "a/b/c"}, "label_key: 'a/b/c'"),
    ({"node_maintenance_drain": {"timeout": -1}}, "timeout: -1"),
    ({"node_maintenance_drain": {"retry_dealy": 2}},
     "node_maintenance_drain.retry_dealy: not an option of node_maintenance_drain"),
    ({"node_maintenance_drain": {"parallelism": [4]}},
     "node_maintenance_drain.parallelism: a list was given ([4]), a whole number is needed"),
], ids=["drain-timeout", "pod-selector", "retry-delay", "ready-timeout", "lease-duration", "etcd-selector",
        "label-key", "drain-dict-timeout", "drain-dict-unknown-key", "drain-dict-shape"])
def test_the_role_refuses_bad_options_before_the_node_is_touched(cluster, world, tmp_path, extra, wanted):
    """Drain options used to be checked by the drain, after cordon: now before begin."""
    from .maintenance_support import run, write_inventory

    (node,) = world.add_nodes(workers=1)
    inventory = write_inventory(world, tmp_path)
    before = snapshot(cluster.client, [node])

    result = run("maintenance.yml", inventory, cluster.kubeconfig, args=["-l", node], extra_vars=extra)

    assert result.proc.returncode != 0, result.output[-3000:]
    assert wanted in result.output, result.output[-3000:]
    assert snapshot(cluster.client, [node]) == before, "bad input changed the cluster"
    begin_task = "Begin | NodeMaintenance, leases and etcd guard, taints, cordon and label"
    assert not [r for r in result.records() if r["task"].endswith(begin_task) and r["status"] == "ok"]


def test_preflight_judges_an_impossible_name_as_a_missing_node(cluster, world):
    """The pre-flight answers for every node it is given (node_maintenance_preflight=warn goes
    on with the others): a name that cannot be a node's is a no-go that says why."""
    from helpers import run_module

    (node,) = world.add_nodes(workers=1)
    result = run_module("nmo_preflight", {"nodes": [node, "..", "Worker_1"]}, cluster.kubeconfig)
    assert not result.get("failed"), result.get("msg")
    verdicts = {n["node"]: (n["verdict"], n["blockers"]) for n in result["nodes"]}
    assert verdicts[node][0] == "go"
    assert verdicts[".."] == ("no-go", ["not found in cluster: node: '..' is not a valid node name: Kubernetes names "
                                        "are RFC 1123 subdomains, at most 253 lower-case letters, digits, '-' and '.', "
                                        "starting and ending with a letter or digit"])
    assert verdicts["Worker_1"][0] == "no-go" and "'Worker_1' is not a valid node name" in verdicts["Worker_1"][1][0]


def test_a_deprecated_drain_variable_still_applies_and_warns_once_naming_its_key(cluster, world, tmp_path):
    """node_maintenance_drain_timeout (deprecated) reaches the drain as node_maintenance_drain.timeout:
    a bad one is refused by the drain's own check; the deprecation is said once for the run."""
    from .maintenance_support import run, write_inventory

    w1, w2 = world.add_nodes(workers=2)
    inventory = write_inventory(world, tmp_path)
    result = run("maintenance.yml", inventory, cluster.kubeconfig, args=["-l", f"{w1},{w2}"],
                 extra_vars={"node_maintenance_drain_timeout": -1})
    assert result.proc.returncode != 0, result.output[-3000:]
    assert "timeout: -1" in result.output, result.output[-3000:]
    said = "node_maintenance_drain_timeout is deprecated, give it as the key timeout of node_maintenance_drain"
    assert " ".join(result.output.split()).count(said) == 1, result.output[-3000:]
