"""Credentials that change under a run: an exec plugin's token revoked during a long work hook.

The plugin is a real executable: it asks the API server for a ServiceAccount token
(TokenRequest, ``kubectl create token``) and says it expires in two minutes (less than the
five minutes the ``kubernetes`` package took for expired already). The test revokes every
token handed out so far by deleting the ServiceAccount and making it again (a token is bound
to the account's uid), while the node is in its work hook; the run's heartbeat meets 401,
runs the plugin again and keeps the run alive. The ServiceAccount is bound to the shipped
RBAC only (meta/rbac/)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest
import yaml
from helpers import run_module
from topology import wait_for

from .maintenance_support import (
    LEASES,
    NM_API,
    RBAC,
    RBAC_API,
    ROLES,
    RestrictedUser,
    Run,
    run_tasks,
    wait_clean,
    wait_run_gone,
    write_inventory,
)

pytestmark = [pytest.mark.cluster]

START = "Run | Start this run (id, run lease, heartbeat on the controller)"
LIFE = 120  # seconds the plugin says its credential lives
NAMESPACE = "default"


def service_account(cluster: Any, name: str) -> None:
    cluster.client.post(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts",
                        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}})


def bind_shipped_rbac(cluster: Any, name: str) -> List[str]:
    """The ServiceAccount bound as docs/rbac.md binds a user: ClusterRole nmo-maintenance, the two Roles."""
    applied = cluster.kubectl("apply", "-f", str(RBAC), check=False)
    assert applied.returncode == 0, applied.stderr
    subject = [{"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}]
    made = []
    for kind, role, where in [("ClusterRole", "nmo-maintenance", None),
                              *[("Role", r, ns) for r, ns in ROLES.items()]]:
        collection = f"{RBAC_API}/clusterrolebindings" if where is None else f"{RBAC_API}/namespaces/{where}/rolebindings"
        cluster.client.post(collection, {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": f"{kind}Binding", "metadata": {"name": f"{name}-{role}"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role}, "subjects": subject})
        made.append(f"{collection}/{name}-{role}")
    return made


def exec_kubeconfig(cluster: Any, folder: Path, account: str) -> str:
    """A kubeconfig whose user is an exec plugin handing out the account's tokens; every run
    of the plugin is logged (the PID of the process that ran it, the time) to plugin.log."""
    plugin = folder / "get-token"
    plugin.write_text(f"""#!{sys.executable}
import datetime, json, os, subprocess, time
token = subprocess.run([{cluster.bin + '/kubectl'!r}, "--kubeconfig", {cluster.kubeconfig!r}, "create", "token",
                        {account!r}, "-n", {NAMESPACE!r}, "--duration=3600s"],
                       capture_output=True, text=True, check=True).stdout.strip()
with open({str(folder / 'plugin.log')!r}, "a") as log:
    log.write(json.dumps({{"pid": os.getppid(), "at": time.time()}}) + "\\n")
end = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds={LIFE})
print(json.dumps({{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {{"token": token, "expirationTimestamp": end.strftime("%Y-%m-%dT%H:%M:%SZ")}}}}))
""")
    plugin.chmod(0o755)
    admin = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "sa",
           "clusters": admin["clusters"][:1],
           "users": [{"name": account, "user": {"exec": {
               "apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin), "interactiveMode": "Never"}}}],
           "contexts": [{"name": "sa", "context": {"cluster": admin["clusters"][0]["name"], "user": account}}]}
    path = folder / "exec.kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def plugin_runs(folder: Path) -> List[Dict[str, float]]:
    log = folder / "plugin.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def stale_run_lease(cluster: Any, name: str) -> None:
    """The run lease of a run that is gone: its heartbeat never deleted it, it lapsed long ago."""
    cluster.client.post(LEASES, {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "nmo.maintenance",
                                              "app.kubernetes.io/component": "run"}},
        "spec": {"holderIdentity": name.removeprefix("nmo-run-"), "leaseDurationSeconds": 60,
                 "acquireTime": "2026-01-01T00:00:00.000000Z", "renewTime": "2026-01-01T00:00:00.000000Z"}})


def test_a_revoked_exec_token_is_fetched_again_and_the_long_hook_finishes(cluster, world, crd_installed, tmp_path):
    (node,) = world.add_nodes(workers=1)
    account = f"nmo-exec-{world.id}"
    service_account(cluster, account)
    bindings = bind_shipped_rbac(cluster, account)
    gone = f"nmo-run-gone-{world.id}"
    stale_run_lease(cluster, gone)
    kubeconfig = exec_kubeconfig(cluster, tmp_path, account)
    (tmp_path / "work.yml").write_text(json.dumps([
        {"name": "work started", "ansible.builtin.copy": {"dest": str(tmp_path / "started"), "content": "x"}},
        {"name": "work until the test releases it",
         "ansible.builtin.wait_for": {"path": str(tmp_path / "release"), "timeout": 600}}]))
    inventory = write_inventory(world, tmp_path)
    playbook = Run("maintenance.yml", inventory, kubeconfig, args=["-l", node],
                   extra_vars={"node_maintenance_hooks_work": [str(tmp_path / "work.yml")]},
                   env={"NMO_EXEC_CREDENTIAL_CACHE": str(tmp_path / "credentials")})
    try:
        wait_for((tmp_path / "started").exists, 300, "the run in its work hook")
        start = playbook.last(START)
        assert start is not None, playbook.output[-3000:]
        heartbeat = start["result"]["heartbeat_pid"]
        assert gone in start["result"]["removed_run_leases"], start["result"]
        run_lease = f"{LEASES}/nmo-run-{start['result']['run']}"
        # every token handed out so far is revoked: the account is made again with a new uid
        cluster.client.delete(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{account}")
        wait_for(lambda: cluster.client.get_or_none(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{account}")
                 is None, 30, "the ServiceAccount deleted")
        service_account(cluster, account)
        revoked = time.time()
        before = cluster.client.get(run_lease)["spec"]["renewTime"]
        wait_for(lambda: any(r["pid"] == heartbeat and r["at"] > revoked for r in plugin_runs(tmp_path)), 60,
                 "the heartbeat to run the plugin again after its token was refused")
        wait_for(lambda: cluster.client.get(run_lease)["spec"]["renewTime"] != before, 60,
                 "the heartbeat to renew the run lease with the new token")
        (tmp_path / "release").touch()
        assert playbook.wait(600) == 0, playbook.output[-4000:]
        # the heartbeat deletes the run lease once ansible-playbook is gone (with the account's token)
        wait_run_gone(cluster.client, start["result"]["run"], 60)
    finally:
        if playbook.proc.poll() is None:
            playbook.kill()
        playbook.close()
        for binding in bindings:
            cluster.client.delete(binding)
        cluster.client.delete(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{account}")
    wait_clean(cluster.client, [node])
    names = [lease["metadata"]["name"] for lease in cluster.client.get(LEASES).get("items", [])]
    assert not [n for n in names if n in (gone, f"nmo-run-{start['result']['run']}")], names
    # The plugin runs at most once in its credential's life in the whole run (its many
    # processes share the credential through the user's file, readable by the user alone), but
    # for the one run that followed the revocation (a 401 within the life of the refused one).
    runs = plugin_runs(tmp_path)
    times = sorted(r["at"] for r in runs)
    early = [b for a, b in zip(times, times[1:]) if b - a < LIFE - 10 and not a < revoked < b]
    assert not early, f"the run ran the plugin again within its credential's life: {runs}"
    assert not [p for p in (tmp_path / "credentials").iterdir() if p.suffix == ".json" and p.stat().st_mode & 0o077]
    by_pid: Dict[int, List[float]] = {}
    for r in runs:
        by_pid.setdefault(int(r["pid"]), []).append(r["at"])
    # The heartbeat starts with the credential of the process it was forked from (nmo_run's,
    # obtained at the earliest at the run's first plugin run); it ran the plugin after the
    # revocation while that credential was still within its life: because of the 401.
    first = min(r["at"] for r in runs)
    refetch = [at for at in by_pid.get(heartbeat, []) if at > revoked]
    assert refetch and refetch[0] - first < LIFE - 10, \
        f"the heartbeat did not run the plugin again on a 401, within the credential's life: {runs}"


def test_a_heartbeat_that_cannot_renew_says_why_and_the_failure_that_follows_names_it(
        cluster, world, crd_installed, tmp_path):
    """The run's user may read leases but no longer write them (403) while the node waits in a
    task: the heartbeat says so in the NodeMaintenance, the next module warns on the console,
    and once the run lease has lapsed the module that finds it says why."""
    (node,) = world.add_nodes(workers=1)
    run_id = f"t{world.id}-hb"
    # the role's Ready step: a read-only wait that asks the run's guard (run lease, node lease, slot)
    ready = {"node": node, "wait_ready": True, "ready_timeout": 60, "run_id": run_id, "held_leases": "all",
             "events_limit": 0}
    tasks = [
        {"name": "start", "nmo.maintenance.nmo_run": {"run_id": run_id}},
        {"name": "begin", "nmo.maintenance.nmo_maintenance": {"node": node, "run_id": run_id, "wait": True,
                                                              "slot_prefix": f"t{world.id}-slot"}},
        {"name": "started", "ansible.builtin.copy": {"dest": str(tmp_path / "started"), "content": "x"}},
        {"name": "hold", "ansible.builtin.wait_for": {"path": str(tmp_path / "release-1"), "timeout": 300}},
        {"name": "look", "nmo.maintenance.nmo_info": ready},
        {"name": "hold again", "ansible.builtin.wait_for": {"path": str(tmp_path / "release-2"), "timeout": 300}},
        {"name": "look again", "nmo.maintenance.nmo_info": ready, "ignore_errors": True}]
    readers = f"{RBAC_API}/namespaces/medik8s-leases/roles"
    with RestrictedUser(cluster, tmp_path) as user:
        cluster.client.post(readers, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                                      "metadata": {"name": f"{user.name}-read"},
                                      "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                                                 "verbs": ["get", "list", "watch"]}]})
        user._bind(f"{RBAC_API}/namespaces/medik8s-leases/rolebindings", f"{user.name}-read", "Role",
                   f"{user.name}-read", [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user.name}])
        playbook = run_tasks(tmp_path, "held", tasks, user.kubeconfig)
        try:
            wait_for(lambda: (tmp_path / "started").exists() or playbook.proc.poll() is not None, 180,
                     "the run holding its node")
            begun = playbook.last("begin")
            assert begun and not begun["result"].get("failed"), playbook.output[-3000:]
            nm = begun["result"]["maintenance"]["name"]
            cluster.client.delete(user.bindings[1])  # the shipped Role on medik8s-leases: reads only, from now
            wait_for(lambda: not user.can("update", "leases", "medik8s-leases"), 30, "the lease writes revoked")
            wait_for(lambda: "it is forbidden (403)" in (cluster.client.get(f"{NM_API}/{nm}").get("status") or {})
                     .get("lastError", ""), 60, "the heartbeat to say why it cannot renew, in the NodeMaintenance")
            said = cluster.client.get(f"{NM_API}/{nm}")["status"]["lastError"]
            assert said.startswith(f"run {run_id}: the run's heartbeat cannot renew the run's leases since "), said
            (tmp_path / "release-1").touch()
            wait_for(lambda: playbook.last("look") is not None, 120, "the next module of the run")
            looked = playbook.last("look")["result"]
            assert not looked.get("failed"), looked.get("msg")
            assert any("the run's heartbeat cannot renew the run's leases since" in w and "it is forbidden (403)" in w
                       for w in looked.get("warnings", [])), looked.get("warnings")
            # the run lease lapses (as it would 60 s after its last renewal)
            lease = f"{LEASES}/nmo-run-{run_id}"
            cluster.client.patch(lease, {"spec": {"renewTime": "2026-01-01T00:00:00.000000Z"}}, "merge")
            (tmp_path / "release-2").touch()
            playbook.wait(180)
            stopped = playbook.last("look again")["result"]
            assert stopped.get("failed") and f"its run lease medik8s-leases/nmo-run-{run_id} is gone or expired " \
                "(the run's heartbeat cannot renew the run's leases since" in stopped["msg"], stopped.get("msg")
            assert "it is forbidden (403)" in stopped["msg"] and "the controller died" not in stopped["msg"]
        finally:
            if playbook.proc.poll() is None:
                playbook.kill()
            playbook.close()
            cluster.client.delete(f"{readers}/{user.name}-read")
    recovered = run_module("nmo_recover", {"nodes": [node]}, cluster.kubeconfig)
    assert not recovered.get("failed"), recovered.get("msg")
