"""Build worlds on the local control plane: kwok nodes, etcd member pods, workloads.

Shared by the tests (``tests/conftest.py``), the demo (``examples/``) and the benchmarks.
Everything a world creates carries its id in a label, so it can be removed as a whole.
Works with the collection's own API client (``plugins/module_utils/api/client.py``).
"""

from __future__ import annotations

import time
import uuid
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Optional

WORLD_LABEL = "nmo.test/world"
WORKER_ROLE = "node-role.kubernetes.io/worker"
CONTROL_PLANE_ROLE = "node-role.kubernetes.io/control-plane"
KWOK_ANNOTATION = {"kwok.x-k8s.io/node": "fake"}
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
DELETE_ANNOTATION = "nmo.test/delete"  # immediate | graceful (see hack/cluster)


def wait_for(condition: Callable[[], Any], timeout: float = 30.0, what: str = "condition",
             interval: float = 0.1) -> Any:
    """Return the first truthy value of ``condition()``; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = condition()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")


def pod_ready(pod: Dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in pod.get("status", {}).get("conditions", []))


def node_ready(node: Dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in node.get("status", {}).get("conditions", []))


class World:
    """One test's nodes, namespace and workloads, all labelled with its id."""

    def __init__(self, client: Any, prefix: Optional[str] = None) -> None:
        self.client = client
        self.id = prefix or uuid.uuid4().hex[:6]
        self.namespace = f"w-{self.id}"
        self.nodes: List[str] = []
        self._namespace_made = False

    # -- nodes ---------------------------------------------------------------------------
    def node_name(self, role: str, index: int) -> str:
        return f"node-{self.id}-{role}-{index:02d}"

    def add_nodes(self, workers: int = 0, control_planes: int = 0, cpu: str = "32", memory: str = "128Gi",
                  pods: str = "110", labels: Optional[Dict[str, str]] = None, wait: bool = True,
                  role_names: Optional[Dict[str, str]] = None) -> List[str]:
        made = []
        for role, count, role_label in (("worker", workers, WORKER_ROLE), ("cp", control_planes, CONTROL_PLANE_ROLE)):
            start = sum(1 for n in self.nodes if f"-{role}-" in n) + 1
            for i in range(start, start + count):
                name = self.node_name(role, i)
                body = {
                    "apiVersion": "v1", "kind": "Node",
                    "metadata": {
                        "name": name, "annotations": dict(KWOK_ANNOTATION),
                        "labels": {WORLD_LABEL: self.id, role_label: "", "kubernetes.io/hostname": name,
                                   "kubernetes.io/os": "linux", "type": "kwok", **(labels or {})},
                    },
                    "status": {"capacity": {"cpu": cpu, "memory": memory, "pods": pods},
                               "allocatable": {"cpu": cpu, "memory": memory, "pods": pods}},
                }
                self.client.post("/api/v1/nodes", body)
                self.nodes.append(name)
                made.append(name)
        if wait:
            for name in made:
                wait_for(lambda n=name: self._node_schedulable(n), 60, f"node {name} Ready and untainted")
        return made

    def _node_schedulable(self, name: str) -> bool:
        node = self.client.get(f"/api/v1/nodes/{name}")
        taints = [t for t in node.get("spec", {}).get("taints", []) or []
                  if t.get("key", "").startswith("node.kubernetes.io/not-ready")]
        return node_ready(node) and not taints

    @property
    def workers(self) -> List[str]:
        return [n for n in self.nodes if "-worker-" in n]

    @property
    def control_planes(self) -> List[str]:
        return [n for n in self.nodes if "-cp-" in n]

    def node(self, name: str) -> Dict[str, Any]:
        return self.client.get(f"/api/v1/nodes/{name}")

    def cordon(self, name: str, on: bool = True) -> None:
        self.client.patch(f"/api/v1/nodes/{name}", {"spec": {"unschedulable": True if on else None}}, "merge")

    @contextmanager
    def only_schedulable(self, *names: str) -> Iterator[None]:
        """Place new pods on ``names``: the world's other nodes are cordoned meanwhile."""
        others = [n for n in self.nodes if n not in names and not self.node(n).get("spec", {}).get("unschedulable")]
        for n in others:
            self.cordon(n)
        try:
            yield
        finally:
            for n in others:
                self.cordon(n, False)

    # -- namespace and pods --------------------------------------------------------------
    def ensure_namespace(self, name: Optional[str] = None) -> str:
        ns = name or self.namespace
        if ns == self.namespace and self._namespace_made:
            return ns
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {WORLD_LABEL: self.id}}}
        try:
            self.client.post("/api/v1/namespaces", body)
        except Exception as exc:  # already there
            if getattr(exc, "status", None) != 409:
                raise
        wait_for(lambda: self.client.get_or_none(f"/api/v1/namespaces/{ns}/serviceaccounts/default"), 30,
                 f"service account default in {ns}")
        if ns == self.namespace:
            self._namespace_made = True
        return ns

    def pods(self, node: Optional[str] = None, namespace: Optional[str] = None,
             selector: Optional[str] = None) -> List[Dict[str, Any]]:
        query: Dict[str, Any] = {}
        if node:
            query["fieldSelector"] = f"spec.nodeName={node}"
        if selector:
            query["labelSelector"] = selector
        path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
        return self.client.get(path, query).get("items", [])

    def wait_pods_ready(self, selector: str, count: int, namespace: Optional[str] = None,
                        timeout: float = 60) -> List[Dict[str, Any]]:
        ns = namespace or self.namespace

        def ready() -> Any:
            pods = [p for p in self.pods(namespace=ns, selector=selector)
                    if pod_ready(p) and not p["metadata"].get("deletionTimestamp")]
            return pods if len(pods) >= count else None
        return wait_for(ready, timeout, f"{count} ready pods {selector} in {ns}")

    def set_pod_ready(self, namespace: str, name: str, ready: bool) -> None:
        pod = self.client.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
        conditions = pod.get("status", {}).get("conditions", [])
        value = "True" if ready else "False"
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        for cond in conditions:
            if cond.get("type") in ("Ready", "ContainersReady"):
                cond["status"] = value
                cond["lastTransitionTime"] = now
        self.client.patch(f"/api/v1/namespaces/{namespace}/pods/{name}/status",
                          {"status": {"conditions": conditions}}, "strategic")

    # -- workloads -----------------------------------------------------------------------
    def _pod_spec(self, grace: Optional[int] = None, emptydir: bool = False, requests: Optional[Dict[str, str]] = None,
                  extra: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        container: Dict[str, Any] = {"name": "app", "image": "registry.local/app:1"}
        if requests:
            container["resources"] = {"requests": requests}
        spec: Dict[str, Any] = {"containers": [container], "nodeSelector": {WORLD_LABEL: self.id},
                                "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}]}
        if grace is not None:
            spec["terminationGracePeriodSeconds"] = grace
        if emptydir:
            container["volumeMounts"] = [{"name": "scratch", "mountPath": "/scratch"}]
            spec["volumes"] = [{"name": "scratch", "emptyDir": {}}]
        spec.update(extra or {})
        return spec

    def _meta(self, name: str, labels: Optional[Dict[str, str]] = None, graceful: bool = False) -> Dict[str, Any]:
        meta: Dict[str, Any] = {"name": name, "labels": {"app": name, WORLD_LABEL: self.id, **(labels or {})}}
        if graceful:
            meta["annotations"] = {DELETE_ANNOTATION: "graceful"}
        return meta

    def deployment(self, name: str, replicas: int, grace: Optional[int] = None, graceful: bool = False,
                   requests: Optional[Dict[str, str]] = None, pod_extra: Optional[Dict[str, Any]] = None,
                   wait: bool = True) -> Dict[str, Any]:
        ns = self.ensure_namespace()
        template = {"metadata": self._meta(name, graceful=graceful),
                    "spec": self._pod_spec(grace, requests=requests, extra=pod_extra)}
        body = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": self._meta(name),
                "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": template}}
        made = self.client.post(f"/apis/apps/v1/namespaces/{ns}/deployments", body)
        if wait and replicas:
            self.wait_pods_ready(f"app={name}", replicas)
        return made

    def statefulset(self, name: str, replicas: int, wait: bool = True, grace: Optional[int] = None,
                    graceful: bool = False) -> Dict[str, Any]:
        ns = self.ensure_namespace()
        body = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": self._meta(name),
                "spec": {"replicas": replicas, "serviceName": name, "podManagementPolicy": "Parallel",
                         "selector": {"matchLabels": {"app": name}},
                         "template": {"metadata": self._meta(name, graceful=graceful), "spec": self._pod_spec(grace)}}}
        made = self.client.post(f"/apis/apps/v1/namespaces/{ns}/statefulsets", body)
        if wait:
            self.wait_pods_ready(f"app={name}", replicas)
        return made

    def daemonset(self, name: str, wait_nodes: Optional[int] = None) -> Dict[str, Any]:
        ns = self.ensure_namespace()
        spec = self._pod_spec()
        spec["tolerations"] = [{"operator": "Exists"}]  # as node agents do: stays through taints
        body = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": self._meta(name),
                "spec": {"selector": {"matchLabels": {"app": name}},
                         "template": {"metadata": self._meta(name), "spec": spec}}}
        made = self.client.post(f"/apis/apps/v1/namespaces/{ns}/daemonsets", body)
        count = len(self.nodes) if wait_nodes is None else wait_nodes
        if count:
            self.wait_pods_ready(f"app={name}", count)
        return made

    def pod(self, name: str, node: Optional[str] = None, emptydir: bool = False, grace: Optional[int] = None,
            graceful: bool = False, labels: Optional[Dict[str, str]] = None, wait: bool = True,
            phase: Optional[str] = None) -> Dict[str, Any]:
        """An unmanaged pod (no controller), optionally pinned to ``node``."""
        ns = self.ensure_namespace()
        spec = self._pod_spec(grace, emptydir)
        if node:
            spec["nodeName"] = node
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": self._meta(name, labels, graceful), "spec": spec}
        if phase:
            spec["restartPolicy"] = "Never"
        made = self.client.post(f"/api/v1/namespaces/{ns}/pods", body)
        if phase:
            wait_for(lambda: self.client.get(f"/api/v1/namespaces/{ns}/pods/{name}").get("status", {}).get("podIP"),
                     30, f"pod {name} started")
            self.client.patch(f"/api/v1/namespaces/{ns}/pods/{name}/status",
                              {"status": {"phase": phase, "conditions": [
                                  {"type": "Ready", "status": "False", "reason": "PodCompleted"}]}}, "strategic")
        elif wait:
            self.wait_pods_ready(f"app={name}", 1)
        return made

    def pdb(self, name: str, selector_app: str, min_available: Any = None, max_unavailable: Any = None,
            namespace: Optional[str] = None) -> Dict[str, Any]:
        ns = namespace or self.ensure_namespace()
        spec: Dict[str, Any] = {"selector": {"matchLabels": {"app": selector_app}}}
        if min_available is not None:
            spec["minAvailable"] = min_available
        if max_unavailable is not None:
            spec["maxUnavailable"] = max_unavailable
        body = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": name, "labels": {WORLD_LABEL: self.id}}, "spec": spec}
        made = self.client.post(f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets", body)
        wait_for(lambda: self.client.get(f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/{name}")
                 .get("status", {}).get("observedGeneration") == 1, 30, f"PDB {name} observed")
        return made

    def vm(self, name: str, node: Optional[str] = None) -> Dict[str, Any]:
        """The KubeVirt case of docs/design.md §12.3: one virt-launcher pod alone behind a minAvailable 1 PDB."""
        pod_name = f"virt-launcher-{name}"
        self.pod(pod_name, node=node, labels={"kubevirt.io": "virt-launcher"})
        return self.pdb(f"kubevirt-disruption-budget-{name}", pod_name, min_available=1)

    def etcd_members(self, ready: Optional[Dict[str, bool]] = None) -> List[str]:
        """kubeadm-style etcd: one mirror pod per control-plane node in kube-system."""
        names = []
        for node in self.control_planes:
            name = f"etcd-{node}"
            node_obj = self.node(node)
            body = {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "kube-system",
                             "labels": {"component": "etcd", "tier": "control-plane", WORLD_LABEL: self.id},
                             "annotations": {MIRROR_ANNOTATION: uuid.uuid4().hex, "kubernetes.io/config.source": "file"},
                             "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node,
                                                  "uid": node_obj["metadata"]["uid"], "controller": True}]},
                "spec": {"nodeName": node, "priorityClassName": "system-node-critical",
                         "containers": [{"name": "etcd", "image": "registry.local/etcd:3.7"}],
                         "tolerations": [{"operator": "Exists"}]},
            }
            self.client.post("/api/v1/namespaces/kube-system/pods", body)
            names.append(name)
        for name in names:
            wait_for(lambda n=name: pod_ready(self.client.get(f"/api/v1/namespaces/kube-system/pods/{n}")),
                     30, f"etcd pod {name} ready")
        for node, is_ready in (ready or {}).items():
            if not is_ready:
                self.set_pod_ready("kube-system", f"etcd-{node}", False)
        return names

    def etcd_guard_pods(self, namespace: Optional[str] = None, pdb_name: str = "etcd-guard-pdb",
                        ready: Optional[Dict[str, bool]] = None) -> List[str]:
        """OpenShift-style etcd quorum guard: a guard pod per control-plane node behind one PDB
        (minAvailable = quorum), in ``namespace`` (the world's own by default)."""
        ns = self.ensure_namespace(namespace)
        names = []
        for node in self.control_planes:
            name = f"etcd-guard-{node}"
            body = {"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "labels": {"app": "guard", WORLD_LABEL: self.id}},
                    "spec": {"nodeName": node, "containers": [{"name": "guard", "image": "registry.local/guard:1"}],
                             "tolerations": [{"operator": "Exists"}]}}
            self.client.post(f"/api/v1/namespaces/{ns}/pods", body)
            names.append(name)
        self.wait_pods_ready("app=guard", len(names), namespace=ns)
        for node, is_ready in (ready or {}).items():
            if not is_ready:
                self.set_pod_ready(ns, f"etcd-guard-{node}", False)
        self.pdb(pdb_name, "guard", min_available=len(names) // 2 + 1, namespace=ns)
        return names

    # -- clean-up ------------------------------------------------------------------------
    def cleanup(self) -> None:
        """Remove everything of this world: its workloads and pods first, then etcd pods,
        leases, NMs, nodes, and its namespaces.

        The namespace controller takes 5 to 10 s to finish a namespace, most of it waiting
        between passes: a test's teardown used to spend that on every test. The world's own
        namespace (``w-<id>``, never made again) is emptied here, its pods awaited, and left
        to the controller; a namespace of a fixed name (``openshift-etcd``), which the next
        test may make again, is still awaited until it is gone."""
        c = self.client
        selector = f"{WORLD_LABEL}={self.id}"
        namespaces = [ns["metadata"]["name"] for ns in
                      c.get("/api/v1/namespaces", {"labelSelector": selector}).get("items", [])]
        for ns in namespaces:
            # the controllers first, so nothing makes a pod again; then the pods at once
            for path in _NAMESPACED_WORKLOADS:
                _ignore_missing(c.delete, path.format(ns=ns))
            _ignore_missing(c.delete, f"/api/v1/namespaces/{ns}/pods", query={"gracePeriodSeconds": 0})
            _ignore_missing(c.delete, f"/api/v1/namespaces/{ns}")
        _ignore_missing(c.delete, "/api/v1/namespaces/kube-system/pods",
                        query={"labelSelector": selector, "gracePeriodSeconds": 0})
        names = set(self.nodes) | {n["metadata"]["name"] for n in
                                   c.get("/api/v1/nodes", {"labelSelector": selector}).get("items", [])}
        nms = c.get_or_none("/apis/nodemaintenance.medik8s.io/v1beta1/nodemaintenances") or {}
        for nm in nms.get("items", []):
            if nm.get("spec", {}).get("nodeName") in names:
                _ignore_missing(c.delete, f"/apis/nodemaintenance.medik8s.io/v1beta1/nodemaintenances/{nm['metadata']['name']}")
        leases = c.get_or_none("/apis/coordination.k8s.io/v1/namespaces/medik8s-leases/leases") or {}
        for lease in leases.get("items", []):
            holder = lease.get("spec", {}).get("holderIdentity") or ""
            lname = lease["metadata"]["name"]
            if any(n in lname or n == holder for n in names):
                _ignore_missing(c.delete, f"/apis/coordination.k8s.io/v1/namespaces/medik8s-leases/leases/{lname}")
        for ns in namespaces:
            wait_for(lambda n=ns: not (c.get_or_none(f"/api/v1/namespaces/{n}/pods") or {}).get("items"), 90,
                     f"the pods of namespace {ns} gone")
            if ns != self.namespace:
                wait_for(lambda n=ns: c.get_or_none(f"/api/v1/namespaces/{n}") is None, 90, f"namespace {ns} gone")
        for name in names:
            _ignore_missing(c.delete, f"/api/v1/nodes/{name}")


# What makes pods in a world's namespace, removed before its pods (background propagation:
# the pods are deleted at once right after, not through their owners).
_NAMESPACED_WORKLOADS = (
    "/apis/apps/v1/namespaces/{ns}/deployments",
    "/apis/apps/v1/namespaces/{ns}/replicasets",
    "/apis/apps/v1/namespaces/{ns}/statefulsets",
    "/apis/apps/v1/namespaces/{ns}/daemonsets",
    "/apis/batch/v1/namespaces/{ns}/jobs",
    "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
)


def _ignore_missing(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    try:
        fn(*args, **kwargs)
    except Exception as exc:
        if getattr(exc, "status", None) != 404:
            raise
