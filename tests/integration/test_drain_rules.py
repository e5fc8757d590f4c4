"""Drain rules on the local control plane, as the least-privileged user: order batches (the
audit log shows each batch's evictions only after the batch before is gone), skip,
wait-completed (a Job's pod that finishes, one that does not), the pod label override,
do-not-disrupt (blocks, named; the pre-flight says no-go) and bad input (nothing written)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Dict, List

import pytest
from helpers import run_module
from topology import wait_for

from ansible_collections.nmo.maintenance.plugins.module_utils.model.drain_rules import DRAIN_LABEL

from .maintenance_support import AuditLog, Background, events_of, nm_status, run, start_maintenance, write_inventory

pytestmark = pytest.mark.cluster

RULES = [{"name": "storage-last", "selector": "app in (osd,osd-pinned)", "order": 10},
         {"selector": "app=job", "action": "wait-completed"},
         {"selector": "app=agent", "namespace_selector": "", "action": "skip"}]


def names_on(world: Any, node: str) -> List[str]:
    return sorted(p["metadata"]["name"] for p in world.pods(node=node))


def stamp(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def annotate(world: Any, name: str, annotations: Dict[str, Any]) -> None:
    world.client.patch(f"/api/v1/namespaces/{world.namespace}/pods/{name}",
                       {"metadata": {"annotations": annotations}}, "merge")


def job(world: Any, name: str, node: str) -> str:
    """A Job whose one pod runs on ``node`` until the test says it finished; its pod's name."""
    spec = world._pod_spec(grace=1)
    spec.update(restartPolicy="Never", nodeName=node)
    body = {"apiVersion": "batch/v1", "kind": "Job", "metadata": world._meta(name),
            "spec": {"backoffLimit": 0, "template": {"metadata": world._meta(name, {"app": "job"}), "spec": spec}}}
    world.client.post(f"/apis/batch/v1/namespaces/{world.namespace}/jobs", body)
    pods = wait_for(lambda: [p for p in world.pods(namespace=world.namespace, selector=f"job-name={name}")
                             if p.get("status", {}).get("phase") == "Running"], 30, f"the pod of Job {name} running")
    return pods[0]["metadata"]["name"]


def finish(world: Any, pod: str, phase: str = "Succeeded") -> None:
    """What the kubelet writes when the container exits (kwok's stages leave a started pod alone)."""
    world.client.patch(f"/api/v1/namespaces/{world.namespace}/pods/{pod}/status",
                       {"status": {"phase": phase, "conditions": [
                           {"type": "Ready", "status": "False", "reason": "PodCompleted"}]}}, "strategic")


# -- order batches, skip, wait-completed, the label ----------------------------------------------------
def test_batches_go_in_order_each_gone_before_the_next_and_skip_and_wait_completed_pods_are_not_evicted(
        cluster, world, user):
    a, _b = world.add_nodes(workers=2)
    rules = [dict(RULES[0]), dict(RULES[1]),
             {"selector": "app=agent", "namespace_selector": f"kubernetes.io/metadata.name={world.namespace}",
              "action": "skip"}]
    with world.only_schedulable(a):
        world.deployment("web", 2, grace=1, graceful=True)
        world.deployment("osd", 1, grace=1, graceful=True)
    world.pod("early", node=a, grace=1, graceful=True, labels={DRAIN_LABEL: "order--5"})
    world.pod("agent", node=a)
    world.pod("osd-pinned", node=a, labels={DRAIN_LABEL: "skip"})  # the label beats rule 1
    job_pod = job(world, "report", a)
    nm = start_maintenance(cluster, world, a)
    name = nm["metadata"]["name"]
    audit = AuditLog(cluster)

    args = {"node": a, "maintenance": name, "drain": {"rules": rules, "timeout": 60}}
    running = Background(lambda: run_module("nmo_drain", args, user.kubeconfig))
    # every batch drained, the Job's pod waited for: the drain says so and does not end
    wait_for(lambda: nm_status(cluster, name).get("drainBatch") == "all batches drained; waiting for 1 pod(s) to complete",
             40, "the drain waiting for the Job's pod alone")
    status = nm_status(cluster, name)
    assert status["pendingPods"] == [job_pod] and "waiting for it to complete" in status["lastError"]
    assert running.thread.is_alive(), "the drain must wait for the wait-completed pod"
    assert names_on(world, a) == sorted(["agent", "osd-pinned", job_pod])
    finish(world, job_pod)
    running.thread.join(30)
    result = running.result
    assert result is not None and not result.get("failed"), (result or {}).get("msg")

    assert result["batches"] == [{"order": -5, "pods": 1}, {"order": 0, "pods": 2}, {"order": 10, "pods": 1}]
    skipped = {p["name"]: p["reason"] for p in result["skipped_pods"]}
    assert skipped["agent"] == "skipped by rule 3: it stays on the node"
    assert skipped["osd-pinned"] == f"skipped by label {DRAIN_LABEL}=skip: it stays on the node"
    assert [p["name"] for p in result["completed"]] == [job_pod]
    assert [p["name"] for p in result["wait_completed"]] == [job_pod]
    evicted = {p["name"]: p["reason"] for p in result["evicted"]}
    assert len(evicted) == 4 and "order 10 by rule 1 (storage-last)" in next(
        r for n, r in evicted.items() if n.startswith("osd-"))
    assert f"order -5 by label {DRAIN_LABEL}=order--5" in evicted["early"]
    status = nm_status(cluster, name)
    assert status["phase"] == "Succeeded" and status["drainBatch"] == "all batches drained"
    assert sorted(p["name"] for p in status["skippedPods"]) == ["agent", "osd-pinned"]
    assert sorted(names_on(world, a)) == sorted(["agent", "osd-pinned", job_pod]), "skipped and finished pods stay"
    batch_events = [e["message"] for e in events_of(cluster.client, name, "Drain") if "batch " in e["message"]]
    assert sorted(m.split(": ", 1)[1] for m in batch_events) == [
        "batch 1 of 3 (order -5): 1 pod(s)", "batch 2 of 3 (order 0): 2 pod(s)", "batch 3 of 3 (order 10): 1 pod(s)"]

    # the audit log: each batch's first eviction only after the last pod of the batch before was gone
    entries = audit.settled().entries()
    evictions = {e["objectRef"]["name"]: stamp(e["requestReceivedTimestamp"]) for e in entries
                 if e.get("user", {}).get("username") == user.name and e["verb"] == "create"
                 and (e.get("objectRef") or {}).get("subresource") == "eviction"}
    gone = {}  # the final delete of each pod (kwok's, once the grace period is over)
    for e in entries:
        ref = e.get("objectRef") or {}
        if e["verb"] == "delete" and ref.get("resource") == "pods" and not ref.get("subresource") \
                and e.get("responseStatus", {}).get("code", 200) < 300:
            gone[ref["name"]] = stamp(e["stageTimestamp"])
    batches = [["early"], sorted(n for n in evicted if n.startswith("web-")), [n for n in evicted if n.startswith("osd-")]]
    assert sorted(evictions) == sorted(evicted), "one eviction each, the skipped and waited-for pods none"
    for before, after in zip(batches, batches[1:]):
        last_gone = max(gone[n] for n in before)
        first_evicted = min(evictions[n] for n in after)
        assert last_gone <= first_evicted, f"{after} evicted at {first_evicted} before {before} was gone ({last_gone})"
        assert all(evictions[n] < gone[n] for n in before), "a pod is gone after its eviction, with its grace period"


# -- do-not-disrupt, a wait-completed pod that never finishes, the pre-flight, status.yml --------------
def test_do_not_disrupt_blocks_its_batch_named_preflight_says_no_go_and_an_unfinished_job_pod_times_out(
        cluster, world, user, tmp_path):
    (c,) = world.add_nodes(workers=1)
    world.pod("db", node=c)
    annotate(world, "db", {"karpenter.sh/do-not-disrupt": "true"})
    world.pod("cache", node=c)
    annotate(world, "cache", {"nmo.maintenance/do-not-disrupt": "true"})
    world.pod("web", node=c)
    world.pod("late", node=c)
    job_pod = job(world, "nightly", c)
    drain_dict = {"rules": [RULES[1], {"selector": "app=late", "order": 5}], "timeout": 3}

    pre = run_module("nmo_preflight", {"nodes": [c], "drain": drain_dict}, user.kubeconfig)
    assert not pre.get("failed"), pre.get("msg")
    (node,) = pre["nodes"]
    assert node["verdict"] == "no-go" and pre["blocked"] == [c]
    assert sorted(d["name"] for d in node["do_not_disrupt"]) == ["cache", "db"]
    assert any(b.startswith(f"{world.namespace}/db is annotated karpenter.sh/do-not-disrupt=true (do-not-disrupt)")
               for b in node["blockers"])
    assert any("nmo.maintenance/do-not-disrupt=true" in b for b in node["blockers"])
    assert [p["name"] for p in node["to_wait_completed"]] == [job_pod]
    assert any(w.startswith(f"{world.namespace}/{job_pod} is waited for until it completes (rule 1)")
               for w in node["warnings"])
    assert sorted(e["name"] for e in node["to_evict"]) == ["late", "web"], "no dry-run eviction of the pods that stay"
    assert [(b["order"], len(b["pods"])) for b in node["batches"]] == [(0, 3), (5, 1)]
    assert "in 2 order batches (0, 5)" in node["summary"]

    nm = start_maintenance(cluster, world, c)
    name = nm["metadata"]["name"]
    failed = run_module("nmo_drain", {"node": c, "maintenance": name, "drain": drain_dict}, user.kubeconfig)
    assert failed.get("failed")
    msg = failed["msg"]
    assert msg.startswith(f"drain of node {c} timed out after 3 s; still pending:")
    assert f"{world.namespace}/db (is annotated karpenter.sh/do-not-disrupt=true: never evicted, it blocks the drain " \
           "as a PodDisruptionBudget that allows no disruption would" in msg
    assert f"{world.namespace}/cache (is annotated nmo.maintenance/do-not-disrupt=true: never evicted" in msg
    assert f"{world.namespace}/{job_pod} (not evicted: waiting for it to complete (wait-completed by rule 1))" in msg
    assert names_on(world, c) == sorted(["cache", "db", "late", job_pod]), "batch 2 waits behind the blocked batch 1"
    assert [p["name"] for p in failed["evicted"]] == ["web"]
    assert "do-not-disrupt" in nm_status(cluster, name)["lastError"]

    # again, in the background: status.yml names the blocked batch; the annotations go, the drain goes on
    running = Background(lambda: run_module("nmo_drain", {
        "node": c, "maintenance": name, "drain": {**drain_dict, "timeout": 60}}, user.kubeconfig))
    wait_for(lambda: nm_status(cluster, name).get("drainBatch") == "batch 1 of 2 (order 0): 2 pod(s)", 30,
             "the drain held in batch 1 by the do-not-disrupt pods")
    status = run("status.yml", write_inventory(world, tmp_path), user.kubeconfig, extra_vars={"nmo_nodes": c})
    assert status.proc.returncode == 0, status.output[-3000:]
    assert "batch:        batch 1 of 2 (order 0): 2 pod(s)" in status.output, status.output[-3000:]
    assert "is annotated" in status.output and "do-not-disrupt=true" in status.output
    annotate(world, "db", {"karpenter.sh/do-not-disrupt": None})
    annotate(world, "cache", {"nmo.maintenance/do-not-disrupt": "false"})
    wait_for(lambda: nm_status(cluster, name).get("drainBatch") == "all batches drained; waiting for 1 pod(s) to "
             "complete", 30, "batches 1 and 2 drained once the annotations are gone")
    assert names_on(world, c) == [job_pod]
    finish(world, job_pod, "Failed")
    running.thread.join(30)
    done = running.result
    assert done is not None and not done.get("failed"), (done or {}).get("msg")
    assert sorted(p["name"] for p in done["evicted"]) == ["cache", "db", "late"]
    assert [p["name"] for p in done["completed"]] == [job_pod]
    assert nm_status(cluster, name)["phase"] == "Succeeded"
    released = [e["message"] for e in events_of(cluster.client, name, "Drain") if "no longer annotated" in e["message"]]
    assert len(released) == 2, released


# -- bad input ------------------------------------------------------------------------------------------
BAD_RULES = [  # Ansible's own checks of the sub-options, one a run; then ours, every problem in one message
    ([{"selector": "app=x", "action": "evict"}], ["value of action must be one of: drain, skip, wait-completed"]),
    ([{"selector": "app=x", "order": "last"}], ["order"]),
    ([{"selector": "app=x", "podSelector": "y"}], ["podSelector"]),
    ([{"selector": "app in (x"}, {"selector": "app=x", "action": "skip", "order": 4}],
     ["rules[0].selector: 'app in (x' is not a valid label selector",
      "rules[1].order: only a rule with action drain has an order"]),
]


def test_bad_rules_and_a_bad_drain_label_are_refused_with_nothing_written(cluster, world, user, tmp_path):
    (d,) = world.add_nodes(workers=1)
    world.pod("web", node=d)
    world.pod("odd", node=d, labels={DRAIN_LABEL: "last"})
    audit = AuditLog(cluster)
    # the role: node_maintenance_drain.rules checked before the node is touched
    role = run("maintenance.yml", write_inventory(world, tmp_path), user.kubeconfig, args=["-l", d],
               extra_vars={"node_maintenance_drain": {"rules": [{"selector": "tier in (db", "order": 5}]}})
    assert role.proc.returncode != 0, role.output[-3000:]
    assert "rules[0].selector: 'tier in (db' is not a valid label selector" in role.output, role.output[-3000:]
    assert world.node(d)["spec"].get("unschedulable") is not True, "the node was not touched"
    for index, (rules, said) in enumerate(BAD_RULES):
        runs = [("nmo_drain", {"node": d})] + ([("nmo_preflight", {"nodes": [d]})] if index == 3 else [])
        for module, args in runs:
            result = run_module(module, {**args, "drain": {"rules": rules}}, user.kubeconfig)
            assert result.get("failed") and all(s in result["msg"] for s in said), (module, rules, result.get("msg"))

    # a label value that is none of ours: that pod's error, in the pre-flight and the drain
    pre = run_module("nmo_preflight", {"nodes": [d]}, user.kubeconfig)
    assert pre["blocked"] == [d]
    assert pre["nodes"][0]["blockers"] == [
        f"{world.namespace}/odd: label {DRAIN_LABEL}='last' is not one of skip, wait-completed, drain, order-<n> or "
        "order=<n> (n a whole number): fix or remove the label"]
    failed = run_module("nmo_drain", {"node": d}, user.kubeconfig)
    assert failed.get("failed")
    assert failed["msg"].startswith(f"cannot drain node {d}: 1 pod(s) cannot be drained as they are; nothing was "
                                    f"evicted. {world.namespace}/odd: label {DRAIN_LABEL}='last'")
    assert [p["name"] for p in failed["refused"]] == ["odd"]
    # nothing written, nothing evicted (but the role's run lease, made and deleted by its own start and end)
    writes = [f"{e['verb']} {e['requestURI']}" for e in audit.settled().writes_of(user.name)
              if not ((e.get("objectRef") or {}).get("name") or "").startswith("nmo-run-")]
    assert [w for w in writes if "dryRun=All" not in w] == []
    assert [w for w in writes if "dryRun=All" in w] == [
        f"create /api/v1/namespaces/{world.namespace}/pods/web/eviction?dryRun=All"], \
        "the pre-flight's one dry-run eviction: none for the refused pod"
    assert names_on(world, d) == ["odd", "web"]
