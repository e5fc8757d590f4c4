"""A node that cannot be drained: is the failure a block, and what the run does about it
(``node_maintenance_on_blocked``, ``node_maintenance_max_blocked``; docs/design.md §18.4).

A node is *blocked* when its drain cannot finish before its work: a PodDisruptionBudget that
never allows the eviction, pods that never leave, the drain timeout. The drain says what
blocked it (``blocker``, its result); every other failure, and any failure in or after the
work phase, is not a block: it takes the failure policy (failure.py) and stops the rollout.

* ``stop`` (the default): a block is a failure like any other.
* ``skip``: the node is returned to service as it was found, its maintenance ended, and the
  rollout goes on.
* ``quarantine``: the node stays cordoned, with the label and an annotation
  (marks.QUARANTINED) naming the blocker, its maintenance ended and its leases released; the
  rollout goes on.

At most ``max_blocked`` nodes of a run are skipped or quarantined; the one after them is a
failure, and stops the rollout. The count is kept on the run lease (``BLOCKED``), read as the
cluster holds it, so every batch and every process of the run sees the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..errors import InputError
from . import failure

STOP, SKIP, QUARANTINE = "stop", "skip", "quarantine"
POLICIES = (STOP, SKIP, QUARANTINE)
FAIL = "fail"  # the verdict that sends the node down the failure path (failure.py, rollout.py)
BLOCKED = "nmo.maintenance/blocked"  # on the run lease: the nodes skipped or quarantined, comma-separated
BLOCKED_PHASES = (failure.DRAIN,)  # a drain that cannot finish is the only block


@dataclass(frozen=True)
class Verdict:
    action: str  # FAIL, SKIP or QUARANTINE
    block: bool  # whether the failure was a block at all
    why: str  # what was done and why, without the blocker (the node's line and its error say it)
    blocker: str = ""  # what blocked the drain, as the drain says it

    @property
    def goes_on(self) -> bool:
        """Whether the rollout goes on past this node."""
        return self.action in (SKIP, QUARANTINE)


def validate(policy: str, bound: int) -> None:
    if policy not in POLICIES:
        raise InputError(f"node_maintenance_on_blocked must be one of {', '.join(POLICIES)}, got {policy!r}")
    if isinstance(bound, bool) or not isinstance(bound, int) or bound < 0:
        raise InputError(f"node_maintenance_max_blocked must be a whole number, 0 or more, got {bound!r}")


def decide(policy: str, phase: str, blocker: str, blocked_before: int, bound: int, scope: str = "this run") -> Verdict:
    """What a failed node gets. ``blocker``: what the drain says blocked it ("" when the failure
    was not a block); ``blocked_before``: the nodes of this run (``scope``: or of its rollout of
    several runs, model/rollout_record.py) skipped or quarantined before it."""
    validate(policy, bound)
    if phase not in failure.PHASES:
        raise InputError(f"phase must be one of {', '.join(failure.PHASES)}, got {phase!r}")
    if phase not in BLOCKED_PHASES or not blocker:
        return Verdict(FAIL, False, "")
    if policy == STOP:
        return Verdict(FAIL, True, "its drain is blocked and node_maintenance_on_blocked is stop", blocker)
    if blocked_before + 1 > bound:
        return Verdict(FAIL, True, f"its drain is blocked, the {ordinal(blocked_before + 1)} blocked node of {scope}: "
                                   f"more than node_maintenance_max_blocked ({bound}) stops the rollout", blocker)
    done = "returned to service as it was found" if policy == SKIP else "quarantined (kept cordoned)"
    return Verdict(policy, True, f"{done}, the rollout goes on ({blocked_before + 1} of at most {bound} "
                                 f"blocked nodes, node_maintenance_on_blocked {policy})", blocker)


def operator_blocker(status: Dict[str, Any], timeout: float) -> str:
    """Operator mode: what blocked the Node Maintenance Operator's drain, from its NodeMaintenance
    status when our wait for it ran out (``timeout`` seconds); "" when that is no block.

    NMO drains with kubectl's library and, on an eviction refused (a PodDisruptionBudget), keeps
    the phase Running, writes the refusal to ``lastError`` and the pods still there to
    ``pendingPods``, and tries again: it never fails the maintenance for it. Pods still pending
    when the wait ends are the block, as the standalone drain's timeout with pods pending is.
    No pending pod (NMO waiting for its node lease, say) is no block."""
    pending = [str(p) for p in status.get("pendingPods") or []]
    if status.get("phase") in ("Succeeded", "Failed") or not pending:
        return ""
    shown = ", ".join(pending[:10]) + (f" ({len(pending) - 10} more)" if len(pending) > 10 else "")
    said = f"the Node Maintenance Operator's drain did not finish in {timeout:g} s; pending: {shown}"
    return f"{said}; last error: {status['lastError']}" if status.get("lastError") else said


def ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def preflight_goes(policy: str, bound: int, blocked: Sequence[str], drain_blocked: Sequence[str]) -> Tuple[bool, str]:
    """Whether the pre-flight lets the run begin with ``blocked`` nodes (its no-go), and what it says:
    with ``skip`` or ``quarantine`` a node whose only blockers are its drain's (``drain_blocked``)
    is left to that policy, as long as they are no more than the bound; any other blocker stops."""
    validate(policy, bound)
    if not blocked:
        return True, ""
    others = [n for n in blocked if n not in drain_blocked]
    if policy == STOP or others:
        return False, ""
    if len(blocked) > bound:
        return False, (f"{len(blocked)} node(s) whose drain would not finish, more than node_maintenance_max_blocked "
                       f"({bound}): the rollout would stop")
    return True, (f"left to node_maintenance_on_blocked {policy} (the drain would not finish): {', '.join(blocked)}")


OUTCOMES = {SKIP: "skipped", QUARANTINE: "quarantined"}  # the first word of a blocked node's outcome


def outcome(verdict: Verdict) -> str:
    """The node's result in the run's summary and report."""
    return f"{OUTCOMES[SKIP] if verdict.action == SKIP else OUTCOMES[QUARANTINE]} (blocked: {verdict.blocker})"


def left_as(text: Optional[str]) -> str:
    """What an outcome (outcome()'s sentence) says was done to a blocked node: "skipped",
    "quarantined", or "" for any other outcome (a failure)."""
    word = (text or "").split(" ", 1)[0]
    return word if word in OUTCOMES.values() and (text or "").startswith(f"{word} (blocked") else ""


def parse(text: Optional[str]) -> List[str]:
    """The nodes named by the run lease's ``BLOCKED`` annotation."""
    return [n for n in (text or "").split(",") if n]


def added(text: Optional[str], node: str) -> str:
    """The annotation with ``node`` in it (once)."""
    nodes = parse(text)
    return ",".join(nodes if node in nodes else nodes + [node])
