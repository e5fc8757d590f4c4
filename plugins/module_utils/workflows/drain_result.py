"""What a drain returns beyond its counts: the pods by what became of them, the drain rules'
batches and holds, and, in a dry run, the plan with the API server's verdict a pod."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ..api.client import Client
from ..model.pod_filters import COMPLETE, DELETE, EVICT, WAIT, PodPlan
from ..model.tracking import PendingPod, Tracker
from . import dry_run
from .drain_options import DrainOptions


def brief(pod: PendingPod, reason: Optional[str] = None) -> Dict[str, Any]:
    return {"namespace": pod.plan.namespace, "name": pod.plan.name, "reason": reason or pod.plan.reason}


def outcome_lists(tracker: Tracker) -> Dict[str, List[Dict[str, Any]]]:
    """evicted / deleted: our request was accepted; gone: it left without one (already
    terminating, or removed by someone else meanwhile)."""
    out: Dict[str, List[Dict[str, Any]]] = {"evicted": [], "deleted": [], "gone": [], "completed": [],
                                            "left_terminating": [], "surged": []}
    for pod in sorted(tracker.done, key=lambda p: p.key):
        if pod.surged:
            out["surged"].append({**brief(pod, f"Deployment {pod.surged} restarted (surge): its new pod was made "
                                               "elsewhere before this one went"), "deployment": pod.surged})
        if pod.left_terminating:
            out["left_terminating"].append(brief(pod, tracker.left_reason(pod)))
        elif pod.action == COMPLETE:
            out["completed"].append(brief(pod))
        elif not pod.accepted:
            out["gone"].append(brief(pod, "already terminating" if pod.action == WAIT else "gone before our request"))
        elif pod.action == EVICT:
            out["evicted"].append(brief(pod))
        else:
            reason = f"refused by its PodDisruptionBudget {tracker.fallback_for()}" if pod.fallback else None
            out["deleted"].append(brief(pod, reason))
    return out


def check_plan(client: Client, opts: DrainOptions, acting: List[PodPlan]) -> Dict[str, Any]:
    """The drain's dry run: each pod it would act on, and whether its PodDisruptionBudget lets
    it go now (a server-side dry-run eviction, nothing written), as a diff of the pods on the
    node before and after."""
    evicting = [p for p in acting if p.action == EVICT and not p.blocked]
    answers = dry_run.dry_run_all(client, evicting, opts.requests_at_once(len(evicting)))
    plan = {}
    for p in acting:
        if p.action == EVICT and p.blocked:
            plan[p.key] = f"blocked: annotated {p.blocked}, never evicted"
        elif p.action == EVICT:
            plan[p.key] = "evict: " + dry_run.verdict_text(answers[p.key])
        elif p.action == DELETE and p.blocked:
            plan[p.key] = f"blocked: annotated {p.blocked}, never deleted"
        elif p.action == DELETE:
            plan[p.key] = "delete (finished, or eviction disabled)"
        elif p.action == COMPLETE:
            plan[p.key] = "wait until it completes (wait-completed)"
        else:
            plan[p.key] = "wait for it (already being deleted)"
    refused = [k for k, a in answers.items() if a.answer != dry_run.ALLOWED]
    return {"would_evict_now": {"allowed": [k for k, a in answers.items() if a.answer == dry_run.ALLOWED],
                                "refused": refused},
            "diff": {"before": {"pods": sorted(plan)},
                     "after": {"pods": [], "plan": plan}}}


def rule_result(plans: List[PodPlan]) -> Dict[str, Any]:
    """What the drain rules made of the node: its order batches (lowest first, each with its
    pods counted), the pods annotated do-not-disrupt and those waited for to complete."""
    orders: Dict[int, int] = {}
    for p in plans:
        if p.action in (EVICT, DELETE, WAIT):
            orders[p.order] = orders.get(p.order, 0) + 1
    return {"batches": [{"order": o, "pods": n} for o, n in sorted(orders.items())],
            "do_not_disrupt": [{**p.brief(), "annotation": p.blocked} for p in plans if p.blocked],
            "wait_completed": [p.brief() for p in plans if p.action == COMPLETE]}
