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
from topology import wait_for

from .maintenance_support import LEASES, RBAC, RBAC_API, ROLES, Run, wait_clean, write_inventory

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


def test_a_revoked_exec_token_is_fetched_again_and_the_long_hook_finishes(cluster, world, tmp_path):
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
                   extra_vars={"node_maintenance_hooks_work": [str(tmp_path / "work.yml")]})
    try:
        wait_for((tmp_path / "started").exists, 300, "the run in its work hook")
        start = playbook.last(START)
        assert start is not None, playbook.output[-3000:]
        heartbeat = start["result"]["heartbeat_pid"]
        assert start["result"]["removed_run_leases"] == [gone], start["result"]
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
    # The plugin runs at most once in its credential's life in each process, but for the one
    # run that followed the revocation (a 401 within the life of the refused credential).
    runs = plugin_runs(tmp_path)
    by_pid: Dict[int, List[float]] = {}
    for r in runs:
        by_pid.setdefault(int(r["pid"]), []).append(r["at"])
    for pid, times in by_pid.items():
        early = [b for a, b in zip(times, times[1:]) if b - a < LIFE - 10 and not a < revoked < b]
        assert not early, f"process {pid} ran the plugin again within its credential's life: {times}"
    beats = by_pid[heartbeat]
    refetch = [b for a, b in zip(beats, beats[1:]) if a < revoked < b]
    assert refetch and refetch[0] - beats[0] < LIFE - 10, \
        f"the heartbeat did not run the plugin again on a 401, within the credential's life: {beats}"
