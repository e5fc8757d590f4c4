"""What the role's end-to-end tests share: a least-privilege user, inventories, a playbook
run that can be watched and killed, and watchers that record the cluster over time."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Set, Tuple

import yaml
from helpers import ansible_env
from topology import WORLD_LABEL, pod_ready, wait_for

from ansible_collections.nmo.maintenance.plugins.module_utils.api.client import ConnectionOptions, connect
from ansible_collections.nmo.maintenance.plugins.module_utils.api.waiter import Watcher
from ansible_collections.nmo.maintenance.plugins.module_utils.stores import maintenance

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOKS = ROOT / "playbooks"
NM_API = "/apis/nodemaintenance.medik8s.io/v1beta1/nodemaintenances"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/medik8s-leases/leases"
DRAIN_TAINT = "medik8s.io/drain"
LABEL = "remediation.medik8s.io/exclude-from-remediation"
FLOWCONTROL = "/apis/flowcontrol.apiserver.k8s.io/v1"


# -- the least-privilege user -----------------------------------------------------------------
RBAC = ROOT / "meta" / "rbac"
RBAC_API = "/apis/rbac.authorization.k8s.io/v1"
# The shipped Roles and where they live (meta/rbac/role-*.yml).
ROLES = {"nmo-maintenance-leases": "medik8s-leases", "nmo-maintenance-events": "default"}


class RestrictedUser:
    """A user with a client certificate from the cluster's CA, bound only to the shipped RBAC
    (every file of meta/rbac/ applied as docs/rbac.md says): the nmo-maintenance ClusterRole
    and the two Roles, plus any of the opt-in ClusterRoles named in ``extra_cluster_roles``."""

    def __init__(self, cluster: Any, directory: Path, extra_cluster_roles: Tuple[str, ...] = ()) -> None:
        self.cluster = cluster
        self.name = f"nmo-e2e-{uuid.uuid4().hex[:6]}"
        self.kubeconfig = str(directory / f"{self.name}.kubeconfig")
        self.cluster_roles = ("nmo-maintenance", *extra_cluster_roles)
        self.bindings: List[str] = []

    def __enter__(self) -> RestrictedUser:
        applied = self.cluster.kubectl("apply", "-f", str(RBAC), check=False)
        assert applied.returncode == 0, f"kubectl apply -f meta/rbac/ failed: {applied.stderr}"
        subprocess.run([str(ROOT / "hack" / "user-kubeconfig"), self.name, "-", self.kubeconfig],
                       check=True, capture_output=True, text=True)
        subject = [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": self.name}]
        for role in self.cluster_roles:
            self._bind(f"{RBAC_API}/clusterrolebindings", f"{self.name}-{role}", "ClusterRole", role, subject)
        for role, namespace in ROLES.items():
            self._bind(f"{RBAC_API}/namespaces/{namespace}/rolebindings", f"{self.name}-{role}", "Role", role, subject)
        wait_for(lambda: self.can("patch", "nodes") and self.can("update", "leases", "medik8s-leases")
                 and self.can("create", "events", "default"), 30, f"RBAC for {self.name} in effect")
        return self

    def _bind(self, collection: str, name: str, kind: str, role: str, subjects: List[Dict[str, Any]]) -> None:
        self.cluster.client.post(collection, {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": f"{kind}Binding", "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role}, "subjects": subjects})
        self.bindings.append(f"{collection}/{name}")

    def can(self, verb: str, resource: str, namespace: Optional[str] = None, name: Optional[str] = None) -> bool:
        """kubectl auth can-i as this user (the API server answers a SubjectAccessReview); namespace
        "*" asks about every namespace at once, None about kubectl's default namespace."""
        resource, _slash, subresource = resource.partition("/")  # pods/eviction
        target = f"{resource}/{name}" if name else resource
        where = ["--all-namespaces"] if namespace == "*" else ["-n", namespace] if namespace else []
        where += [f"--subresource={subresource}"] if subresource else []
        out = self.cluster.kubectl("auth", "can-i", verb, target, *where, "--as", self.name, check=False)
        return out.stdout.strip() == "yes"

    def __exit__(self, *exc: Any) -> None:
        for binding in self.bindings:
            try:
                self.cluster.client.delete(binding)
            except Exception as error:  # already gone
                if getattr(error, "status", None) != 404:
                    raise


# -- inventories --------------------------------------------------------------------------------
def slot_prefix(world: Any) -> str:
    return f"t{world.id}-slot"


def write_inventory(world: Any, directory: Path, **host_vars: Any) -> str:
    """workers and control_plane groups of the world's nodes, local connection, the world's
    own etcd pods and maintenance slots (the cluster is shared with other test runs)."""
    inventory = {"all": {
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                 "node_maintenance_slot_prefix": slot_prefix(world),
                 "node_maintenance_etcd_pod_selector": f"component=etcd,{WORLD_LABEL}={world.id}",
                 **host_vars},
        "children": {"workers": {"hosts": {n: None for n in world.workers}},
                     "control_plane": {"hosts": {n: None for n in world.control_planes}}}}}
    path = directory / f"inventory-{world.id}.yml"
    path.write_text(yaml.safe_dump(inventory, sort_keys=False))
    return str(path)


# -- a playbook run that can be watched and killed ---------------------------------------------------
class Run:
    """ansible-playbook in its own process group; its output is collected line by line."""

    def __init__(self, playbook: str, inventory: str, kubeconfig: str, args: Optional[List[str]] = None,
                 extra_vars: Optional[Dict[str, Any]] = None, env: Optional[Dict[str, str]] = None) -> None:
        self._tmp = tempfile.TemporaryDirectory()
        self.record_file = Path(self._tmp.name) / "records.jsonl"
        cmd = [str(Path(sys.executable).parent / "ansible-playbook"), str(PLAYBOOKS / playbook), "-i", inventory,
               *(args or [])]
        if extra_vars:
            cmd += ["-e", json.dumps(extra_vars)]
        e = ansible_env(kubeconfig, {"NMO_RECORD_FILE": str(self.record_file), **(env or {})})
        self.lines: List[str] = []
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=e,
                                     cwd=str(ROOT), start_new_session=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait(self, timeout: Optional[float] = None) -> int:
        rc = self.proc.wait(timeout)
        self._reader.join()
        return rc

    def kill(self) -> None:
        """SIGKILL to the whole process group: ansible-playbook and its workers."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.wait()

    def records(self) -> List[Dict[str, Any]]:
        if not self.record_file.exists():
            return []
        records = []
        for line in self.record_file.read_text().splitlines():
            try:
                records.append(json.loads(line))
            except ValueError:  # the line being written as we read
                continue
        return records

    def task(self, name: str) -> List[Dict[str, Any]]:
        """The results of the task called ``name`` (without the role's prefix)."""
        return [r for r in self.records() if r["task"].split(" : ")[-1] == name]

    def last(self, name: str) -> Optional[Dict[str, Any]]:
        """The latest result of the task called ``name``, None before it has one."""
        found = self.task(name)
        return found[-1] if found else None

    def close(self) -> None:
        self._tmp.cleanup()


def run(playbook: str, inventory: str, kubeconfig: str, **kwargs: Any) -> Run:
    r = Run(playbook, inventory, kubeconfig, **kwargs)
    r.wait()
    return r


def run_tasks(directory: Path, name: str, tasks: List[Dict[str, Any]], kubeconfig: str) -> Run:
    """``tasks`` on localhost, a playbook of their own, started in the background."""
    playbook = directory / f"{name}.yml"
    playbook.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]))
    return Run(str(playbook), "localhost,", kubeconfig, args=["-c", "local"])


# -- watchers -------------------------------------------------------------------------------------------
def in_maintenance(node: Dict[str, Any]) -> bool:
    taints = node.get("spec", {}).get("taints") or []
    return bool(node.get("spec", {}).get("unschedulable")) or any(t.get("key") == DRAIN_TAINT for t in taints)


class WatchRecorder(threading.Thread):
    """Looks at a watched collection after every batch of events, until the block ends."""

    def __init__(self, watcher: Watcher) -> None:
        super().__init__(daemon=True)
        self.watcher = watcher
        self._done = threading.Event()

    def _look(self) -> None:
        raise NotImplementedError

    def _saw(self, events: List[Any]) -> None:
        """Each batch of events itself, before the look (what came and went within it)."""

    def run(self) -> None:
        self._look()
        while not self._done.is_set():
            self._saw(self.watcher.drain_events(0.2))
            self._look()

    def __enter__(self) -> WatchRecorder:
        self.watcher.start()
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._done.set()
        self.join()
        self.watcher.close()


class NodeRecorder(WatchRecorder):
    """Which of the world's nodes are cordoned or drain-tainted, after every watch event."""

    def __init__(self, client: Any, world: Any) -> None:
        super().__init__(Watcher(client, "/api/v1/nodes", {"labelSelector": f"{WORLD_LABEL}={world.id}"}))
        self.history: List[Set[str]] = []
        self.order: List[str] = []

    def _look(self) -> None:
        now = {o["metadata"]["name"] for o in self.watcher.objects.values() if in_maintenance(o)}
        if not self.history or self.history[-1] != now:
            self.history.append(now)
        for name in sorted(now):
            if name not in self.order:
                self.order.append(name)

    @property
    def most_at_once(self) -> int:
        return max((len(s) for s in self.history), default=0)


class AvailabilityRecorder(WatchRecorder):
    """The fewest Ready, not terminating pods of each app in a namespace, over the run."""

    def __init__(self, client: Any, namespace: str) -> None:
        super().__init__(Watcher(client, f"/api/v1/namespaces/{namespace}/pods"))
        self.fewest: Dict[str, int] = {}

    def _look(self) -> None:
        counts: Dict[str, int] = {}
        for pod in self.watcher.objects.values():
            app = pod["metadata"].get("labels", {}).get("app", "")
            if app and pod_ready(pod) and not pod["metadata"].get("deletionTimestamp"):
                counts[app] = counts.get(app, 0) + 1
        for app in set(counts) | set(self.fewest):
            self.fewest[app] = min(self.fewest.get(app, counts.get(app, 0)), counts.get(app, 0))


# -- what the API server was asked ------------------------------------------------------------------------
WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")


class AuditLog:
    """The API server's audit log (<cluster dir>/audit.log, one JSON line per request stage),
    from the moment this was made: who asked what, and what the answer was."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.path = Path(cluster.dir) / "audit.log"
        self.start = self.path.stat().st_size

    def entries(self) -> List[Dict[str, Any]]:
        """One entry a request answered (stage ResponseComplete), oldest first."""
        with self.path.open("rb") as handle:
            handle.seek(self.start)
            lines = handle.read().splitlines()
        entries = []
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:  # a line being written as we read
                continue
            if entry.get("stage") == "ResponseComplete":
                entries.append(entry)
        return entries

    def requests_of(self, user: str, code: Optional[int] = None) -> List[Dict[str, Any]]:
        """What ``user`` asked; only what was answered ``code`` when given."""
        return [e for e in self.entries() if e.get("user", {}).get("username") == user
                and (code is None or e.get("responseStatus", {}).get("code") == code)]

    def writes_of(self, user: str, resource: Optional[str] = None) -> List[Dict[str, Any]]:
        """What ``user`` wrote (to ``resource`` only, when given: ``nodes``, ``leases``, ...)."""
        return [e for e in self.requests_of(user) if e.get("verb") in WRITE_VERBS
                and resource in (None, (e.get("objectRef") or {}).get("resource"))]

    def settled(self) -> AuditLog:
        """Once the requests answered so far are in the log: an entry is written an instant
        after its answer, so a request of ours, once logged, follows those before it."""
        mark = f"nmo-audit-mark-{uuid.uuid4().hex[:8]}"
        self.cluster.client.get_or_none(f"/api/v1/namespaces/default/configmaps/{mark}")
        wait_for(lambda: any((e.get("objectRef") or {}).get("name") == mark for e in self.entries()), 10,
                 f"the audit log to record {mark}")
        return self


# -- what a node looks like afterwards ------------------------------------------------------------------
def maintenance_of(client: Any, node: str) -> Optional[Dict[str, Any]]:
    items = (client.get_or_none(NM_API) or {}).get("items", [])
    return next((nm for nm in items if nm["spec"]["nodeName"] == node), None)


def leases_naming(client: Any, nodes: List[str], prefix: str) -> List[str]:
    found = []
    for lease in (client.get_or_none(LEASES) or {}).get("items", []):
        name = lease["metadata"]["name"]
        holder = lease.get("spec", {}).get("holderIdentity") or ""
        if name.startswith(prefix) or any(name == f"node-{n}" or holder == n for n in nodes):
            found.append(f"{name} (holder {holder})")
    return found


def node_clean(client: Any, node: str) -> Optional[str]:
    """None when the node is in service (schedulable, no maintenance taint, no label); else why not."""
    obj = client.get(f"/api/v1/nodes/{node}")
    taints = [t["key"] for t in obj.get("spec", {}).get("taints") or []
              if t["key"] in (DRAIN_TAINT, "node.kubernetes.io/unschedulable")]
    label = obj["metadata"].get("labels", {}).get(LABEL)
    if obj.get("spec", {}).get("unschedulable") or taints or label:
        return f"{node}: unschedulable={obj['spec'].get('unschedulable')} taints={taints} label={label}"
    return None


def wait_clean(client: Any, nodes: List[str]) -> None:
    # node.kubernetes.io/unschedulable is also the node lifecycle controller's: it follows
    # the cordon a moment later
    for node in nodes:
        wait_for(lambda n=node: node_clean(client, n) is None, 30, f"{node} back in service")


def events_of(client: Any, name: str, reason: Optional[str] = None) -> List[Dict[str, Any]]:
    """The events about ``name`` (a NodeMaintenance, a Node) as `kubectl get events
    --field-selector involvedObject.name=<name>` lists them, oldest first; only those of
    ``reason`` when given."""
    selector = f"involvedObject.name={name}" + (f",reason={reason}" if reason else "")
    items = client.get("/api/v1/namespaces/default/events", {"fieldSelector": selector}).get("items", [])
    return sorted(items, key=lambda e: (e.get("firstTimestamp") or "", e["metadata"].get("creationTimestamp") or ""))


def reasons_of(client: Any, name: str) -> List[str]:
    return [e["reason"] for e in events_of(client, name)]


def run_of(client: Any, node: str) -> str:
    """The run (nmo.maintenance/run) that holds the node's NodeMaintenance; '' when none."""
    nm = maintenance_of(client, node) or {}
    return (nm.get("metadata", {}).get("annotations") or {}).get("nmo.maintenance/run", "")


def wait_run_gone(client: Any, run_id: str, timeout: float = 30) -> None:
    """Until the run's heartbeat has deleted its run lease (it does when ansible-playbook is gone)."""
    wait_for(lambda: client.get_or_none(f"{LEASES}/nmo-run-{run_id}") is None, timeout, f"run {run_id} to be gone")


def nm_name(node: str) -> str:
    return "maintenance-" + node.removeprefix("node-")


def start_maintenance(cluster: Any, world: Any, node: str, reason: str = "test drain") -> Dict[str, Any]:
    """What the role does before a drain: the NodeMaintenance, cordon, phase Running."""
    nm, _changed = maintenance.ensure(cluster.client, node, reason=reason, name=f"maintenance-{node}")
    world.cordon(node)
    nm, _changed = maintenance.update_status(cluster.client, nm, {"phase": "Running"})
    return nm


def nm_status(cluster: Any, name: str) -> Dict[str, Any]:
    return (maintenance.get(cluster.client, name) or {}).get("status") or {}


class Background:
    """Runs ``fn`` (a drain, an End) in a thread; keeps its result or error and when it returned."""

    def __init__(self, fn: Callable[[], Dict[str, Any]]) -> None:
        self.result: Optional[Dict[str, Any]] = None
        self.error: Optional[BaseException] = None
        self.returned_at: Optional[float] = None
        self.thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self.thread.start()

    def _run(self, fn: Callable[[], Dict[str, Any]]) -> None:
        try:
            self.result = fn()
        except BaseException as exc:  # handed to the test thread
            self.error = exc
        finally:
            self.returned_at = time.monotonic()

    def join(self, timeout: float = 120) -> Dict[str, Any]:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"still running after {timeout} s"
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


# -- API Priority and Fairness throttling one user ------------------------------------------------
@contextmanager
def throttled(cluster: Any, user: str) -> Iterator[None]:
    """A FlowSchema sending every request of ``user`` to a priority level of one seat that
    rejects (429) what does not fit. A ballast level with many shares (matched by no one)
    brings the nominal concurrency of ours down to that one seat; the admin and the
    cluster's components (system:masters) stay exempt."""
    tag = f"nmo-test-{uuid.uuid4().hex[:6]}"
    levels = f"{FLOWCONTROL}/prioritylevelconfigurations"
    made: List[str] = []

    def level(name: str, shares: int) -> None:
        cluster.client.post(levels, {
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
            "metadata": {"name": name},
            "spec": {"type": "Limited", "limited": {
                "nominalConcurrencyShares": shares, "lendablePercent": 0, "borrowingLimitPercent": 0,
                "limitResponse": {"type": "Reject"}}}})
        made.append(f"{levels}/{name}")

    try:
        level(f"{tag}-ballast", 3000)
        level(tag, 1)
        cluster.client.post(f"{FLOWCONTROL}/flowschemas", {
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": tag},
            "spec": {"priorityLevelConfiguration": {"name": tag}, "matchingPrecedence": 100,
                     "distinguisherMethod": {"type": "ByUser"},
                     "rules": [{"subjects": [{"kind": "User", "user": {"name": user}}],
                                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                                   "namespaces": ["*"], "clusterScope": True}],
                                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}})
        made.append(f"{FLOWCONTROL}/flowschemas/{tag}")

        def in_effect() -> bool:
            conditions = cluster.client.get(f"{FLOWCONTROL}/flowschemas/{tag}").get("status", {}).get("conditions") or []
            return any(c.get("type") == "Dangling" and c.get("status") == "False" for c in conditions)
        wait_for(in_effect, 30, f"FlowSchema {tag} in effect")
        yield
    finally:
        for path in reversed(made):
            cluster.client.delete(path)


class Contention:
    """A thread keeping the throttled user's one seat busy with reads of ``path`` (single
    attempts, never retried, their 429s ignored), so that the requests of the code under test
    meet a busy seat at any moment, not only during their own bursts."""

    def __init__(self, kubeconfig: str, path: str) -> None:
        self.client = connect(ConnectionOptions(kubeconfig=kubeconfig), pool_size=1)
        self.path = path
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)

    def _read(self) -> None:
        while not self.stop.is_set():
            try:
                self.client.request("GET", self.path, budget=0)  # one attempt: no retry
            except Exception:  # a 429 is what this is for
                pass

    def __enter__(self) -> Contention:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.thread.join(15)
