"""Pods that come back (docs/design.md §4.7.4): a pod that lands on the node after the drain
began, which the drain's own filters take, is evicted again, at most
``returning_pod_evictions`` times per workload; past that the drain fails naming them. Seen
from the watch, with one fresh list of the node's pods before the drain says it is done, and
only while replacements may come back (no request on the normal path)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Set, Tuple

from ..api import paths
from ..api.client import Client
from ..api.waiter import list_objects
from ..model import returning
from ..model.pod_filters import DELETE, EVICT, REFUSE, SKIP, PodPlan, SelectionOptions, classify, refusal_message
from ..model.tracking import Tracker, pending_pod
from ..stores.events import DRAIN
from .drain_options import DrainOptions
from .drain_status import Record
from .drain_watch import DrainWatch

RETURNING = "pods keep coming back"  # Tracker.fatal's entry for it; came_back_message says which and why


class ReturningPods:
    def __init__(self, client: Client, opts: DrainOptions, tracker: Tracker, selection: SelectionOptions,
                 watch: DrainWatch, record: Record, listing: Dict[str, Any], plans: List[PodPlan]) -> None:
        self.client = client
        self.opts = opts
        self.tracker = tracker
        self.selection = selection
        self.watch = watch
        self.record = record
        # every pod seen so far, by UID, and the returning ones per workload, with why they could come back
        self.seen_uids: Set[str] = {p.get("metadata", {}).get("uid", "") for p in listing.get("items", [])}
        self.returned: Dict[str, List[Tuple[str, str]]] = {}
        self.returned_pods: List[Dict[str, Any]] = []
        self.looked_at = -1  # the watch batch the returning pods were last looked for at
        # A node left schedulable (the caller did not cordon it; the result warns) takes pods
        # back because it is schedulable, not because they tolerate the maintenance: as kubectl
        # drain does, only the pods of the list are evicted, and whatever lands later stays.
        node = watch.node
        self.takes_returning = node is None or bool(node.get("spec", {}).get("unschedulable"))
        evicting = {plan.uid for plan in plans if plan.action in (EVICT, DELETE)}
        self.may_return = any(returning.may_come_back(p) for p in listing.get("items", [])
                              if p.get("metadata", {}).get("uid") in evicting)
        self.overflowed = False  # a workload came back more often than returning_pod_evictions
        self.verified = not self.may_return  # the last look at the node, by a fresh list, found none back

    def look(self, pods: Optional[List[Dict[str, Any]]] = None) -> int:
        """Track the pods on the node that were not there at the list (or at the last look),
        as the drain's own filters take them; how many were new. From the watch's view of the
        node, and only when the watch brought something since the last look (no request)."""
        if not self.takes_returning:
            return 0
        if pods is None:
            if self.watch.waitable.changes == self.looked_at:
                return 0
            self.looked_at = self.watch.waitable.changes
            pods = list(self.watch.pods.objects.values())
        new = 0
        for pod in pods:
            uid = pod.get("metadata", {}).get("uid", "")
            if not uid or uid in self.seen_uids:
                continue
            self.seen_uids.add(uid)
            plan = classify(pod, self.selection)
            if plan.action == SKIP:  # DaemonSet, mirror, not selected: the drain leaves it, as at the start
                continue
            new += 1
            self._take(pod, plan)
        return new

    def _take(self, pod: Dict[str, Any], plan: PodPlan) -> None:
        """A pod that came back: pending in every case (the status never says 100 % while it is
        on the node), evicted again unless its workload came back too often or it is refused."""
        why = returning.why_here(pod)
        came = self.returned.setdefault(returning.workload(pod), [])
        came.append((plan.key, why))
        self.returned_pods.append({"namespace": plan.namespace, "name": plan.name, "reason": why})
        self.may_return = self.may_return or returning.may_come_back(pod)
        self.tracker.pending[plan.key] = pending_pod(plan, EVICT if plan.action == REFUSE else plan.action)
        if plan.action == REFUSE:
            self.tracker.fatal.append(refusal_message(self.opts.node, [plan]))
            return
        if len(came) > self.opts.returning_pod_evictions:
            if not self.overflowed:
                self.overflowed = True
                self.tracker.fatal.append(RETURNING)  # the message is made at the end, naming them all
            return
        if self.may_return:
            self.verified = False  # its replacement may come back too: look again before the end
        self.record(DRAIN, f"Pod {plan.key} came back to node {self.opts.node} after the drain began: {why}. "
                           f"Evicted again ({len(came)} of at most {self.opts.returning_pod_evictions} for "
                           f"{returning.workload(pod)}, returning_pod_evictions)", plan.key, "Warning")

    def verify_empty(self) -> bool:
        """Before the drain says it is done while replacements may come back: one fresh list of
        the node's pods (a consistent read, so nothing bound before it is missed by a watch
        event still on its way). True when no pod came back. Not made on the normal path."""
        if self.verified:
            return True
        self.verified = True
        fresh = list_objects(self.client, paths.PODS, {"fieldSelector": f"spec.nodeName={self.opts.node}"})
        return self.look(fresh.get("items", [])) == 0

    def came_back_message(self) -> str:
        """What the drain's failure says of the workloads that came back too often."""
        return returning.came_back_message(self.opts.node, self.opts.returning_pod_evictions, self.returned)
