"""The cluster-level explorer of rollouts and faults (issue 42; docs/reliability.md).

From a seed it draws a world (kwok workers in zones, a Deployment behind a PodDisruptionBudget,
some nodes never evictable, an administrator's cordon) and a schedule (the run's options, one
run or two slices at once, a hook failing in a drawn phase on a drawn node, a SIGKILL of
ansible-playbook or an API server restart at a drawn moment), runs the maintenance playbook
against the local cluster, then the recovery its own messages prescribe (``recover.yml`` for a
quarantine, the same playbook again), and checks the invariants on what the cluster saw:

* budget: when this collection cordons a node, the nodes out of service in its zone (cordoned
  by anyone, quarantined, kept) are at most the zone's budget, and the nodes in maintenance
  (cordoned, neither quarantined nor cordoned by the administrator) at most the concurrency;
* stop: no NodeMaintenance of a run is created after that run's stop mark was written;
* pdb: no PodDisruptionBudget of the world ever had fewer healthy pods than it requires;
* rc: a run that ended 0 reports no failed node;
* end: nothing of ours is left (no NodeMaintenance, lease, quarantine label or maintenance
  taint), the administrator's cordon is still there, and every node is maintained (its
  campaign mark) or named by the last run's output.

A violation is a line naming the invariant and what broke it. ``hack/chaos`` is the command;
``tests/chaos/test_chaos.py`` runs a fixed list of seeds in CI's side lane and the self-check.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Dict, List, Optional, Set, Tuple

ROOT = Path(__file__).resolve().parents[2]
for extra in (ROOT / "hack", ROOT / "tests"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from helpers import collection_path  # noqa: E402

if str(collection_path()) not in sys.path:
    sys.path.insert(0, str(collection_path()))

from integration.maintenance_support import Run, nm_name, slot_prefix, write_inventory  # noqa: E402
from topology import WORLD_LABEL, World, wait_for  # noqa: E402

from ansible_collections.nmo.maintenance.plugins.module_utils.api.waiter import Watcher  # noqa: E402
from ansible_collections.nmo.maintenance.plugins.module_utils.model import leases  # noqa: E402
from ansible_collections.nmo.maintenance.plugins.module_utils.model.marks import QUARANTINED  # noqa: E402
from ansible_collections.nmo.maintenance.plugins.module_utils.model.plan import CAMPAIGN_MARK  # noqa: E402
from ansible_collections.nmo.maintenance.plugins.module_utils.model.rollout import STOPPED_AFTER  # noqa: E402

ZONE = "topology.kubernetes.io/zone"
DRAIN_TAINT = "medik8s.io/drain"
NM_PATH = "/apis/nodemaintenance.medik8s.io/v1beta1/nodemaintenances"
RUN_TIMEOUT = 420  # one run of the playbook; a wait outliving its reason fails well before (lease timeout)
LEASE_TIMEOUT = 150
PHASES = ("before_drain", "work")  # where a drawn hook fails (a drain's block is a blocked node)

# The hook of each phase: it marks where the node is (the moment a kill or a restart is drawn
# against) and fails on the node the schedule names, in the first round only.
HOOK = """\
- name: Tell the explorer where the node is
  ansible.builtin.copy:
    dest: "{{{{ chaos_dir }}}}/{{{{ inventory_hostname }}}}.{phase}.{{{{ chaos_round }}}}"
    content: "x"
    mode: "0644"
- name: The hook fails on the node the schedule names
  ansible.builtin.fail:
    msg: "chaos: the {phase} hook failed"
  when: inventory_hostname == (chaos_fail_{phase} | default('')) and (chaos_round | int) == 1
"""


@dataclass
class Schedule:
    """One drawn world and what happens to it."""

    seed: int
    workers: int
    zones: int
    concurrency: int
    budget: Optional[int]  # the zone budget's max; None: no budget
    order: str
    on_blocked: str
    max_blocked: int
    policy: str
    slices: int  # runs at once, on disjoint halves of the nodes
    blocked: List[int] = field(default_factory=list)  # nodes with a pod never evictable
    fail: Optional[Tuple[int, str]] = None  # a node and the phase whose hook fails there
    kill_after: Optional[int] = None  # SIGKILL ansible-playbook once this many nodes reached a hook
    restart_after: Optional[int] = None  # restart the API server once this many nodes reached a hook
    admin_cordon: Optional[int] = None  # a node an administrator cordoned before the run

    def describe(self) -> str:
        parts = [f"{self.workers} workers/{self.zones} zones", f"c{self.concurrency}",
                 f"budget {self.budget}" if self.budget else "no budget", self.order,
                 f"on_blocked {self.on_blocked}/{self.max_blocked}", f"policy {self.policy}",
                 f"{self.slices} slice(s)"]
        if self.blocked:
            parts.append(f"blocked {self.blocked}")
        if self.fail:
            parts.append(f"fail {self.fail[1]}@{self.fail[0]}")
        if self.kill_after is not None:
            parts.append(f"kill@{self.kill_after}")
        if self.restart_after is not None:
            parts.append(f"apiserver-restart@{self.restart_after}")
        if self.admin_cordon is not None:
            parts.append(f"admin-cordon {self.admin_cordon}")
        return ", ".join(parts)

    def faults(self) -> List[str]:
        kinds = ["blocked"] * len(self.blocked)
        kinds += ["hook-fails"] if self.fail else []
        kinds += ["sigkill"] if self.kill_after is not None else []
        kinds += ["apiserver-restart"] if self.restart_after is not None else []
        kinds += ["admin-cordon"] if self.admin_cordon is not None else []
        return kinds


# What each broken variant of the self-check needs to meet (drawn within these bounds).
VARIANT_NEEDS = {
    "stop-mark": {"fail": True, "fail_node": 0, "order": "inventory", "slices": 1, "concurrency": (2, 3),
                  "workers": (6, 8), "budget": None, "on_blocked": "stop", "blocked": 0},
    "budgets-ignored": {"budget": 1, "concurrency": (3, 4), "zones": 1, "slices": 1},
    "quarantine-not-counted": {"budget": 1, "zones": 1, "on_blocked": "quarantine", "blocked": 1,
                               "concurrency": (1, 1), "slices": 1},
}


def draw(seed: int, variant: str = "") -> Schedule:
    """The schedule of ``seed`` (the same seed, the same schedule); within a variant's needs."""
    rng = random.Random(seed)
    needs = VARIANT_NEEDS.get(variant, {})

    def pick(name: str, default: Any) -> Any:
        if name not in needs:
            return default
        want = needs[name]
        return rng.randint(*want) if isinstance(want, tuple) else want

    workers = pick("workers", rng.randint(6, 12))
    zones = pick("zones", rng.randint(1, 3))
    concurrency = pick("concurrency", rng.choice([1, 1, 2, 2, 3, 4]))
    budget = pick("budget", rng.choice([None, 1, 1, 2]))
    on_blocked = pick("on_blocked", rng.choice(["stop", "skip", "quarantine"]))
    blocked_count = pick("blocked", rng.choice([0, 0, 1, 2]))
    nodes = list(range(workers))
    blocked = sorted(rng.sample(nodes, blocked_count))
    fail = None
    if needs.get("fail") or (not needs and rng.random() < 0.4):
        fail = (pick("fail_node", rng.choice([n for n in nodes if n not in blocked] if variant else nodes)),
                rng.choice(PHASES))
    kill_after = rng.randint(1, max(1, workers // 2)) if not needs and rng.random() < 0.25 else None
    restart_after = rng.randint(1, workers) if not needs and kill_after is None and rng.random() < 0.15 else None
    admin = rng.choice(nodes) if not needs and rng.random() < 0.2 else None
    return Schedule(seed, workers, zones, concurrency, budget, pick("order", rng.choice(["inventory", "zone"])), on_blocked,
                    rng.randint(1, 3), rng.choice(["auto", "keep"]), pick("slices", rng.choice([1, 1, 1, 2])),
                    blocked, fail, kill_after, restart_after, admin)


# -- what the cluster saw ----------------------------------------------------------------------------
@dataclass
class Seen:
    """One node change as a watch delivered it."""

    at: float
    node: str
    cordoned: bool
    quarantined: bool


class Recorder(threading.Thread):
    """The world's nodes, the leases namespace and the world's PodDisruptionBudgets, watched for
    the whole schedule: every cordon transition, each run's stop mark, the fewest healthy pods."""

    def __init__(self, client: Any, world: World) -> None:
        super().__init__(daemon=True)
        self.nodes = Watcher(client, "/api/v1/nodes", {"labelSelector": f"{WORLD_LABEL}={world.id}"})
        self.leases = Watcher(client, f"/apis/coordination.k8s.io/v1/namespaces/{leases.LEASE_NAMESPACE}/leases")
        self.pdbs = Watcher(client, f"/apis/policy/v1/namespaces/{world.namespace}/poddisruptionbudgets")
        self.changes: List[Seen] = []
        self.stopped_at: Dict[str, float] = {}  # run id -> when its stop mark was first seen
        self.short: Dict[str, int] = {}  # pdb -> the most healthy pods it lacked
        self._state: Dict[str, Tuple[bool, bool]] = {}
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            self._step(0.1)
        self._step(0)

    def _step(self, timeout: float) -> None:
        # the nodes event by event: two changes that arrive together are two transitions
        for etype, obj in self.nodes.drain_events(timeout):
            if etype in ("ADDED", "MODIFIED") and isinstance(obj, dict) and "metadata" in obj:
                self._node(obj)
            elif etype == "RESYNC" and isinstance(obj, dict):  # the watch reopened: a whole listing
                for item in obj.get("items", []):
                    self._node(item)
        for watcher in (self.leases, self.pdbs):
            watcher.drain_events(0)
        self._look()

    def _node(self, node: Dict[str, Any]) -> None:
        name = node["metadata"]["name"]
        state = (bool((node.get("spec") or {}).get("unschedulable")),
                 (node["metadata"].get("labels") or {}).get(QUARANTINED) == "true")
        if self._state.get(name) != state:
            self._state[name] = state
            self.changes.append(Seen(time.time(), name, *state))

    def _look(self) -> None:
        now = time.time()
        for lease in self.leases.objects.values():
            name = lease["metadata"]["name"]
            if name.startswith(leases.RUN_LEASE_PREFIX) and STOPPED_AFTER in (lease["metadata"].get("annotations") or {}):
                self.stopped_at.setdefault(name[len(leases.RUN_LEASE_PREFIX):], now)
        for pdb in self.pdbs.objects.values():
            status = pdb.get("status") or {}
            if status.get("observedGeneration") and "desiredHealthy" in status:
                lack = int(status["desiredHealthy"]) - int(status.get("currentHealthy") or 0)
                name = pdb["metadata"]["name"]
                self.short[name] = max(self.short.get(name, 0), lack)

    def __enter__(self) -> Recorder:
        for watcher in (self.nodes, self.leases, self.pdbs):
            watcher.start()
        for node in self.nodes.objects.values():
            self._node(node)
        self._look()
        self.changes = [Seen(0.0, c.node, c.cordoned, c.quarantined) for c in self.changes]  # the start
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._done.set()
        self.join()
        for watcher in (self.nodes, self.leases, self.pdbs):
            watcher.close()


@dataclass
class Outcome:
    schedule: Schedule
    violations: List[str] = field(default_factory=list)
    runs: List[Tuple[str, int, bool]] = field(default_factory=list)  # run id, rc, killed
    seconds: float = 0.0
    log: str = ""
    cordons: int = 0  # the cordon transitions the watch saw
    most_out: int = 0  # the most nodes of the world cordoned at once


class Explorer:
    """Runs schedules against the local cluster (``cluster``: tests/conftest.py's Cluster or alike)."""

    def __init__(self, cluster: Any, workdir: Path, collections: Optional[str] = None, keep: bool = False) -> None:
        self.keep = keep  # the runs' output and the audit log excerpt kept for a schedule without violation too
        self.cluster = cluster
        self.workdir = workdir
        self.collections = collections  # ANSIBLE_COLLECTIONS_PATH of a (broken) copy, for the self-check

    # -- the world -------------------------------------------------------------------------------
    def build(self, s: Schedule) -> Tuple[World, List[str], Dict[str, str]]:
        world = World(self.cluster.client)
        zone_of: Dict[str, str] = {}
        names: List[str] = []
        for index in range(s.workers):
            zone = f"{world.id}-z{index % s.zones}"
            name = world.add_nodes(workers=1, labels={ZONE: zone}, wait=False)[0]
            zone_of[name] = zone
            names.append(name)
        for name in names:
            wait_for(lambda n=name: world._node_schedulable(n), 60, f"node {name} Ready")
        world.deployment("app", s.workers)
        world.pdb("app", "app", max_unavailable=1)
        world.wait_pods_ready("app=app", s.workers)
        for index in s.blocked:
            app = f"db{index}"
            with world.only_schedulable(names[index]):
                world.deployment(app, 1)
            world.pdb(app, app, min_available=1)
            world.wait_pods_ready(f"app={app}", 1)
        if s.admin_cordon is not None:
            world.cordon(names[s.admin_cordon])
        return world, names, zone_of

    # -- the runs --------------------------------------------------------------------------------
    def options(self, s: Schedule, world: World, run_id: str, round_: int, out: Path) -> Dict[str, Any]:
        hooks = {}
        for phase in PHASES:
            path = out / f"{phase}.yml"
            path.write_text(HOOK.format(phase=phase))
            hooks[f"node_maintenance_hooks_{phase}"] = [str(path)]
        extra: Dict[str, Any] = {
            "node_maintenance_run_id": run_id, "node_maintenance_concurrency": s.concurrency,
            "node_maintenance_budgets": [{"topology_key": ZONE, "max": s.budget}] if s.budget else [],
            "node_maintenance_order": s.order, "node_maintenance_order_key": ZONE,
            "node_maintenance_on_blocked": s.on_blocked, "node_maintenance_max_blocked": s.max_blocked,
            "node_maintenance_failure_policy": s.policy, "node_maintenance_preflight": "warn",
            "node_maintenance_drain": {"timeout": 5}, "node_maintenance_settle_timeout": 60,
            "node_maintenance_lease_timeout": LEASE_TIMEOUT, "node_maintenance_campaign": f"chaos-{world.id}",
            "node_maintenance_report_dir": str(out / run_id), "chaos_dir": str(out), "chaos_round": round_,
            **hooks}
        if s.fail:
            extra[f"chaos_fail_{s.fail[1]}"] = self._names[s.fail[0]]
        return extra

    def start(self, s: Schedule, world: World, inventory: str, run_id: str, round_: int, out: Path,
              limit: Optional[List[str]], playbook: str = "maintenance.yml",
              extra: Optional[Dict[str, Any]] = None) -> Run:
        env = {"ANSIBLE_FORKS": str(max(5, s.concurrency))}
        if self.collections:
            env["ANSIBLE_COLLECTIONS_PATH"] = self.collections
        args = ["-l", ",".join(limit)] if limit else []
        return Run(playbook, inventory, self.cluster.kubeconfig, args=args,
                   extra_vars=extra if extra is not None else self.options(s, world, run_id, round_, out), env=env)

    def hooks_reached(self, out: Path, round_: int) -> int:
        return len([p for p in out.glob(f"*.*.{round_}") if p.suffix == f".{round_}"])

    def first_round(self, s: Schedule, world: World, inventory: str, out: Path, result: Outcome) -> None:
        names = self._names
        slices = [names] if s.slices == 1 else [names[0::2], names[1::2]]
        runs = [(f"{world.id}r1s{k}", self.start(s, world, inventory, f"{world.id}r1s{k}", 1, out, part))
                for k, part in enumerate(slices)]
        killed: Set[str] = set()
        restarted = False
        deadline = time.monotonic() + RUN_TIMEOUT
        while any(proc.proc.poll() is None for _id, proc in runs) and time.monotonic() < deadline:
            reached = self.hooks_reached(out, 1)
            if s.kill_after is not None and reached >= s.kill_after and not killed:
                run_id, proc = runs[0]
                if proc.proc.poll() is None:
                    os.kill(proc.proc.pid, signal.SIGKILL)  # ansible-playbook alone, as a kill -9 would
                    killed.add(run_id)
            if s.restart_after is not None and reached >= s.restart_after and not restarted:
                restarted = True
                self.cluster.restart("kube-apiserver")
                self.cluster.restart_controllers()
            time.sleep(0.2)  # a poll of the marker files and the processes; no state depends on its length
        for run_id, proc in runs:
            result.runs.append((run_id, self.finish(proc, out, run_id), run_id in killed))
            self._ended[run_id] = time.time()  # a create after this is a later run's (the recovery's)

    def finish(self, proc: Run, out: Path, run_id: str) -> int:
        try:
            code = proc.wait(max(1.0, RUN_TIMEOUT))
        except Exception:  # noqa: BLE001 - a run that outlives the bound is a violation, told below
            code = -1
        if proc.proc.poll() is None:
            proc.kill()
        (out / f"{run_id}.log").write_text(proc.output)
        try:  # what a killed run left running (its workers): not this explorer's subject
            os.killpg(proc.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.close()
        return code

    def recover(self, s: Schedule, world: World, inventory: str, out: Path, result: Outcome) -> str:
        """What the messages prescribe: the blockers fixed (their budgets deleted), recover.yml for
        each quarantined node, then the maintenance playbook again, at most twice; the last
        run's output."""
        for index in s.blocked:
            self.cluster.client.delete(f"/apis/policy/v1/namespaces/{world.namespace}/poddisruptionbudgets/db{index}")
        wait_for(lambda: not self.runs_alive(), 120, "the gone runs' leases to show them gone")
        output = ""
        for round_ in (2, 3):
            quarantined = [n["metadata"]["name"] for n in self.world_nodes(world)
                           if (n["metadata"].get("labels") or {}).get(QUARANTINED) == "true"]
            if quarantined:
                rec = self.start(s, world, inventory, "", round_, out, None, "recover.yml",
                                 extra={"nmo_nodes": ",".join(quarantined)})
                code = self.finish(rec, out, f"{world.id}recover{round_}")
                if code != 0:
                    result.violations.append(f"recover: recover.yml -e nmo_nodes={','.join(quarantined)} ended {code}")
            run_id = f"{world.id}r{round_}"
            proc = self.start(s, world, inventory, run_id, round_, out, None)
            code = self.finish(proc, out, run_id)
            result.runs.append((run_id, code, False))
            output = (out / f"{run_id}.log").read_text()
            if code == 0:
                break
        return output

    def runs_alive(self) -> List[str]:
        listing = self.cluster.client.get(f"/apis/coordination.k8s.io/v1/namespaces/{leases.LEASE_NAMESPACE}/leases")
        now = self.cluster.client.server_now()
        return [run for run in leases.alive_run_ids(listing.get("items", []), now) if run.startswith(self._world_id)]

    def world_nodes(self, world: World) -> List[Dict[str, Any]]:
        return self.cluster.client.get("/api/v1/nodes", {"labelSelector": f"{WORLD_LABEL}={world.id}"})[
            "items"]

    # -- the invariants --------------------------------------------------------------------------
    def check_budget(self, s: Schedule, rec: Recorder, zone_of: Dict[str, str], admin: Set[str]) -> List[str]:
        found: List[str] = []
        state: Dict[str, Tuple[bool, bool]] = {}
        self._cordons, self._most = 0, 0
        for change in rec.changes:
            was = state.get(change.node, (False, False))
            state[change.node] = (change.cordoned, change.quarantined)
            self._most = max(self._most, sum(1 for c, _q in state.values() if c))
            if change.at == 0.0 or not change.cordoned or was[0]:
                continue  # the start, an uncordon, or no new cordon
            self._cordons += 1
            zone = zone_of[change.node]
            out = sorted(n for n, (c, _q) in state.items() if c and zone_of[n] == zone)
            if s.budget and len(out) > s.budget:
                found.append(f"budget: cordoning {change.node} made {len(out)} nodes of zone {zone} out of service "
                             f"(max {s.budget}): {', '.join(out)}")
            working = sorted(n for n, (c, q) in state.items() if c and not q and n not in admin)
            if len(working) > s.concurrency:
                found.append(f"concurrency: cordoning {change.node} made {len(working)} nodes in maintenance "
                             f"(concurrency {s.concurrency}): {', '.join(working)}")
        return found

    def check_stops(self, rec: Recorder, audit: Path, start: int, names: Set[str]) -> List[str]:
        found = []
        if not rec.stopped_at:
            return found
        creates: List[Tuple[float, str]] = []
        with audit.open("rb") as handle:
            handle.seek(start)
            for line in handle.read().splitlines():
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                ref = entry.get("objectRef") or {}
                if (entry.get("stage") == "ResponseComplete" and entry.get("verb") == "create"
                        and ref.get("resource") == "nodemaintenances"
                        and (entry.get("responseStatus") or {}).get("code") in (200, 201)):
                    when = datetime.fromisoformat(entry["requestReceivedTimestamp"].replace("Z", "+00:00"))
                    creates.append((when.timestamp(), ref.get("name", "")))
        node_of = {nm_name(node): node for node in names}
        for run_id, stopped in rec.stopped_at.items():
            ended = self._ended.get(run_id, float("inf"))
            late = [node_of[name] for when, name in creates if stopped + 0.5 < when < ended
                    and name in node_of and self._slice_of.get(node_of[name]) == run_id]
            if late:
                found.append(f"stop: run {run_id} created {', '.join(late)} after its stop mark")
        return found

    def check_end(self, s: Schedule, world: World, admin: Set[str], last_output: str) -> List[str]:
        found = []
        client = self.cluster.client
        names = set(self._names)
        nms = [nm["metadata"]["name"] for nm in (client.get_or_none(NM_PATH) or {}).get("items", [])
               if (nm.get("spec") or {}).get("nodeName") in names]
        if nms:
            found.append(f"end: NodeMaintenances left: {', '.join(sorted(nms))}")
        prefix = slot_prefix(world)
        listing = client.get(f"/apis/coordination.k8s.io/v1/namespaces/{leases.LEASE_NAMESPACE}/leases")["items"]
        left = [lease["metadata"]["name"] for lease in listing
                if lease["metadata"]["name"].startswith(prefix) or leases.node_of_lease_name(
                    lease["metadata"]["name"]) in names]
        if left:
            found.append(f"end: leases left: {', '.join(sorted(left))}")
        for node in self.world_nodes(world):
            name = node["metadata"]["name"]
            meta, spec = node["metadata"], node.get("spec") or {}
            if name in admin and not spec.get("unschedulable"):
                found.append(f"end: the administrator's cordon of {name} was lifted")
            if (meta.get("labels") or {}).get(QUARANTINED):
                found.append(f"end: {name} is still quarantined")
            if any(t.get("key") == DRAIN_TAINT for t in spec.get("taints") or []):
                found.append(f"end: {name} still has the maintenance taint")
            if name not in admin and spec.get("unschedulable"):
                found.append(f"end: {name} is left cordoned")
            done = (meta.get("annotations") or {}).get(CAMPAIGN_MARK) == f"chaos-{world.id}"
            if not done and f"{name}: not started" not in last_output and f"fatal: [{name}" not in last_output:
                found.append(f"end: {name} was neither maintained nor named by the last run")
        return found

    def check_rc(self, out: Path, result: Outcome) -> List[str]:
        found = []
        for run_id, code, killed in result.runs:
            if killed:
                continue
            report = out / run_id / "report.json"
            if code == -1:
                found.append(f"rc: run {run_id} did not end within {RUN_TIMEOUT} s")
                continue
            if not report.exists():
                continue
            nodes = json.loads(report.read_text()).get("nodes", [])
            failed = [n["name"] for n in nodes if n.get("outcome") == "failed"]
            if code == 0 and failed:
                found.append(f"rc: run {run_id} ended 0 but its report says failed: {', '.join(failed)}")
        return found

    # -- one schedule ----------------------------------------------------------------------------
    def explore(self, s: Schedule) -> Outcome:
        result = Outcome(s)
        started = time.monotonic()
        out = Path(tempfile.mkdtemp(prefix=f"chaos-{s.seed}-", dir=self.workdir))
        world, names, zone_of = self.build(s)
        self._names, self._world_id = names, world.id
        self._ended: Dict[str, float] = {}  # the first round's runs: when each ended
        self._slice_of = {n: f"{world.id}r1s{0 if s.slices == 1 else names.index(n) % 2}" for n in names}
        admin = {names[s.admin_cordon]} if s.admin_cordon is not None else set()
        inventory = write_inventory(world, out)
        audit = Path(self.cluster.dir) / "audit.log"
        audit_start = audit.stat().st_size
        try:
            with Recorder(self.cluster.client, world) as rec:
                self.first_round(s, world, inventory, out, result)
                last = self.recover(s, world, inventory, out, result)
            result.violations += self.check_budget(s, rec, zone_of, admin)
            result.cordons, result.most_out = self._cordons, self._most
            result.violations += self.check_stops(rec, audit, audit_start, set(names))
            result.violations += [f"pdb: {name} lacked {lack} healthy pod(s)" for name, lack in rec.short.items()
                                  if lack > 0 and name == "app"]
            result.violations += self.check_rc(out, result)
            result.violations += self.check_end(s, world, admin, last)
        finally:
            result.seconds = time.monotonic() - started
            if result.violations or self.keep:
                excerpt = out / "audit-excerpt.jsonl"
                with audit.open("rb") as handle:
                    handle.seek(audit_start)
                    keep = [line for line in handle.read().splitlines() if world.id.encode() in line]
                excerpt.write_bytes(b"\n".join(keep[-5000:]))
                result.log = str(out)
            else:
                shutil.rmtree(out, ignore_errors=True)
            world.cleanup()
        return result


# -- the self-check's broken variants ----------------------------------------------------------------
BREAKS = {
    # the run's stop never written nor read: a failure no longer stops the rollout
    "stop-mark": [("plugins/module_utils/model/rollout.py", "    if state.stopped_after is not None:\n"
                   "        return state.stopped_after\n", "    return None\n"),
                  ("plugins/module_utils/model/rollout.py",
                   "        if holder is not None and holder.failed is not None and state.ours(holder.failed.who):",
                   "        if False:")],
    # every budget's limit as large as it can be
    "budgets-ignored": [("plugins/module_utils/model/topology_budgets.py", "    budget = domain.budget\n"
                         "    if budget.percent is None:\n        return int(budget.count or 1)\n",
                         "    return 1000\n")],
    # a cordoned node holding no lease (a quarantine) not counted against its zone
    "quarantine-not-counted": [("plugins/module_utils/model/topology_budgets.py",
                                "    return bool((node.get(\"spec\") or {}).get(\"unschedulable\")) or not is_ready(node)",
                                "    return not is_ready(node)")],
}


# each broken variant's seed (hack/chaos --self-check and tests/chaos/test_chaos.py)
SELF_CHECK_SEEDS = {"stop-mark": 11, "budgets-ignored": 12, "quarantine-not-counted": 13}


def broken_copy(variant: str, where: Path) -> str:
    """A copy of the collection with one rule broken; its ANSIBLE_COLLECTIONS_PATH."""
    tree = where / "ansible_collections" / "nmo" / "maintenance"
    shutil.copytree(ROOT, tree, ignore=shutil.ignore_patterns(".git", ".cache", ".cluster*", ".venv", "__pycache__"))
    for rel, old, new in BREAKS[variant]:
        path = tree / rel
        text = path.read_text()
        if old not in text:
            raise RuntimeError(f"self-check {variant}: {rel} no longer holds the line it breaks: {old!r}")
        path.write_text(text.replace(old, new, 1))
    return str(where)


def replay_command(seed: int, variant: str = "") -> str:
    return f"hack/chaos --seed {seed} --schedules 1" + (f" --variant {variant}" if variant else "")


def line(outcome: Outcome, variant: str = "") -> str:
    s = outcome.schedule
    verdict = "ok" if not outcome.violations else f"{len(outcome.violations)} violation(s)"
    runs = " ".join(f"{run_id[-4:]}={'killed' if killed else rc}" for run_id, rc, killed in outcome.runs)
    return (f"seed {s.seed}: {s.describe()} | {runs} | {outcome.cordons} cordons, at most {outcome.most_out} out | "
            f"{outcome.seconds:.0f} s | {verdict}")


def as_json(outcome: Outcome) -> str:
    return json.dumps({"schedule": asdict(outcome.schedule), "violations": outcome.violations,
                       "runs": outcome.runs, "seconds": round(outcome.seconds, 1), "log": outcome.log})


def faults_by_kind(outcomes: List[Outcome]) -> Counter:
    return Counter(kind for o in outcomes for kind in o.schedule.faults())


def violated(text: str) -> bool:
    return bool(re.search(r"\d+ violation", text))
