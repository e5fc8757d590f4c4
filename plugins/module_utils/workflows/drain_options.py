"""The options of one drain (``nmo_drain``, the role's ``node_maintenance_drain``), checked
before any request: a drain with a bad option writes nothing."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Dict, Optional

from ..model import drain_rules, validation
from ..model.drain_spec import Drain
from ..model.kubevirt import MODES as KUBEVIRT_MODES
from ..model.pod_filters import SelectionOptions
from . import run

MAX_PARALLELISM = 500
MAX_RETURNING_EVICTIONS = 100


@dataclass(frozen=True)
class DrainOptions(Drain):
    """A drain's options: every drain option (drain_spec.Drain, its fields and defaults) and
    what the task says beside them."""
    node: str = ""  # required by nmo_drain; validate() refuses an empty one
    maintenance: Optional[str] = None
    run_id: str = ""  # the playbook run the drain is for (run.py): it stops when that run is gone
    held_leases: str = run.HELD_NONE  # the node's leases the run must still hold at each look (run.Guard)

    @classmethod
    def from_params(cls, params: Dict[str, Any]) -> DrainOptions:
        return cls(**{f.name: params[f.name] for f in fields(cls) if params.get(f.name) is not None})

    def selection(self, now: Optional[float] = None) -> SelectionOptions:
        return SelectionOptions.of(self, now)

    def validate(self) -> None:
        """Every option, before any request; one error that lists every problem."""
        v = validation
        checks = [lambda: v.node_name(self.node),
                  lambda: v.positive_seconds(self.timeout, "timeout"),
                  lambda: v.number(self.parallelism, "parallelism", 1, MAX_PARALLELISM, "requests", integer=True),
                  lambda: v.seconds(self.retry_delay, "retry_delay", 0.1, 3600),
                  lambda: v.number(self.skip_wait_for_delete_timeout, "skip_wait_for_delete_timeout", 0,
                                   v.MAX_WAIT_SECONDS, "seconds", integer=True),
                  lambda: v.label_selector(self.pod_selector or "", "pod_selector"),
                  lambda: v.one_of(self.kubevirt, "kubevirt", KUBEVIRT_MODES),
                  lambda: v.number(self.returning_pod_evictions, "returning_pod_evictions", 0,
                                   MAX_RETURNING_EVICTIONS, "evictions", integer=True),
                  lambda: v.one_of(self.held_leases, "held_leases", run.HELD_CHOICES),
                  lambda: drain_rules.parse_rules(self.rules)]
        if self.maintenance is not None:
            checks.append(lambda: v.dns_subdomain(self.maintenance, "maintenance", "NodeMaintenance name"))
        if self.grace_period is not None:  # unset: each pod's own
            checks.append(lambda: v.number(self.grace_period, "grace_period", 0, v.MAX_WAIT_SECONDS, "seconds",
                                           integer=True))
        if self.delete_fallback_after is not None:
            checks.append(lambda: v.seconds(self.delete_fallback_after, "delete_fallback_after"))
        if self.run_id:
            checks.append(lambda: run.validate_id(self.run_id))
        v.problems(*checks)
        self.selection()  # a malformed pod_selector raises here, before any request
