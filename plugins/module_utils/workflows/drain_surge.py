"""Surge-first (docs/design.md §4.7.10): a pod its budget refuses, of a Deployment that can roll
out with a new pod first, gets its Deployment restarted once, and the drain says how that
rollout goes until the old pod is gone. A VM's pod is never surged: KubeVirt moves it."""

from __future__ import annotations

import time
from typing import Any, Dict

from ..api.client import Client
from ..errors import ApiError
from ..model import surge
from ..model.kubevirt import is_launcher
from ..model.tracking import PendingPod
from ..stores import workloads
from ..stores.events import DRAIN, DRAIN_ERROR
from .drain_status import Record
from .drain_watch import DrainWatch

SURGE_LOOK = 2.0  # seconds between two reads of a surged Deployment's rollout


class Surge:
    def __init__(self, client: Client, watch: DrainWatch, record: Record) -> None:
        self.client = client
        self.watch = watch
        self.record = record
        # each refused pod judged once (pod key -> verdict), the Deployments restarted
        self.verdicts: Dict[str, surge.Verdict] = {}
        self.looked: Dict[str, float] = {}  # pod key -> when its Deployment's rollout was last read

    def launcher(self, pod: PendingPod) -> bool:
        """A VM's pod (virt-launcher): KubeVirt's to move, never a Deployment's to surge."""
        current = self.watch.pods.objects.get(pod.key)
        return current is not None and is_launcher(current)

    def note(self, pod: PendingPod, now: float) -> str:
        """Surge-first for a pod its budget refuses: judged once (two reads); when its Deployment
        can roll out with a new pod first, restarted once (one patch) and a ``Drain`` event; then
        its rollout read at most every SURGE_LOOK seconds to say how it goes, and whether its
        new pod cannot be scheduled. The text says what surge does or why it cannot help."""
        verdict = self.verdicts.get(pod.key)
        current = self.watch.pods.objects.get(pod.key)
        if verdict is None and current is not None:
            verdict = self._judge(pod, current, now)
        if verdict is None or not verdict.can:
            return verdict.why if verdict else ""
        if now - self.looked.get(pod.key, 0) < SURGE_LOOK:
            return pod.surge_text or verdict.why
        self.looked[pod.key] = now
        return self._rollout_text(pod, verdict)

    def _judge(self, pod: PendingPod, current: Dict[str, Any], now: float) -> surge.Verdict:
        """The pod's verdict, once; its Deployment restarted when surge can free it."""
        try:
            verdict = workloads.judge(self.client, current)
            if verdict.can:
                workloads.restart(self.client, pod.plan.namespace, verdict.deployment,
                                  time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
                pod.surged = verdict.deployment
                self.record(DRAIN, f"Pod {pod.key} surged: its PodDisruptionBudget allows no disruption, so "
                                   f"Deployment {verdict.deployment} was restarted (kubectl rollout restart) to "
                                   "make its new pod elsewhere before this one goes", pod.key)
        except ApiError as exc:
            verdict = surge.Verdict(False, f"surge cannot help: {exc.message}")
        self.verdicts[pod.key] = verdict
        self.looked[pod.key] = now
        return verdict

    def _rollout_text(self, pod: PendingPod, verdict: surge.Verdict) -> str:
        """How the restarted Deployment's rollout goes, from one read of it and its pods; a
        ``DrainError`` Warning event when its new pod cannot be scheduled (once per text)."""
        try:
            deployment, pods = workloads.look(self.client, pod.plan.namespace, verdict.deployment)
        except ApiError:
            return pod.surge_text or verdict.why
        stuck = surge.unschedulable(pods, pod.plan.uid)
        if stuck:
            text = f"surge blocked: Deployment {verdict.deployment} restarted, but {stuck}"
            if text != pod.surge_text:
                self.record(DRAIN_ERROR, f"Pod {pod.key}: {text}", pod.key, "Warning")
        else:
            text = (f"surging: Deployment {verdict.deployment} restarted, "
                    f"{surge.ready_replicas(deployment or {})}; this pod goes when its new one is Ready")
        pod.surge_text = text
        return text
