"""What a failed maintenance does with its node, and the line that tells the operator.

The failure policy, per phase. Before the node's work began (the begin, the lease wait,
the before-drain hooks, the drain) nothing was done to the machine: returning the node to
service is safe, so ``auto`` rolls it back. From the work on (the work hooks, the Ready
wait, the gate, the confirmation) the machine may be half-done (a firmware flash that
failed its verify): ``auto`` keeps it out of service, cordoned and tainted, with its
NodeMaintenance ``Failed``, its node lease and its slot (it is still out, so it still
counts against the concurrency limit). A failure of the end itself (the work was done and
checked) finishes what the end began: rolled back. ``rollback`` and ``keep`` apply to every
phase.

Pure functions: the node's progress record (record.py, kept in the cluster) says which phase
it reached, this decides; the line is built from what was really done and what the cluster
shows after.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Dict, List, Optional, Tuple

from ..errors import InputError
from . import record
from .times import parse_time

AUTO, ROLLBACK, KEEP = "auto", "rollback", "keep"
POLICIES = (AUTO, ROLLBACK, KEEP)

# The role's phases, in order; the node's progress record (record.py) says which one it reached.
PHASES = record.PHASES
BEGIN, BEFORE_DRAIN, DRAIN, WORK, READY, GATE, CONFIRM, END = PHASES
BEFORE_WORK = (BEGIN, BEFORE_DRAIN, DRAIN)
KEPT_BY_AUTO = (WORK, READY, GATE, CONFIRM)
UNKNOWN_DEFAULT = WORK  # the earliest phase where the machine may be half-done


def phase_of(progress: Optional[record.Record]) -> Tuple[str, str]:
    """The phase a failure happened in: the one the node's progress record says it reached
    (every phase writes it as it starts), and a note when the record cannot say. Without a
    readable phase the failure is taken as in the work phase, the earliest where the machine
    may be half-done: ``auto`` then keeps the node out of service rather than return to
    service a machine whose state nobody knows."""
    if progress is not None and progress.phase_known:
        return progress.phase, ""
    what = ("the node's NodeMaintenance has no progress record" if progress is None
            else f"its progress record names no known phase ({progress.phase or 'none'!s})")
    return UNKNOWN_DEFAULT, (f"the phase that failed is unknown ({what}): taken as the "
                             f"{UNKNOWN_DEFAULT} phase, the earliest where the machine may be half-done")


def keeps(policy: str, phase: str) -> bool:
    """Whether the node stays out of service (True) or is rolled back (False)."""
    if policy not in POLICIES:
        raise InputError(f"policy must be one of {', '.join(POLICIES)}, got {policy!r}")
    if phase not in PHASES:
        raise InputError(f"phase must be one of {', '.join(PHASES)}, got {phase!r}")
    if policy == AUTO:
        return phase in KEPT_BY_AUTO
    return policy == KEEP


def why(policy: str, phase: str, kept: bool) -> str:
    """The reason for the outcome, as the message gives it."""
    if policy != AUTO:
        return f"policy {policy}"
    if kept:
        return f"policy auto: its work failed, in the {phase.replace('_', '-')} phase"
    return f"policy auto: it failed in the {phase.replace('_', '-')} phase, " + (
        "before its work began" if phase in BEFORE_WORK else "after its work was done and checked")


def held_for(renew_time: Optional[str], duration: Optional[int], now: datetime) -> str:
    """'for another N s' from a lease's renewTime and duration, against ``now`` (the cluster's)."""
    if not renew_time or not duration:
        return ""
    parsed = parse_time(renew_time)
    if parsed is None:
        return ""
    renewed = parsed.astimezone(timezone.utc).replace(tzinfo=None, microsecond=0)  # whole seconds, as it was shown
    left = duration - (now.replace(tzinfo=None) - renewed).total_seconds()
    return f" (expires in {max(0, int(left))} s unless renewed)"


def node_state(report: Optional[Dict[str, Any]], now: datetime) -> str:
    """Where the node stands, from an nmo_info report read after the failure."""
    if report is None:
        return "its state could not be read"
    parts = ["cordoned" if report["unschedulable"] else "schedulable"]
    taints = [f"{t['key']}:{t['effect']}" for t in report.get("maintenance_taints") or []]
    parts.append("tainted " + ", ".join(taints) if taints else "no maintenance taint")
    nm = report.get("maintenance")
    parts.append(f"NodeMaintenance {nm['name']} {nm.get('phase') or 'without a phase'}" if nm
                 else "no NodeMaintenance")
    ours = [lease for lease in report.get("leases") or []
            if lease.get("slot") or lease.get("name") == f"node-{report['node']}"]
    if ours:
        parts.append("holds " + ", ".join(
            ("slot " if lease.get("slot") else "node lease ") + lease["name"]
            + held_for(lease.get("renewTime"), lease.get("leaseDurationSeconds"), now) for lease in ours))
    else:
        parts.append("no lease held")
    return ", ".join(parts)


def recover_command(node: str) -> str:
    return f"ansible-playbook playbooks/recover.yml -e nmo_nodes={node}"


def message(node: str, error: str, outcome: Dict[str, Any]) -> str:
    """The failed node's last line: what failed, what was done about it, where the node is, what to run.

    ``outcome``: phase, policy, kept, rolled_back, recorded, reached (the begin steps done),
    maintenance (its name, or None), state (node_state), dry_run (Ansible's check mode), warnings
    (a record that failed, say), left_to (another live run holds it now).
    """
    head = f"maintenance of node {node} failed ({outcome['phase'].replace('_', '-')} phase): {error}."
    if outcome.get("left_to"):
        return (f"{head} Run {outcome['left_to']}, alive, holds its maintenance now: nothing was changed; "
                "that run ends it.")
    if outcome.get("dry_run"):
        return f"{head} Check mode: nothing was written, nothing to roll back."
    if not outcome.get("reached") and not outcome.get("maintenance"):
        return f"{head} Nothing was written for it: the node is as it was."
    said: List[str] = [head]
    name = outcome.get("maintenance")
    if outcome.get("node_deleted"):  # nothing to keep out of service or return to it: the node is gone
        said.append("The node was deleted during its maintenance: nothing to roll back on it; this run's leases "
                    "are released so they hold no place"
                    + (f"; its NodeMaintenance {name} is kept as Failed" if name else "")
                    + f". End it: {recover_command(node)}")
        return " ".join(said)
    reason = why(outcome["policy"], outcome["phase"], outcome["kept"])
    if outcome.get("rolled_back"):
        found = outcome.get("left_as_found") or []
        back = ("what this maintenance put on the node is removed, but " + "; ".join(found) if found
                else "the node is back in service")
        said.append(f"It was rolled back ({reason}): {back}"
                    + (f"; its NodeMaintenance {name} is kept as Failed." if name and outcome.get("recorded")
                       else "."))
    elif outcome["kept"]:
        said.append(f"It is kept out of service ({reason})"
                    + (f"; its NodeMaintenance {name} says Failed." if outcome.get("recorded") else "."))
    else:
        said.append(f"It was not rolled back ({reason}): nothing of the node was ours to undo.")
    for warning in outcome.get("warnings") or []:
        said.append(warning.rstrip(".") + ".")
    said.append(f"Now: {outcome['state']}.")
    if outcome.get("rolled_back"):
        said.append(f"Fix the cause and run again, or remove the record: {recover_command(node)}")
    else:
        said.append(f"Fix the cause, then run again to resume it (-l {node}), or end it: {recover_command(node)}")
    return " ".join(said)


def known_state(reached: List[str], maintenance: Optional[str], duration: int) -> str:
    """Where the node stands as far as this run knows, from the begin steps it did: for when
    the cluster cannot be read after the failure."""
    if not reached:
        return "nothing was written for it"
    parts = ["cordoned" if "cordon" in reached else "not cordoned by this run",
             "tainted medik8s.io/drain:NoSchedule" if "taints" in reached else "not tainted by this run"]
    if "maintenance" in reached:
        parts.append(f"NodeMaintenance {maintenance or 'of the node'} not marked Failed")
    if "lease" in reached:
        parts.append(f"its node lease and slot held until they lapse, up to {duration} s after their last renewal")
    return ", ".join(parts)


def unrecorded_message(node: str, error: str, record_error: str, state: str) -> str:
    """The last line when the failure record itself failed (RBAC revoked, API server gone):
    what the node is left with, as far as this run knows, and what to run."""
    return (f"maintenance of node {node} failed: {error}. The failure could not be recorded either "
            f"({record_error}), so nothing was rolled back. As far as this run knows: {state}. "
            f"Once the API server lets it, end it: {recover_command(node)}, or run again to resume it (-l {node}).")
