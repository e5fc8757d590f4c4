"""The real medik8s code beside the local cluster, for tests: NMO and the lease library.

``hack/medik8s`` builds (cached per user and version) and runs the Node Maintenance Operator
v0.17.0 and ``leasetool``, our program over medik8s/common v1.17.0 ``pkg/lease``, which stands
for Node Health Check and Self Node Remediation. This wraps it for pytest::

    m = Medik8s(cluster)            # builds on first use (cached)
    m.lease("request", node, "NodeHealthCheck-x", 3600)   # -> {"ok": True, "lease": {...}}
    m.up(); ...; m.down()           # NMO against the cluster, its webhook registered
    with m.nmo_stopped(): ...       # NMO stopped for a while, started again after

The fixtures ``medik8s_tools`` (build only: the lease tool) and ``medik8s`` (NMO running for
the module) are in ``tests/conftest.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Union

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "hack" / "medik8s"

NMO_FINALIZER = "foregroundDeleteNodeMaintenance"
NMO_CRD = "nodemaintenances.nodemaintenance.medik8s.io"
NM_PATH = "/apis/nodemaintenance.medik8s.io/v1beta1/nodemaintenances"
NMO_HOLDER = "node-maintenance"  # NMO's lease holder identity (controllers.LeaseHolderIdentity)


class Medik8sError(RuntimeError):
    pass


class Medik8s:
    """``hack/medik8s`` for one local cluster (``tests/conftest.py``'s ``Cluster``)."""

    def __init__(self, cluster: Any, leader_elect: bool = False, rbac: str = "admin",
                 lock_wait: Optional[int] = None) -> None:
        self.cluster = cluster
        self.leader_elect = leader_elect
        self.rbac = rbac
        # NMO's ports are fixed (one NMO per machine): wait for another checkout's tests.
        self.lock_wait = lock_wait if lock_wait is not None else int(os.environ.get("NMO_MEDIK8S_LOCK_WAIT", "600"))
        self._env: Dict[str, str] = {}
        self.build()

    # -- the script ----------------------------------------------------------------------
    def _script_env(self) -> Dict[str, str]:
        env = dict(os.environ)
        env.update({
            "NMO_CLUSTER_DIR": self.cluster.dir,
            "NMO_MEDIK8S_LEADER_ELECT": "1" if self.leader_elect else "0",
            "NMO_MEDIK8S_RBAC": self.rbac,
            "NMO_MEDIK8S_LOCK_WAIT": str(self.lock_wait),
        })
        return env

    def run(self, *args: str, check: bool = True, timeout: float = 1800) -> subprocess.CompletedProcess:
        proc = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True,
                              env=self._script_env(), timeout=timeout, check=False)
        if check and proc.returncode != 0:
            raise Medik8sError(f"hack/medik8s {' '.join(args)} failed ({proc.returncode}):\n"
                               f"{proc.stdout}{proc.stderr}")
        return proc

    def build(self) -> None:
        """Build NMO and the lease tool (once per user and version), then read their paths."""
        self.run("build")
        out = self.run("env").stdout
        for line in out.splitlines():
            key, _sep, value = line.removeprefix("export ").partition("=")
            self._env[key] = value.strip("'")

    # -- what `env` says -----------------------------------------------------------------
    @property
    def leasetool(self) -> str:
        return self._env["NMO_MEDIK8S_LEASETOOL"]

    @property
    def state_dir(self) -> Path:
        return Path(self._env["NMO_MEDIK8S_DIR"])

    @property
    def log(self) -> Path:
        return self.state_dir / "nmo.log"

    @property
    def manifests(self) -> Path:
        return Path(self._env["NMO_MEDIK8S_MANIFESTS"])

    @property
    def namespace(self) -> str:
        """NMO's own namespace (where its leader-election Lease lives)."""
        return self._env["NMO_MEDIK8S_NAMESPACE"]

    @property
    def user(self) -> str:
        """NMO's user name in the audit log (its client certificate's CN)."""
        return self._env["NMO_MEDIK8S_USER"]

    @property
    def webhook_config(self) -> str:
        return self._env["NMO_MEDIK8S_WEBHOOK_CONFIG"]

    @property
    def leader_lease(self) -> str:
        return self._env["NMO_MEDIK8S_LEADER_LEASE"]

    # -- NMO -----------------------------------------------------------------------------
    def up(self) -> None:
        self.run("up")

    def down(self, keep_crd: bool = False) -> None:
        """Stop NMO; NMO's CRD goes too if ``up`` installed it and no NodeMaintenance is left,
        unless ``keep_crd``."""
        self.run("down", *(["--keep-crd"] if keep_crd else []))

    def running(self) -> bool:
        return self.run("status", check=False).returncode == 0

    def install_crd(self) -> None:
        """Apply NMO's own NodeMaintenance CRD (from its module), replacing whatever is there."""
        self.run("crd")

    @contextmanager
    def nmo_stopped(self) -> Iterator[None]:
        """NMO stopped (and its webhook unregistered) inside the block, running again after."""
        self.down(keep_crd=True)
        try:
            yield
        finally:
            self.up()

    @contextmanager
    def configured(self, leader_elect: Optional[bool] = None, rbac: Optional[str] = None) -> Iterator[None]:
        """NMO restarted with other settings inside the block, restarted as before after."""
        before = (self.leader_elect, self.rbac)
        self.down(keep_crd=True)
        if leader_elect is not None:
            self.leader_elect = leader_elect
        if rbac is not None:
            self.rbac = rbac
        try:
            self.up()
            yield
        finally:
            self.down(keep_crd=True)
            self.leader_elect, self.rbac = before
            self.up()

    # -- the lease library ---------------------------------------------------------------
    def lease(self, action: str, node: str, holder: Optional[str] = None,
              duration: Union[int, float, str, None] = None, namespace: Optional[str] = None,
              kubeconfig: Optional[str] = None) -> Dict[str, Any]:
        """medik8s/common's lease Manager: ``request``, ``invalidate`` or ``get`` for a node.

        Returns the tool's JSON line: ``{"ok": true, "lease": {...}}`` or ``{"ok": false,
        "error": ..., "alreadyHeld": true|false, "notFound": true|false, "lease": ...}``.
        ``duration`` in seconds (default 3600, as the library's callers use)."""
        if action not in ("request", "invalidate", "get"):
            raise ValueError(f"lease action must be request, invalidate or get, not {action!r}")
        args = [self.leasetool, "--kubeconfig", kubeconfig or self.cluster.kubeconfig, action, "--node", node]
        if holder is not None:
            args += ["--holder", holder]
        if duration is not None:
            args += ["--duration", f"{int(duration)}s" if isinstance(duration, (int, float)) else duration]
        if namespace is not None:
            args += ["--namespace", namespace]
        env = {k: v for k, v in os.environ.items() if k != "LEASE_NAMESPACE"}
        proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=60, check=False)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
        if not lines:
            raise Medik8sError(f"leasetool {action} printed no JSON (rc {proc.returncode}): {proc.stderr[-2000:]}")
        return json.loads(lines[-1])
