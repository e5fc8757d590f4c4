"""The drain's requests (docs/design.md §4.7.2): one eviction (or deletion) a pod, sent on a
bounded thread pool; each answer is queued for the one thread that owns the drain's
bookkeeping, which takes them when it looks (``DrainRequests.answers``)."""

from __future__ import annotations

import queue
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, Iterator, Optional, Tuple

from ..api import paths
from ..api.client import Client
from ..errors import ApiError
from ..model.pod_filters import EVICT, PodPlan
from ..model.tracking import RETRY, Outcome, outcome_of


def delete_options(plan: PodPlan, grace_period: Optional[int]) -> Dict[str, Any]:
    # The UID precondition keeps a request from hitting a replacement of the same name.
    options: Dict[str, Any] = {"preconditions": {"uid": plan.uid}}
    if grace_period is not None:
        options["gracePeriodSeconds"] = grace_period
    return options


def send(client: Client, plan: PodPlan, action: str, grace_period: Optional[int]) -> Outcome:
    """Evict (policy/v1) or delete one pod; the outcome says what the drain does next."""
    options = delete_options(plan, grace_period)
    try:
        if action == EVICT:
            client.post(paths.eviction(plan.namespace, plan.name), {
                "apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": plan.name, "namespace": plan.namespace}, "deleteOptions": options})
        else:
            client.delete(paths.pod(plan.namespace, plan.name), {"apiVersion": "v1", "kind": "DeleteOptions", **options})
    except ApiError as exc:
        return outcome_of(exc, plan.key)
    return outcome_of(None, plan.key)


class DrainRequests:
    """The pool the drain's requests go out on, and the queue their answers come back by.

    ``wake`` makes the owning thread's wait return at once, so an answer is taken as soon as
    it arrives rather than at the next tick."""

    def __init__(self, client: Client, grace_period: Optional[int], wake: Callable[[], None]) -> None:
        self.client = client
        self.grace_period = grace_period
        self.wake = wake
        self.queue: queue.Queue[Tuple[str, Outcome]] = queue.Queue()
        self.pool: Optional[ThreadPoolExecutor] = None

    def open(self, workers: int) -> None:
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="nmo-drain")

    def submit(self, plan: PodPlan, action: str) -> None:
        if self.pool is None:
            raise RuntimeError("the drain's requests were submitted before its pool was opened")
        self.pool.submit(self._send, plan, action)

    def close(self) -> None:
        """Wait for the requests in flight; the ones not started are dropped."""
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)

    def _send(self, plan: PodPlan, action: str) -> None:
        try:
            outcome = send(self.client, plan, action, self.grace_period)
        except Exception as exc:  # never lose an answer: the main thread decides
            outcome = Outcome(RETRY, f"{type(exc).__name__}: {exc}")
        self.queue.put((plan.key, outcome))
        self.wake()

    def answers(self) -> Iterator[Tuple[str, Outcome]]:
        """The answers that arrived so far, in their order, each once."""
        while True:
            try:
                yield self.queue.get_nowait()
            except queue.Empty:
                return
