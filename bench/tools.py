"""The tools under comparison, each run as its own API user so the audit log tells them apart.

- ``nmo``: this collection (nmo_cordon + nmo_drain, or playbooks/maintenance.yml), user bench-nmo
- ``kubectl``: the kubectl built with the cluster, user bench-kubectl
- ``k8s_drain``: kubernetes.core.k8s_drain from the ``ansible`` package, user bench-k8s-drain
- ``nmo_operator`` (B7 only): the Node Maintenance Operator v0.17.0 (hack/medik8s), as its
  ServiceAccount (bench/peer_operator.py)
Every Ansible run uses the benchmark's own virtual environment (bench/.venv), so ours and
kubernetes.core run on the same ansible-core and Python.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional

import yaml
from measure import Run, become_subreaper, run_measured

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
PLAYBOOKS = BENCH / "playbooks"
VENV_BIN = Path(sys.executable).parent

NMO, KUBECTL, K8S_DRAIN = "nmo", "kubectl", "k8s_drain"
OPERATOR = "nmo_operator"  # B7: the Node Maintenance Operator itself, as its ServiceAccount (peer_operator.py)
USERS = {NMO: "bench-nmo", KUBECTL: "bench-kubectl", K8S_DRAIN: "bench-k8s-drain"}
LABELS = {NMO: "nmo.maintenance", KUBECTL: "kubectl drain", K8S_DRAIN: "k8s_drain", OPERATOR: "NMO v0.17.0"}


def slowest_tasks(stdout: str) -> List[str]:
    """The recap of ansible.posix.profile_tasks: the slowest tasks, summed over hosts."""
    lines = stdout.splitlines()
    marks = [i for i, line in enumerate(lines) if line.startswith("TASKS RECAP")]
    if not marks:
        return []
    found = []
    for line in lines[marks[-1] + 3:]:
        if not line.strip():
            break
        name, _sep, seconds = line.rpartition(" ")
        found.append(f"{name.rstrip(' -')}: {seconds}")
    return found


def cluster_env() -> Dict[str, str]:
    out = subprocess.run([str(ROOT / "hack" / "cluster"), "env"], capture_output=True, text=True, check=True).stdout
    found = {}
    for line in out.splitlines():
        if line.startswith("export ") and "=" in line and "$PATH" not in line:
            key, value = line[len("export "):].split("=", 1)
            found[key] = value.strip("'\"")
    return found


def set_node_lease(seconds: int, lengthen: bool) -> None:
    """Restart kwok and the controller manager with the nodes' lease at ``seconds`` (hack/cluster
    NMO_CLUSTER_NODE_LEASE_SECONDS). The controller manager's grace period grows first and
    shrinks last, so that no node is judged NotReady in between."""
    order = ["kube-controller-manager", "kwok"] if lengthen else ["kwok", "kube-controller-manager"]
    env = {**os.environ, "NMO_CLUSTER_NODE_LEASE_SECONDS": str(seconds)}
    become_subreaper(False)  # the restarted components are the cluster's, not this harness's children
    try:
        for component in order:
            subprocess.run([str(ROOT / "hack" / "cluster"), "restart", component], env=env, check=True,
                           capture_output=True, text=True)
            if component == "kwok":
                wait_node_leases(env["KUBECONFIG"] if "KUBECONFIG" in env else cluster_env()["KUBECONFIG"], seconds)
    finally:
        become_subreaper(True)


def wait_node_leases(kubeconfig: str, seconds: int, timeout: float = 300) -> None:
    """Until kwok holds a Lease of ``seconds`` for every node (hack/cluster deleted the old
    ones): only then may the controller manager's grace period shrink."""
    from topology import wait_for

    from ansible_collections.nmo.maintenance.plugins.module_utils.api.client import ConnectionOptions, connect

    client = connect(ConnectionOptions(kubeconfig=kubeconfig))
    page = client.get("/api/v1/nodes", {"limit": 1})
    nodes = len(page.get("items") or []) + int((page.get("metadata") or {}).get("remainingItemCount") or 0)

    def renewed() -> bool:
        leases = client.get("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases").get("items", [])
        return sum(1 for lease in leases if (lease.get("spec") or {}).get("leaseDurationSeconds") == seconds) >= nodes

    wait_for(renewed, timeout, f"a {seconds} s Lease for each of the {nodes} nodes", interval=2.0)


DRAIN_TASK = "Drain | Evict the pods (PodDisruptionBudgets respected)"  # the role's drain task


def requests_by_task(records: List[Dict[str, Any]]) -> Dict[str, Dict[str, int]]:
    """What each task asked of the API server, summed over hosts, from the modules' own
    ``api_requests_by`` (``verb resource``): where a rollout's requests go."""
    found: Dict[str, Dict[str, int]] = {}
    for record in records:
        counts = (record.get("result") or {}).get("api_requests_by")
        if isinstance(counts, dict) and counts:
            task = found.setdefault(record.get("task", "?"), {})
            for what, count in counts.items():
                task[what] = task.get(what, 0) + int(count)
    return found


def task_results(records: List[Dict[str, Any]]) -> Dict[str, Dict[str, int]]:
    """Each host's task results by status (ok, failed, skipped, ...), from the nmo_record
    callback: one result a task and host, so a task delegated to localhost counts for the
    node it runs for, and an include, which has no result, does not count."""
    found: Dict[str, Dict[str, int]] = {}
    for record in records:
        host = found.setdefault(str(record.get("host", "?")), {})
        status = str(record.get("status", "?"))
        host[status] = host.get(status, 0) + 1
    return found


@dataclass
class Tools:
    cluster: Dict[str, str]
    identities: Path

    def __post_init__(self) -> None:
        self.identities.mkdir(parents=True, exist_ok=True)
        self.kubeconfigs = {tool: str(self.identities / f"{user}.kubeconfig") for tool, user in USERS.items()}
        for tool, user in USERS.items():
            subprocess.run([str(ROOT / "hack" / "user-kubeconfig"), user, "system:masters", self.kubeconfigs[tool]],
                           check=True, capture_output=True, text=True)
        self.kubectl = str(Path(self.cluster["NMO_CLUSTER_BIN"]) / "kubectl")
        self.python = sys.executable

    # -- environments -----------------------------------------------------------------------
    def ansible_env(self, tool: str, record: str) -> Dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "K8S_AUTH_"))}
        env["PATH"] = str(VENV_BIN) + os.pathsep + env.get("PATH", "")
        env.update({
            "ANSIBLE_COLLECTIONS_PATH": str(ROOT / ".cache" / "collections"),
            "ANSIBLE_CALLBACK_PLUGINS": str(ROOT / "tests" / "plugins" / "callback"),
            "ANSIBLE_CALLBACKS_ENABLED": "nmo_record,ansible.posix.profile_tasks",
            "PROFILE_TASKS_TASK_OUTPUT_LIMIT": "12",
            "NMO_RECORD_FILE": record,
            "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
            "ANSIBLE_HOST_KEY_CHECKING": "False",
            "ANSIBLE_RETRY_FILES_ENABLED": "False",
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_LOCALHOST_WARNING": "False",
            "ANSIBLE_INVENTORY_UNPARSED_WARNING": "False",
            "ANSIBLE_LOCAL_TEMP": str(self.identities.parent / "ansible-tmp"),
            "K8S_AUTH_KUBECONFIG": self.kubeconfigs[tool],
        })
        return env

    def playbook(self, tool: str, playbook: Path, args: List[str], timeout: float, **kw: Any) -> Run:
        """ansible-playbook with the tool's identity; the task results land in ``run.extra['records']``."""
        with tempfile.TemporaryDirectory() as tmp:
            record = Path(tmp) / "records.jsonl"
            argv = [str(VENV_BIN / "ansible-playbook"), str(playbook), *args]
            run = run_measured(argv, self.ansible_env(tool, str(record)), timeout, cwd=str(ROOT), **kw)
            records = [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []
        run.extra["records"] = records
        run.extra["tasks"] = len(records)
        run.extra["task_results"] = task_results(records)
        run.extra["requests_by_task"] = requests_by_task(records)
        run.extra["slowest_tasks"] = slowest_tasks(run.stdout)
        return run

    def shell(self, tool: str, script: str, timeout: float, cwd: Optional[str] = None) -> Run:
        """``script`` under /bin/sh with the tool's Ansible environment (B11: several playbooks at
        once, measured as one tree); the task results are not recorded."""
        env = self.ansible_env(tool, os.devnull)
        env["ANSIBLE_CALLBACKS_ENABLED"] = "ansible.posix.profile_tasks"
        return run_measured(["/bin/sh", "-c", script], env, timeout, cwd=cwd or str(ROOT))

    # -- one node's drain (B1-B3) -----------------------------------------------------------------
    def drain(self, tool: str, node: str, timeout: float, **kw: Any) -> Run:
        if tool == KUBECTL:
            argv = [self.kubectl, "--kubeconfig", self.kubeconfigs[KUBECTL], "drain", node, "--ignore-daemonsets",
                    "--delete-emptydir-data", "--force", f"--timeout={int(timeout)}s"]
            env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
            return run_measured(argv, env, timeout + 30, **kw)
        book = PLAYBOOKS / ("nmo_drain.yml" if tool == NMO else "k8s_drain.yml")
        run = self.playbook(tool, book, ["-i", "localhost,", "-c", "local", "-e", f"node={node}",
                                         "-e", f"drain_timeout={int(timeout)}"], timeout + 60, **kw)
        drained = [r for r in run.extra["records"] if r["task"] == "Drain"]
        if tool == NMO and drained:
            result = drained[-1]["result"]
            run.extra["module_elapsed"] = result.get("elapsed")
            run.extra["module_api_requests"] = result.get("api_requests")
            run.extra["eviction_retries"] = result.get("eviction_retries")
        if drained:
            run.extra["msg"] = str(drained[-1]["result"].get("msg", ""))[:300]
        return run

    # -- rolling maintenance (B4, B5) -------------------------------------------------------------
    def rollout(self, tool: str, inventory: str, limit: str, timeout: float, node: Optional[str] = None,
                extra_vars: Optional[Dict[str, Any]] = None) -> Run:
        if tool == KUBECTL:
            assert node, "kubectl maintains one named node"
            kubectl = f"{self.kubectl} --kubeconfig {self.kubeconfigs[KUBECTL]}"
            script = (f"{kubectl} drain {node} --ignore-daemonsets --delete-emptydir-data --force "
                      f"--timeout={int(timeout)}s && {kubectl} uncordon {node}")
            env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
            return run_measured(["/bin/sh", "-c", script], env, timeout + 30)
        book = ROOT / "playbooks" / "maintenance.yml" if tool == NMO else PLAYBOOKS / "k8s_drain_rollout.yml"
        args = ["-i", inventory, "-l", limit] + (["-e", json.dumps(extra_vars)] if extra_vars else [])
        run = self.playbook(tool, book, args, timeout)
        if tool == NMO:
            drains = [r["result"] for r in run.extra["records"] if r["task"].endswith(DRAIN_TASK)]
            run.extra["drains"] = len(drains)
            run.extra["drain_elapsed"] = round(sum(float(d.get("elapsed") or 0) for d in drains), 2)
        else:
            drains = [r for r in run.extra["records"] if r["task"] == "Drain"]
            run.extra["drain_attempts"] = sum(int(r["result"].get("attempts", 1)) for r in drains)
        return run

    # -- versions -------------------------------------------------------------------------------
    def versions(self) -> Dict[str, Any]:
        found: Dict[str, Any] = {}
        out = subprocess.run([self.kubectl, "--kubeconfig", self.kubeconfigs[KUBECTL], "version", "-o", "json"],
                             capture_output=True, text=True, check=False)
        try:
            data = json.loads(out.stdout)
            found["kubectl"] = data.get("clientVersion", {}).get("gitVersion")
            found["kubernetes_server"] = data.get("serverVersion", {}).get("gitVersion")
        except ValueError:
            found["kubectl"] = out.stdout.strip() or out.stderr.strip()
        from importlib.metadata import version

        for package in ("ansible", "ansible-core", "kubernetes"):
            found[f"pypi:{package}"] = version(package)
        import ansible

        manifest = Path(ansible.__file__).parent.parent / "ansible_collections" / "kubernetes" / "core" / "MANIFEST.json"
        found["kubernetes.core"] = json.loads(manifest.read_text())["collection_info"]["version"]
        galaxy = yaml.safe_load((ROOT / "galaxy.yml").read_text())
        found["nmo.maintenance"] = galaxy["version"]
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=False)
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain"], capture_output=True, text=True,
                               check=False)
        found["nmo.maintenance_commit"] = head.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")
        return found
