"""nmo_maintenance: the begin and the end of a node's maintenance, each one module call."""

import functools
import http.server
import threading
from typing import Any, Dict

import pytest
from helpers import run_module
from topology import WORLD_LABEL

from ansible_collections.nmo.maintenance.plugins.module_utils.model import leases, times
from ansible_collections.nmo.maintenance.plugins.module_utils.stores import leases as lease_store
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import run as runs

from .maintenance_support import (
    leases_naming,
    maintenance_of,
    nm_name,
    node_clean,
    reasons_of,
    wait_clean,
)

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("crd_installed")]

USER_TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
LABEL = "remediation.medik8s.io/exclude-from-remediation"


def args(world: Any, node: str, **extra: Any) -> Dict[str, Any]:
    return {"node": node, "slot_prefix": f"t{world.id}-slot",
            "etcd_pod_selector": f"component=etcd,{WORLD_LABEL}={world.id}", **extra}


def node_of(cluster: Any, node: str) -> Dict[str, Any]:
    return cluster.client.get(f"/api/v1/nodes/{node}")


SHIPPED = {"NMO_MAINTENANCE_IN_PROCESS": "false"}  # every module shipped, none run in Ansible's worker


@pytest.mark.parametrize("path", ["in_process", "module"])
def test_begin_then_end_each_in_one_call(cluster, world, path):
    """Both ways a task runs (in Ansible's worker on the controller, or as a shipped module) do the same."""
    call = functools.partial(run_module, env=SHIPPED if path == "module" else None)
    (node,) = world.add_nodes(workers=1)
    cluster.client.patch(f"/api/v1/nodes/{node}", {"spec": {"taints": [USER_TAINT]}}, "merge")
    prefix = f"t{world.id}-slot"

    checked = call("nmo_maintenance", args(world, node, reason="disk swap"), cluster.kubeconfig,
                   check=True, diff=True, verbose=True)
    assert checked["changed"] and not checked.get("failed"), checked.get("msg")
    assert ("AnsiballZ_nmo_maintenance" in checked["_stdout"]) == (path == "module"), "not the path under test"
    assert maintenance_of(cluster.client, node) is None and leases_naming(cluster.client, [node], prefix) == []
    assert node_clean(cluster.client, node) is None, "check mode wrote"

    begun = call("nmo_maintenance", args(world, node, reason="disk swap"), cluster.kubeconfig, diff=True)
    assert begun["changed"] and not begun.get("failed"), begun.get("msg")
    assert begun["reached"] == ["maintenance", "lease", "taints", "cordon"]
    assert begun["created"] and begun["maintenance"]["name"] == nm_name(node) and begun["ready"] is True
    nm = maintenance_of(cluster.client, node)
    assert nm["spec"]["reason"] == "disk swap" and nm["status"]["phase"] == "Pending"
    obj = node_of(cluster, node)
    assert obj["spec"]["unschedulable"] is True and obj["metadata"]["labels"][LABEL] == "true"
    assert [(t["key"], t["effect"]) for t in obj["spec"]["taints"]][:2] == [
        ("node.kubernetes.io/unschedulable", "NoSchedule"), ("medik8s.io/drain", "NoSchedule")]
    assert USER_TAINT in obj["spec"]["taints"], "a user taint was lost"
    lease = cluster.client.get(lease_store.leases_path(leases.LEASE_NAMESPACE, leases.node_lease_name(node)))
    assert lease["spec"]["holderIdentity"] == leases.HOLDER
    assert begun["lease"]["slot"] == f"{prefix}-0"
    story = reasons_of(cluster.client, nm_name(node))
    assert [r for r in ("BeginMaintenance", "LeaseAcquired", "Cordon") if r not in story] == [], story
    assert begun["diff"]["after"]["unschedulable"] is True and begun["diff"]["before"]["unschedulable"] is False

    again = call("nmo_maintenance", args(world, node, reason="disk swap"), cluster.kubeconfig)
    assert not again.get("failed") and not again["created"], again.get("msg")
    assert again["reached"] == begun["reached"]
    assert reasons_of(cluster.client, nm_name(node)).count("BeginMaintenance") == 1

    end_args = args(world, node, state="absent", events=[{"reason": "SucceedMaintenance"}],
                    annotations={"nmo.maintenance/campaign": "w48"})
    checked = call("nmo_maintenance", end_args, cluster.kubeconfig, check=True)
    assert checked["changed"] and maintenance_of(cluster.client, node) is not None, "check mode deleted"
    assert node_of(cluster, node)["spec"]["unschedulable"] is True, "check mode uncordoned"

    ended = call("nmo_maintenance", end_args, cluster.kubeconfig)
    assert ended["changed"] and not ended.get("failed"), ended.get("msg")
    assert ended["reached"] == ["uncordon", "taints", "lease", "maintenance"] and ended["deleted"]
    assert maintenance_of(cluster.client, node) is None
    assert leases_naming(cluster.client, [node], prefix) == []
    wait_clean(cluster.client, [node])
    obj = node_of(cluster, node)
    assert obj["spec"]["taints"] == [USER_TAINT] and obj["metadata"]["annotations"]["nmo.maintenance/campaign"] == "w48"
    story = reasons_of(cluster.client, nm_name(node))
    assert "SucceedMaintenance" in story and "RemovedMaintenance" in story and "LeaseReleased" in story
    assert "UncordonNode" in reasons_of(cluster.client, node)

    idle = call("nmo_maintenance", end_args, cluster.kubeconfig)
    assert not idle.get("failed") and not idle["changed"], idle


def test_blocked_begin_says_how_far_it_got_and_leaves_the_node_alone(cluster, world):
    (node,) = world.add_nodes(workers=1)
    lease_store.ensure_namespace(cluster.client)
    body = leases.new_lease(leases.node_lease_name(node), leases.LEASE_NAMESPACE, "node-healthcheck-x", 3600,
                            times.utcnow(), leases.owner_reference(node_of(cluster, node)))
    cluster.client.post(lease_store.leases_path(leases.LEASE_NAMESPACE), body)

    blocked = run_module("nmo_maintenance", args(world, node, wait=False), cluster.kubeconfig)
    assert blocked.get("failed") and "node-healthcheck-x" in blocked["msg"], blocked
    assert blocked["reached"] == ["maintenance"], blocked
    assert maintenance_of(cluster.client, node)["status"]["phase"] == "Pending"
    assert node_clean(cluster.client, node) is None, "the node was touched without its leases"

    # check mode, where the real begin would wait for the lease: it says so
    # (a traceback once: the dry run's "would wait" answer of the lease step had no diff)
    dry = run_module("nmo_maintenance", args(world, node, wait=True), cluster.kubeconfig, check=True)
    assert not dry.get("failed"), dry.get("msg") or dry.get("module_stderr")
    assert any("would wait" in w and "node-healthcheck-x" in w for w in dry.get("warnings", [])), dry
    assert node_clean(cluster.client, node) is None, "check mode wrote"


def test_failed_records_the_error_then_rolls_back_and_a_second_call_changes_nothing(cluster, world):
    (node,) = world.add_nodes(workers=1)
    cluster.client.patch(f"/api/v1/nodes/{node}", {"spec": {"taints": [USER_TAINT]}}, "merge")
    prefix = f"t{world.id}-slot"
    begun = run_module("nmo_maintenance", args(world, node), cluster.kubeconfig)
    assert not begun.get("failed"), begun.get("msg")

    failure = args(world, node, state="failed", error="Hooks | work: DIMM slot 3 not detected", reached=begun["reached"])
    checked = run_module("nmo_maintenance", failure, cluster.kubeconfig, check=True)
    assert checked["changed"] and checked["rolled_back"] and node_of(cluster, node)["spec"]["unschedulable"], \
        "check mode wrote"
    failed = run_module("nmo_maintenance", failure, cluster.kubeconfig)
    assert not failed.get("failed"), failed.get("msg")
    assert failed["changed"] and failed["recorded"] and failed["rolled_back"] and not failed["deleted"]
    wait_clean(cluster.client, [node])
    assert node_of(cluster, node)["spec"]["taints"] == [USER_TAINT]
    assert LABEL not in node_of(cluster, node)["metadata"]["labels"]
    nm = maintenance_of(cluster.client, node)
    assert nm["status"]["phase"] == "Failed" and nm["status"]["lastError"] == failure["error"], "the record was lost"
    assert "FailedMaintenance" in reasons_of(cluster.client, nm_name(node))
    assert "UncordonNode" in reasons_of(cluster.client, node)
    assert leases_naming(cluster.client, [node], prefix) == [], "the rollback keeps a lease"

    again = run_module("nmo_maintenance", failure, cluster.kubeconfig)
    assert not again.get("failed") and not again["changed"], again
    assert reasons_of(cluster.client, nm_name(node)).count("FailedMaintenance") == 1


def test_failed_without_rollback_keeps_the_node_in_maintenance_for_a_rerun(cluster, world):
    (node,) = world.add_nodes(workers=1)
    prefix = f"t{world.id}-slot"
    assert not run_module("nmo_maintenance", args(world, node), cluster.kubeconfig).get("failed")
    kept = run_module("nmo_maintenance", args(world, node, state="failed", error="gate: storage degraded",
                                              rollback=False), cluster.kubeconfig)
    assert not kept.get("failed") and kept["recorded"] and not kept["rolled_back"], kept
    assert maintenance_of(cluster.client, node)["status"]["phase"] == "Failed"
    assert node_clean(cluster.client, node) is not None, "the node left maintenance"
    assert node_of(cluster, node)["spec"]["unschedulable"] is True
    assert leases_naming(cluster.client, [node], prefix) != [], "its leases were released"


def test_failed_undoes_only_the_steps_the_begin_reached(cluster, world):
    """A begin blocked at the node lease (reached: maintenance): an administrator's cordon and
    the other holder's lease stay; the NodeMaintenance says why."""
    (node,) = world.add_nodes(workers=1)
    world.cordon(node)
    lease_store.ensure_namespace(cluster.client)
    body = leases.new_lease(leases.node_lease_name(node), leases.LEASE_NAMESPACE, "node-healthcheck-x", 3600,
                            times.utcnow(), leases.owner_reference(node_of(cluster, node)))
    cluster.client.post(lease_store.leases_path(leases.LEASE_NAMESPACE), body)
    blocked = run_module("nmo_maintenance", args(world, node, wait=False), cluster.kubeconfig)
    assert blocked["reached"] == ["maintenance"], blocked

    failed = run_module("nmo_maintenance", args(world, node, state="failed", error=blocked["msg"],
                                                reached=blocked["reached"]), cluster.kubeconfig)
    assert not failed.get("failed") and failed["rolled_back"], failed
    assert node_of(cluster, node)["spec"]["unschedulable"] is True, "an administrator's cordon was undone"
    lease = cluster.client.get(lease_store.leases_path(leases.LEASE_NAMESPACE, leases.node_lease_name(node)))
    assert lease["spec"]["holderIdentity"] == "node-healthcheck-x"
    nm = maintenance_of(cluster.client, node)
    assert nm["status"]["phase"] == "Failed" and "node-healthcheck-x" in nm["status"]["lastError"]


def test_missing_node_is_refused_with_nothing_created(cluster, world):
    missing = f"node-{world.id}-absent"
    refused = run_module("nmo_maintenance", args(world, missing), cluster.kubeconfig)
    assert refused.get("failed") and refused["msg"] == f'node "{missing}" not found in cluster', refused
    assert refused["reached"] == []
    assert maintenance_of(cluster.client, missing) is None


@pytest.mark.parametrize("module_args", [
    {"node": "x", "colour": "blue"},
    {"node": "x", "state": "sideways"},
    {"state": "absent"},
    {"node": "x", "concurrency": "two"},
], ids=["unknown option", "bad choice", "missing node", "bad type"])
def test_bad_input_reads_the_same_on_both_paths(cluster, module_args):
    here = run_module("nmo_maintenance", module_args, cluster.kubeconfig)
    shipped = run_module("nmo_maintenance", module_args, cluster.kubeconfig, env=SHIPPED)
    assert here.get("failed") and shipped.get("failed")
    assert here["msg"] == shipped["msg"], (here["msg"], shipped["msg"])


class Unauthorized(http.server.BaseHTTPRequestHandler):
    """An API server that refuses every token at once (a 401 is no transient failure: no retry)."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        body = b'{"kind": "Status", "status": "Failure", "reason": "Unauthorized", "code": 401}'
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: Any) -> None:
        pass


def test_a_secret_option_is_masked_on_both_paths(cluster):
    # an answer, not a refused connection: a refused one is retried for the client's whole retry
    # budget (60 s) on each path
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Unauthorized)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    secret = "s3cret-bearer-token-nmo"
    module_args = {"node": "x", "host": f"http://127.0.0.1:{server.server_address[1]}", "api_key": secret,
                   "validate_certs": False}
    try:
        for env in (None, SHIPPED):
            result = run_module("nmo_info", module_args, cluster.kubeconfig, env=env)
            assert result.get("failed") and "401" in str(result.get("msg")), result
            assert secret not in str({k: v for k, v in result.items() if k != "_stdout"})
            assert secret not in result["_stdout"]
            assert result["invocation"]["module_args"]["api_key"] == "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER", env
    finally:
        server.shutdown()
        server.server_close()


def live_run(cluster: Any, run_id: str, mode: str = "") -> None:
    """A run lease, valid for a minute, as a run's start leaves it (no heartbeat: the test is shorter)."""
    lease_store.ensure_namespace(cluster.client)
    runs.start(cluster.client, run_id, controller=f"test/{run_id}", mode=mode)


def test_a_node_another_live_run_holds_is_left_to_it_failed_or_skipped_as_asked(cluster, world):
    (node,) = world.add_nodes(workers=1)
    run_a, run_b = f"a-{world.id}", f"b-{world.id}"
    live_run(cluster, run_a)
    live_run(cluster, run_b)
    begun = run_module("nmo_maintenance", args(world, node, run_id=run_a, wait=False), cluster.kubeconfig)
    assert begun["changed"] and not begun.get("failed"), begun.get("msg")

    refused = run_module("nmo_maintenance", args(world, node, run_id=run_b, wait=False), cluster.kubeconfig)
    assert refused.get("failed") and refused["owner_run"] == run_a, refused
    skipped = run_module("nmo_maintenance", args(world, node, run_id=run_b, wait=False, when_owned="skip"),
                         cluster.kubeconfig)
    assert not skipped.get("failed") and not skipped["changed"], skipped
    assert (skipped["plan"], skipped["left_to"], skipped["reached"]) == ("skip-owned", run_a, []), skipped
    assert skipped["say"] == (f"{node} is in maintenance by run {run_a}, which is alive (its run lease is being "
                              "renewed): left to that run, not adopted.")
    assert skipped["outcome"] == f"skipped (in maintenance by run {run_a}, alive)"
    assert maintenance_of(cluster.client, node)["metadata"]["annotations"][leases.RUN_ANNOTATION] == run_a

    ended = run_module("nmo_maintenance", args(world, node, run_id=run_a, state="absent"), cluster.kubeconfig)
    assert ended["changed"] and not ended.get("failed"), ended.get("msg")
    wait_clean(cluster.client, [node])
    assert runs.stop(cluster.client, run_a) and runs.stop(cluster.client, run_b)


def test_the_mode_is_the_one_the_run_lease_says(cluster, world):
    """Given only the run id, the begin works in the mode the run's start wrote on its run lease."""
    (node,) = world.add_nodes(workers=1)
    run_id = f"op-{world.id}"
    live_run(cluster, run_id, mode="operator")
    begun = run_module("nmo_maintenance", args(world, node, run_id=run_id, wait=False), cluster.kubeconfig)
    assert not begun.get("failed") and begun["mode"] == "operator", begun
    assert node_clean(cluster.client, node) is None, "operator mode: the node is NMO's to cordon, not ours"
    ended = run_module("nmo_maintenance", args(world, node, run_id=run_id, state="absent"), cluster.kubeconfig)
    assert not ended.get("failed") and ended["mode"] == "operator", ended
    assert maintenance_of(cluster.client, node) is None
    assert leases_naming(cluster.client, [node], f"t{world.id}-slot") == []
    assert runs.stop(cluster.client, run_id)


def test_a_run_whose_start_checked_the_crd_has_its_begins_read_it_no_more(cluster, world):
    """The run's start checks the CRD once (nmo_run install_crd) and says so on its run lease; a
    begin of that run reads the lease, not the CRD. A run that did not check it: the begin does."""
    (node,) = world.add_nodes(workers=1)
    checked_run, plain_run = f"crd-{world.id}", f"nocrd-{world.id}"
    lease_store.ensure_namespace(cluster.client)
    runs.start(cluster.client, checked_run, controller=f"test/{checked_run}", mode="standalone", crd_checked=True)
    runs.start(cluster.client, plain_run, controller=f"test/{plain_run}", mode="standalone")
    assert runs.crd_checked(runs.read_lease(cluster.client, checked_run))
    assert not runs.crd_checked(runs.read_lease(cluster.client, plain_run))
    for run_id, reads_crd in ((plain_run, True), (checked_run, False)):
        begun = run_module("nmo_maintenance", args(world, node, run_id=run_id, wait=False, install_crd=True),
                           cluster.kubeconfig)
        assert not begun.get("failed"), begun.get("msg")
        assert ("crd" in begun) is reads_crd, begun
        assert ("get customresourcedefinitions" in begun["api_requests_by"]) is reads_crd, begun["api_requests_by"]
        ended = run_module("nmo_maintenance", args(world, node, run_id=run_id, state="absent"), cluster.kubeconfig)
        assert ended["changed"] and not ended.get("failed"), ended.get("msg")
        wait_clean(cluster.client, [node])
    assert runs.stop(cluster.client, checked_run) and runs.stop(cluster.client, plain_run)


def test_a_run_s_nodes_find_their_record_by_name_and_read_the_server_s_support_once(cluster, world):
    """Issue 32's request cost: the run's first begin reads /version (and on 1.37 /metrics) and
    keeps the verdict on the run lease, the second begin reads neither; the phases after the
    begin find the NodeMaintenance by its name, never by listing them all, and a phase of the
    run's own record is one request (docs/design.md §18.5)."""
    first, second = world.add_nodes(workers=2)
    run_id = f"cost-{world.id}"
    lease_store.ensure_namespace(cluster.client)
    runs.start(cluster.client, run_id, controller=f"test/{run_id}", mode="standalone", duration=600)
    begun = [run_module("nmo_maintenance", args(world, node, run_id=run_id, wait=False, concurrency=2),
                        cluster.kubeconfig) for node in (first, second)]
    assert not any(b.get("failed") for b in begun), [b.get("msg") for b in begun]
    assert "get /version" in begun[0]["api_requests_by"], begun[0]["api_requests_by"]
    assert not {"get /version", "get /metrics"} & set(begun[1]["api_requests_by"]), begun[1]["api_requests_by"]
    said = runs.node_conditions_of(runs.read_lease(cluster.client, run_id))
    assert said is not None and said[0] is begun[0]["node_conditions"]["active"], (said, begun[0])
    assert begun[1]["node_conditions"]["active"] is said[0], begun[1]

    gate = run_module("nmo_progress", {"node": first, "phase": "gate", "run_id": run_id}, cluster.kubeconfig)
    assert gate["record"]["phase"] == "gate" and gate["record"]["held"] == "all", gate
    assert gate["api_requests_by"] == {"patch nodemaintenances/status": 1}, gate["api_requests_by"]
    drained = run_module("nmo_drain", {"node": first, "run_id": run_id, "held_leases": "none"},
                         cluster.kubeconfig)
    assert not drained.get("failed"), drained.get("msg")
    assert maintenance_of(cluster.client, first)["status"]["progress"]["phase"] == "drain"
    ended = [run_module("nmo_maintenance", args(world, node, run_id=run_id, state="absent", concurrency=2),
                        cluster.kubeconfig) for node in (first, second)]
    assert all(e["changed"] and not e.get("failed") for e in ended), [e.get("msg") for e in ended]
    for result in [drained, *ended]:
        assert "list nodemaintenances" not in result["api_requests_by"], result["api_requests_by"]
        assert result["api_requests_by"].get("get nodemaintenances", 0) == 0, result["api_requests_by"]
    wait_clean(cluster.client, [first, second])
    assert runs.stop(cluster.client, run_id)
