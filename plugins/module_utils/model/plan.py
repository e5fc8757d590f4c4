"""What a run does with a node, decided once: the one rule the role and the playbook ask.

Given where the node stands (its report, as ``maintenance/info.describe`` gives it), the run
asking, the campaign and the window's end, a node is

* ``skip-owned``: its NodeMaintenance is held by another run that is alive (its run lease is
  being renewed). Never adopted: that run finishes it. The begin applies the same rule at the
  moment it writes (``owned_by``), so a run that took the node after the look is answered the
  same way, not with a failure.
* ``finish``: in flight (a NodeMaintenance exists) and already done for this campaign: the
  earlier run drained it and did the work, only the end is left.
* ``full``: in flight otherwise (resumed from the start of the lifecycle), or not in flight
  and nothing says to skip it.
* ``settle``: not in flight, and its end marked it for the settle (``nmo.maintenance/settle-ended``,
  docs/design.md §4.9.1) that did not finish (the run was killed, or the settle failed): only the
  settle is left, before the campaign mark or the window are looked at.
* ``skip-done``: not in flight, and done already for this campaign (the node's campaign mark).
* ``skip-window``: not in flight, and the window ended: no node is begun after it. A node in
  flight is still finished: leaving it half done would be worse.

``resume``: in flight, not another live run's, and holding places or past ``Pending``
(``rollout.resumes_first``). The maintenance playbook takes those nodes first, so they finish
before anything new starts; a ``Pending`` NodeMaintenance of a gone run, which holds nothing,
is taken with the new nodes (docs/design.md §18.3). Pure: the caller reads the cluster and the clock.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any, Dict, Optional

from . import rollout

FULL, FINISH, SKIP_OWNED, SKIP_DONE, SKIP_WINDOW = "full", "finish", "skip-owned", "skip-done", "skip-window"
SETTLE = "settle"
PLANS = (FULL, FINISH, SETTLE, SKIP_OWNED, SKIP_DONE, SKIP_WINDOW)
SETTLE_MARK = "nmo.maintenance/settle-ended"  # model/settle.py's ENDED: the end wrote it, the settle removes it
CAMPAIGN_MARK = "nmo.maintenance/campaign"  # the node annotation the end writes for a campaign
WINDOW_OPTION = "node_maintenance_window_end"  # named in what is said, as the operator gave it


@dataclass(frozen=True)
class Window:
    """The window's end: the moment, and the text the operator gave (said back as given)."""

    end: datetime
    given: str

    @property
    def at(self) -> str:
        return self.end.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Plan:
    node: str
    plan: str
    owner: str = ""  # skip-owned: the live run that holds the node ("" for one NMO keeps for someone else)
    say: str = ""  # skip-owned, skip-window: the line that tells the operator why
    outcome: str = ""  # the node's result in the run's summary, when the plan is carried out
    resume: bool = False

    def as_dict(self) -> Dict[str, Any]:
        return asdict(self)


def _run_of(report: Dict[str, Any]) -> Dict[str, Any]:
    return report.get("run") or {}


def in_flight(report: Dict[str, Any]) -> bool:
    return report.get("maintenance") is not None


def live_owner(report: Dict[str, Any], run_id: str) -> Optional[str]:
    """The other run, alive, that holds the node's NodeMaintenance; None when there is none."""
    run = _run_of(report)
    if in_flight(report) and run.get("alive") and run.get("id") and run.get("id") != run_id:
        return str(run["id"])
    return None


def done_in(report: Dict[str, Any], campaign: str) -> bool:
    return bool(campaign) and (report.get("annotations") or {}).get(CAMPAIGN_MARK, "") == campaign


def window_closed(window: Optional[Window], now: datetime) -> bool:
    return window is not None and window.end <= now


def owned_by(node: str, owner: str) -> Plan:
    """skip-owned, said the same way whether the look or the begin found the owner."""
    if owner:
        say = (f"{node} is in maintenance by run {owner}, which is alive (its run lease is being renewed): "
               "left to that run, not adopted.")
        outcome = f"skipped (in maintenance by run {owner}, alive)"
    else:
        say = (f"{node} has a NodeMaintenance this collection did not make, which the Node Maintenance Operator "
               "maintains for someone else: left to them.")
        outcome = "skipped (a NodeMaintenance made by someone else, left to NMO)"
    return Plan(node=node, plan=SKIP_OWNED, owner=owner, say=say, outcome=outcome)


def window_over(node: str, window: Window, now: datetime) -> Plan:
    minutes = math.floor((now - window.end).total_seconds() / 60)
    return Plan(node=node, plan=SKIP_WINDOW,
                say=f"the window ended at {window.at} ({minutes} min ago, {WINDOW_OPTION} {window.given}): "
                    f"{node} not begun",
                outcome=f"skipped (window ended {window.given})")


def plan_node(node: str, report: Dict[str, Any], run_id: str, campaign: str = "",
              window: Optional[Window] = None, now: Optional[datetime] = None) -> Plan:
    """The plan for ``node`` as ``report`` shows it, for run ``run_id``, at ``now``."""
    owner = live_owner(report, run_id)
    if owner is not None:
        return owned_by(node, owner)
    done = done_in(report, campaign)
    if in_flight(report):  # resumed first only when it holds places or got past Pending (model/rollout.py)
        return Plan(node=node, plan=FINISH if done else FULL, outcome="succeeded",
                    resume=rollout.resumes_first(report))
    if SETTLE_MARK in (report.get("annotations") or {}):
        return Plan(node=node, plan=SETTLE, outcome="succeeded", resume=True)
    if done:
        return Plan(node=node, plan=SKIP_DONE, outcome=f"skipped (done in campaign {campaign})")
    moment = now or datetime.now(timezone.utc)
    if window is not None and window_closed(window, moment):
        return window_over(node, window, moment)
    return Plan(node=node, plan=FULL, outcome="succeeded")
