"""The model explorer (issue 42; docs/reliability.md): Hypothesis' stateful testing over a world of
nodes in zones and runs, whose every begin is decided by the collection's own rules
(tests/unit/explorer_model.py composes them as the begin does).

The steps are what the world can do: a node asks to begin, finishes, fails (kept or rolled
back), is blocked (skipped or quarantined, within ``max_blocked``, model/blocked.py), a run is
killed, a gone run's leases lapse, a rerun starts, recover.yml ends a node, an administrator
cordons one. After every begin and every step:

* budget: a node that begins never makes its zone's nodes out of service (in maintenance, kept,
  quarantined, an administrator's) more than the budget; the nodes in maintenance never more than
  the concurrency;
* stop: no node of a run begins after that run's stop mark (its own places held excepted);
* no dead wait: a node is told to wait only while the nodes that nothing in flight releases
  leave a place of its domain to come free.

The default profile runs in a few seconds, derandomized (the same examples every run); the
``long`` profile (``HYPOTHESIS_PROFILE=long``) explores far more. A failure prints the shrunk
steps; replay it with the printed ``@reproduce_failure`` or as a test of its own below. The
self-check runs the explorer against broken copies of the rules and asserts it fails for each.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule, run_state_machine_as_test

from ansible_collections.nmo.maintenance.plugins.module_utils.model import blocked, rollout, topology_budgets
from ansible_collections.nmo.maintenance.plugins.module_utils.model.marks import is_ready

from .explorer_model import ADMIN, DONE, IDLE, IN, KEPT, QUARANTINE, Node, World

settings.register_profile("default", max_examples=400, stateful_step_count=30, derandomize=True, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
# the self-check looks for a failure, not its smallest form: no shrinking
settings.register_profile("self-check", max_examples=200, stateful_step_count=25, derandomize=True, deadline=None,
                          phases=[Phase.explicit, Phase.generate], suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("long", max_examples=5000, stateful_step_count=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "default")


class Rollouts(RuleBasedStateMachine):
    """Nodes in zones under a zone budget (or none) and a concurrency, one or more runs."""

    @initialize(nodes=st.integers(3, 8), zones=st.integers(1, 3), concurrency=st.integers(1, 4),
                budget=st.one_of(st.none(), st.integers(1, 2)), max_blocked=st.integers(1, 2),
                on_blocked=st.sampled_from(blocked.POLICIES))
    def world(self, nodes, zones, concurrency, budget, max_blocked, on_blocked):
        self.w = World(zones, concurrency, budget)
        for i in range(nodes):
            name = f"n{i}"
            self.w.nodes[name] = Node(name, f"z{i % zones}")
        self.runs = 1
        self.w.alive.append("r1")
        self.max_blocked, self.on_blocked = max_blocked, on_blocked
        self.blocked_in: dict = {}
        self.history: list = []

    # -- helpers -------------------------------------------------------------------------------
    def pick(self, data, states, alive_only=False) -> str:
        names = sorted(n.name for n in self.w.nodes.values() if n.state in states
                       and (not alive_only or n.run in self.w.alive))
        return data.draw(st.sampled_from(names)) if names else ""

    # -- steps ---------------------------------------------------------------------------------------
    @rule(data=st.data())
    def begin(self, data):
        name = self.pick(data, (IDLE,))
        if not name or not self.w.alive:
            return
        run = data.draw(st.sampled_from(sorted(self.w.alive)))
        decision, looked = self.w.decide(name, run)
        self.history.append(("begin", name, run, decision.action))
        if decision.action == rollout.BEGIN:
            assert run not in self.w.stopped, f"stop: {name} began in {run} after it stopped ({self.w.stopped[run]})"
            self.w.take(name, run, looked)
            zone = self.w.nodes[name].zone
            out = self.w.out_in_zone(zone)
            assert self.w.budget is None or len(out) <= self.w.budget, \
                f"budget: {name} began, and zone {zone} has {len(out)} nodes out of service: {out}"
            working = self.w.in_maintenance()
            assert len(working) <= self.w.concurrency, f"concurrency: {len(working)} in maintenance: {working}"
        elif decision.action == rollout.WAIT:
            around = set(looked.get("blockers", [])) | set(looked.get("out", []))
            stuck = sorted(n for n in around if self.w.stuck(n))
            assert len(stuck) < looked.get("limit", 1), \
                f"dead wait: {name} waits in {run} for {sorted(around)}, and {stuck} are released by nothing in flight"

    @rule(data=st.data())
    def finish(self, data):
        name = self.pick(data, (IN,), alive_only=True)
        if name:
            node = self.w.nodes[name]
            node.state, node.leases, node.run, node.slot, node.place = DONE, False, "", -1, -1

    @rule(data=st.data(), keep=st.booleans())
    def fail(self, data, keep):
        name = self.pick(data, (IN,), alive_only=True)
        if not name:
            return
        node = self.w.nodes[name]
        self.w.stopped.setdefault(node.run, f"{name}/work")
        node.failed_run, node.failed_phase = node.run, "work"
        if keep:
            node.state = KEPT
        else:  # rolled back: back in service, its record kept
            node.state, node.leases, node.run, node.slot, node.place = IDLE, False, "", -1, -1

    @rule(data=st.data())
    def blocked_drain(self, data):
        name = self.pick(data, (IN,), alive_only=True)
        if not name:
            return
        node = self.w.nodes[name]
        before = self.blocked_in.setdefault(node.run, [])
        verdict = blocked.decide(self.on_blocked, "drain", "drain timed out", len(before), self.max_blocked)
        if verdict.action == blocked.SKIP:
            before.append(name)
            node.state, node.leases, node.run, node.slot, node.place = IDLE, False, "", -1, -1
        elif verdict.action == blocked.QUARANTINE:
            before.append(name)
            node.state, node.leases, node.run, node.slot, node.place = QUARANTINE, False, "", -1, -1
        else:  # a failure: the run stops, the node rolled back (policy auto, drain phase)
            self.w.stopped.setdefault(node.run, f"{name}/drain")
            node.failed_run, node.failed_phase = node.run, "drain"
            node.state, node.leases, node.run, node.slot, node.place = IDLE, False, "", -1, -1

    @precondition(lambda self: len(self.w.alive) > 0)
    @rule(data=st.data())
    def kill(self, data):
        run = data.draw(st.sampled_from(sorted(self.w.alive)))
        self.w.alive.remove(run)

    @rule(data=st.data())
    def lapse(self, data):
        names = sorted(n.name for n in self.w.nodes.values() if n.leases and n.run not in self.w.alive)
        if names:
            node = self.w.nodes[data.draw(st.sampled_from(names))]
            node.leases, node.slot, node.place = False, -1, -1

    @precondition(lambda self: len(self.w.alive) < 2)
    @rule()
    def rerun(self):
        """A new run: it resumes first the nodes a gone run left (design §18.3), its own places
        kept, or taken again within the concurrency when they lapsed."""
        self.runs += 1
        run = f"r{self.runs}"
        self.w.alive.append(run)
        for node in sorted(self.w.nodes.values(), key=lambda n: n.name):
            if node.state in (IN, KEPT) and node.run not in self.w.alive:
                node.state, node.run = IN, run
                node.failed_run = node.failed_phase = ""
                if not node.leases and len(self.w.in_maintenance()) < self.w.concurrency:
                    node.leases, node.slot, node.place = True, self.w.free_slot(), -1

    @rule(data=st.data())
    def recover(self, data):
        name = self.pick(data, (KEPT, QUARANTINE))
        if name:
            node = self.w.nodes[name]
            node.state, node.leases, node.run, node.slot, node.place = IDLE, False, "", -1, -1
            node.failed_run = node.failed_phase = ""

    @rule(data=st.data())
    def admin_cordon(self, data):
        name = self.pick(data, (IDLE, DONE))
        if name:
            self.w.nodes[name].state = ADMIN

    @invariant()
    def an_administrators_cordon_is_kept(self):
        # the model never lifts one; a rule that did would have to change the state itself
        assert all(n.state != ADMIN or not n.leases for n in self.w.nodes.values())


def explore(profile: str = PROFILE) -> None:
    run_state_machine_as_test(Rollouts, settings=settings.get_profile(profile))


def test_the_rules_keep_every_invariant_over_the_explored_schedules():
    explore()


# -- the self-check: an explorer that cannot fail proves nothing ------------------------------------
BROKEN: dict = {
    "the run's stop never read": (rollout, "stopped_by", lambda state, blockers: None),
    "budgets ignored": (topology_budgets, "limit", lambda domain, total: 1000),
    "a quarantined node not counted": (topology_budgets, "out_of_service", lambda node: not is_ready(node)),
    "a stuck domain waited for": (rollout, "full_of_stuck", lambda *args: None),
}


@pytest.mark.parametrize("variant", sorted(BROKEN))
def test_the_explorer_catches_a_broken_rule(monkeypatch, variant):
    module, name, broken = BROKEN[variant]
    monkeypatch.setattr(module, name, broken)
    with pytest.raises(AssertionError):
        explore("self-check")


def test_a_quarantine_holds_its_zone_place():
    """The shrunk case of issue 41 item 2, kept as a regression: one zone, budget 1; n0
    quarantined, then n1 asks to begin."""
    w = World(1, 2, 1)
    for i in range(2):
        w.nodes[f"n{i}"] = Node(f"n{i}", "z0")
    w.alive.append("r1")
    w.nodes["n0"].state = QUARANTINE
    decision, _looked = w.decide("n1", "r1")
    assert decision.action == rollout.STOP and decision.fails_run, decision


def test_a_kept_node_of_a_gone_run_without_a_place_stops_the_next_run():
    """Issue 41 item 3: n0 kept by gone run r0 that had no budget (a slot, no zone place)."""
    w = World(1, 2, 1)
    for i in range(2):
        w.nodes[f"n{i}"] = Node(f"n{i}", "z0")
    w.alive.append("r1")
    n0 = w.nodes["n0"]
    n0.state, n0.run, n0.leases, n0.slot, n0.failed_run, n0.failed_phase = KEPT, "r0", True, 0, "r0", "work"
    decision, _looked = w.decide("n1", "r1")
    assert decision.action == rollout.STOP and "run r0, which is gone" in decision.say, decision
