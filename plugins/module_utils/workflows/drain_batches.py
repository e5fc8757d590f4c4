"""The order batches of a drain (drain rules, docs/design.md §4.7.7): the pods to evict go
lowest order first, a batch gone before the next one's first eviction. Which batch is being
drained is said in a ``Drain`` event when it starts and in the status's ``drainBatch``, both
only when there are several; one batch is the drain as it always was."""

from __future__ import annotations

from typing import Optional

from ..model import drain_rules
from ..model.pod_filters import COMPLETE
from ..model.tracking import Tracker
from ..stores.events import DRAIN
from .drain_status import Record


class OrderBatches:
    def __init__(self, tracker: Tracker) -> None:
        self.tracker = tracker
        self.orders = tracker.orders()
        self.announced: Optional[int] = None  # the batch announced last

    @property
    def several(self) -> bool:
        return len(self.orders) > 1

    def text(self) -> str:
        current = self.tracker.current_order()
        if current is None:
            waiting = sum(1 for p in self.tracker.pending.values() if p.action == COMPLETE)
            return f"all batches drained; waiting for {waiting} pod(s) to complete"
        return drain_rules.batch_text(self.orders, current, len(self.tracker.batch(current)))

    def status_text(self, finished: bool) -> str:
        return "all batches drained" if finished else self.text()

    def announce(self, node: str, record: Record) -> None:
        """A ``Drain`` event when a new order batch starts (only when there are several)."""
        current = self.tracker.current_order()
        if len(self.orders) < 2 or current is None or current == self.announced:
            return
        self.announced = current
        self.orders = sorted(set(self.orders) | {current})
        record(DRAIN, f"Drain node {node}: {self.text()}", f"batch {current}")
