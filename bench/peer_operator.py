"""B7's peer: the real Node Maintenance Operator (NMO v0.17.0, run by hack/medik8s), driven
the way its users drive it: a NodeMaintenance created, followed by a watch to phase
Succeeded, deleted, followed until NMO has let the node go (its finalizer removed).

NMO runs as its ServiceAccount, so the audit log names it: its requests are counted by that
user, and their timestamps say when it cordoned, evicted and wrote Succeeded.
"""

from __future__ import annotations

import os
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

from measure import AuditLog, Requests, become_subreaper, high_water_rss
from tools import ROOT

from ansible_collections.nmo.maintenance.plugins.module_utils.api.waiter import Watcher, wait_until

NM_PATH = "/apis/nodemaintenance.medik8s.io/v1beta1/nodemaintenances"
SCRIPT = ROOT / "hack" / "medik8s"


def audit_time(event: Dict[str, Any]) -> float:
    """When the API server finished the request (the audit log's stageTimestamp), as time.time()."""
    return datetime.fromisoformat(str(event["stageTimestamp"]).replace("Z", "+00:00")).timestamp()


def what(event: Dict[str, Any]) -> str:
    ref = event.get("objectRef") or {}
    resource = ref.get("resource", "?") + (f"/{ref['subresource']}" if ref.get("subresource") else "")
    return f"{event.get('verb', '?')} {resource}"


@dataclass
class OperatorRun:
    """One NodeMaintenance through NMO: the harness's clock (time.time()) at each step."""

    created: float  # the create request returned
    succeeded: float  # the watch showed phase Succeeded
    released: Optional[float]  # the watch showed it gone after its deletion (NMO uncordoned first)
    status: Dict[str, Any]  # its status when it Succeeded
    events: List[Dict[str, Any]] = field(default_factory=list)  # NMO's requests meanwhile (audit log)

    @property
    def drain_s(self) -> float:
        """From the NodeMaintenance's creation to NMO's drain complete (phase Succeeded)."""
        return self.succeeded - self.created

    def requests(self, until: Optional[float] = None) -> Requests:
        counted = Requests()
        for event in self.events:
            if until is None or audit_time(event) <= until:
                counted.add(event)
        return counted

    def timeline(self) -> Dict[str, Optional[float]]:
        """Seconds after the creation at which NMO did each part, from its requests' times:
        the first and last eviction, and its last status write before the watch saw Succeeded
        (the drain's end as NMO itself recorded it)."""
        def first(match: Callable[[Dict[str, Any]], bool], last: bool = False) -> Optional[float]:
            times = sorted(audit_time(e) for e in self.events if match(e))
            if not times:
                return None
            return round((times[-1] if last else times[0]) - self.created, 3)

        def evictions(e: Dict[str, Any]) -> bool:
            return what(e) == "create pods/eviction"

        def status_write(e: Dict[str, Any]) -> bool:
            return what(e) == "update nodemaintenances/status" and audit_time(e) <= self.succeeded + 0.05

        return {"first_eviction": first(evictions), "last_eviction": first(evictions, last=True),
                "succeeded_written": first(status_write, last=True)}


class Operator:
    """hack/medik8s for the cluster the benchmark runs on."""

    def __init__(self, cluster: Dict[str, str], log: Callable[[str], None]) -> None:
        self.log = log
        # Another checkout's tests may hold the machine's one NMO: wait for it, as they do.
        self.env = {**os.environ, "NMO_CLUSTER_DIR": cluster["NMO_CLUSTER_DIR"],
                    "NMO_MEDIK8S_LOCK_WAIT": os.environ.get("NMO_MEDIK8S_LOCK_WAIT", "600")}
        self.settings = {}
        for line in self._script("env").stdout.splitlines():
            key, _sep, value = line.removeprefix("export ").partition("=")
            self.settings[key] = value.strip("'")
        self.user = self.settings["NMO_MEDIK8S_USER"]
        versions = (ROOT / "hack" / "medik8s.d" / "versions.env").read_text()
        self.version = next((line.split("=", 1)[1].strip() for line in versions.splitlines()
                             if line.startswith("NMO_VERSION=")), "?")
        self.is_up = False

    def _script(self, *args: str, timeout: float = 1200) -> subprocess.CompletedProcess:
        # NMO is detached by hack/medik8s: it must not become this subreaper's child, or it
        # would stay a zombie once stopped and `down` would wait on it forever.
        become_subreaper(False)
        try:
            proc = subprocess.run([str(SCRIPT), *args], env=self.env, capture_output=True, text=True,
                                  timeout=timeout, check=False)
        finally:
            become_subreaper(True)
        if proc.returncode:
            raise RuntimeError(f"hack/medik8s {' '.join(args)} failed ({proc.returncode}): "
                               f"{(proc.stderr or proc.stdout).strip()[-400:]}")
        return proc

    def up(self) -> None:
        t0 = time.monotonic()
        self._script("up")
        self.is_up = True
        self.log(f"  NMO {self.version} up in {time.monotonic() - t0:.1f} s, as {self.user}")

    def down(self, keep_crd: bool) -> None:
        """Stop NMO (the webhook registration first); with ``keep_crd`` the NodeMaintenance
        CRD stays for the role's run; without, it goes when `up` installed it and none is left."""
        self._script("down", *(["--keep-crd"] if keep_crd else []))
        if self.is_up:
            self.log("  NMO down" + (" (its CRD kept)" if keep_crd else ""))
        self.is_up = False

    @contextmanager
    def running(self) -> Iterator[Operator]:
        """NMO up inside the block, and down after it, also when the block fails."""
        self.up()
        try:
            yield self
        finally:
            self.down(keep_crd=True)

    def peak_rss_mib(self) -> Optional[float]:
        """NMO's peak RSS so far (its VmHWM): the operator's whole life, start-up included."""
        pid_file = Path(self.settings["NMO_MEDIK8S_DIR"]) / "nmo.pid"
        try:
            pid = int(pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        peak = high_water_rss(pid)
        return round(peak / 2**20, 1) if peak else None

    def maintain(self, client: Any, audit: AuditLog, node: str, name: str, timeout: float) -> OperatorRun:
        """One NodeMaintenance for ``node`` to Succeeded, then deleted and followed until gone."""
        path = f"{NM_PATH}/{name}"
        watcher = Watcher(client, NM_PATH, {"fieldSelector": f"metadata.name={name}"}).start()
        try:
            mark = audit.mark()
            created = time.time()  # NMO's work starts here: its webhook validates the create
            client.post(NM_PATH, {"apiVersion": "nodemaintenance.medik8s.io/v1beta1", "kind": "NodeMaintenance",
                                  "metadata": {"name": name},
                                  "spec": {"nodeName": node, "reason": "bench/run B7"}})

            def succeeded() -> Optional[Dict[str, Any]]:
                for obj in watcher.objects.values():
                    status = obj.get("status") or {}
                    if status.get("phase") == "Succeeded":
                        return status
                return None

            def where() -> str:
                found = [o.get("status") for o in watcher.objects.values()]
                return f"NodeMaintenance {name} to reach phase Succeeded (now: {found})"

            try:
                status = wait_until(watcher, succeeded, timeout, where)
            except Exception:
                # deleted while NMO still runs: its finalizer would hold it for ever once NMO is down
                client.delete(path)
                wait_until(watcher, lambda: None if watcher.objects else True, 120,
                           lambda: f"NodeMaintenance {name} gone after its deletion")
                raise
            done = time.time()
            client.delete(path)

            def gone() -> Optional[float]:
                return None if watcher.objects else time.time()

            try:
                released: Optional[float] = wait_until(watcher, gone, 120,
                                                       lambda: f"NodeMaintenance {name} gone after its deletion")
            except Exception:  # noqa: BLE001 - the drain's figures stand; the note says it stayed
                released = None
        finally:
            watcher.close()
        run = OperatorRun(created, done, released, status)
        run.events = audit.events(mark, [self.user])
        return run
