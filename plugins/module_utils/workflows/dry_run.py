"""Server-side dry-run evictions (``dryRun=All``: nothing is written): whether the API server
would let each pod go now, by the PodDisruptionBudgets as they stand. The pre-flight judges
a node with them; the drain's check mode shows them per pod."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Dict, List, Tuple

from ..api import paths
from ..api.client import Client
from ..errors import ApiError, DisruptionBudgetRefusal, NotFound, TooManyRequests
from ..model.pod_filters import PodPlan

ALLOWED, REFUSED, FAILED, GONE = "allowed", "refused", "error", "gone"


@dataclass(frozen=True)
class DryRun:
    answer: str  # ALLOWED, REFUSED, FAILED, GONE
    status: int = 0
    message: str = ""
    causes: Tuple[str, ...] = ()  # the server's causes (names the budget when it refuses)


def dry_run_eviction(client: Client, plan: PodPlan) -> DryRun:
    """One dry-run eviction; the client retries what is transient (throttling included)."""
    body = {"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": plan.name, "namespace": plan.namespace},
            "deleteOptions": {"dryRun": ["All"], "preconditions": {"uid": plan.uid}}}
    try:
        client.post(paths.eviction(plan.namespace, plan.name), body, {"dryRun": "All"})
        return DryRun(ALLOWED, 201)
    except DisruptionBudgetRefusal as exc:
        causes = tuple(c.get("message", "") for c in (exc.body.get("details") or {}).get("causes") or [])
        return DryRun(REFUSED, 429, exc.server_message, causes)
    except NotFound as exc:
        return DryRun(GONE, 404, exc.server_message)
    except TooManyRequests as exc:  # throttled for the client's whole retry budget
        return DryRun(FAILED, 429, "the API server kept throttling the dry run, so it was not judged "
                                   f"(not a PodDisruptionBudget): {exc.server_message}; run the pre-flight again")
    except ApiError as exc:
        return DryRun(FAILED, exc.status, exc.server_message or exc.message)


def dry_run_all(client: Client, plans: List[PodPlan], workers: int) -> Dict[str, DryRun]:
    """The plans' dry runs, ``workers`` at a time (the options' requests_at_once)."""
    if not plans:
        return {}
    with ThreadPoolExecutor(max_workers=min(workers, len(plans)), thread_name_prefix="nmo-preflight") as pool:
        answers = pool.map(lambda p: dry_run_eviction(client, p), plans)
        return {p.key: a for p, a in zip(plans, answers)}


def verdict_text(answer: DryRun) -> str:
    """One pod's verdict, as the drain's check mode shows it."""
    if answer.answer == ALLOWED:
        return "allowed now"
    if answer.answer == REFUSED:
        return f"refused now by its PodDisruptionBudget: {answer.message}" + (
            f" ({'; '.join(answer.causes)})" if answer.causes else "")
    if answer.answer == GONE:
        return "already gone"
    return f"not judged ({answer.status}): {answer.message}"
