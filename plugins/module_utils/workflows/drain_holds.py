"""Pods that do not leave, named (docs/design.md §4.7.9): what holds each pending pod, from the
watch's view, and why a budget that refuses a pod allows no disruption, from one read of the
budget per distinct refusal. A drain where no pod is held and no budget refuses makes no
request here."""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from ..api import paths
from ..api.client import Client
from ..errors import ApiError
from ..model import stuck_pods
from ..model.tracking import PendingPod, Tracker
from ..stores import workloads
from ..stores.events import DRAIN_ERROR
from .drain_status import Record
from .drain_watch import DrainWatch


class Holds:
    def __init__(self, client: Client, node: str, watch: DrainWatch, record: Record) -> None:
        self.client = client
        self.node = node
        self.watch = watch
        self.record = record
        # budgets read to say why they refuse (stuck_pods.unhealthy_budget): (budget, refusal) -> the budget
        self.budgets_read: Dict[Tuple[str, str], Optional[Dict[str, Any]]] = {}

    def budget_note(self, pod: PendingPod, message: str) -> str:
        """Why the budget refusing ``pod`` allows 0 disruptions when it is because some of its
        pods are not Ready. The budget is read once per distinct refusal (its message counts
        the healthy pods, so a change reads it again): a drain no budget refuses reads none."""
        named = stuck_pods.budget_named(message)
        if not named:
            return ""
        cache = (f"{pod.plan.namespace}/{named}", message)
        if cache not in self.budgets_read:
            try:  # a list by name: the ClusterRole grants list on budgets, not get
                self.budgets_read[cache] = workloads.named(self.client, paths.pdbs(pod.plan.namespace), named)
            except ApiError:  # not readable: the server's words are all there is
                self.budgets_read[cache] = None
        pdb = self.budgets_read[cache]
        current = self.watch.pods.objects.get(pod.key)
        return stuck_pods.unhealthy_budget(pdb, current is not None and stuck_pods.is_ready(current)) if pdb else ""

    def look(self, tracker: Tracker, epoch_now: float) -> None:
        """Name what holds each pending pod being deleted (stuck_pods.held), from the watch's view;
        a Warning event when a pod is first seen held."""
        state = self.watch.node_state()
        for pod in tracker.pending.values():
            text = stuck_pods.held(self.watch.pods.objects.get(pod.key), self.node, state, epoch_now)
            if text and not pod.held:
                if pod.held_since is None:
                    pod.held_since = epoch_now
                self.record(DRAIN_ERROR, f"Pod {pod.key} does not leave: {text}", pod.key, "Warning")
            pod.held = text
