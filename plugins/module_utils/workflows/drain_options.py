"""The options of one drain (``nmo_drain``, the role's ``node_maintenance_drain``), checked
before any request: a drain with a bad option writes nothing."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Dict, Optional

from ..model import drain_rules, validation
from ..model.drain_spec import Drain
from ..model.pod_filters import SelectionOptions
from . import run


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
        """Every option, before any request; one error that lists every problem (the drain
        options' checks are the spec's, drain_spec.Drain.checks)."""
        v = validation
        checks = [lambda: v.node_name(self.node), *self.checks(),
                  lambda: drain_rules.parse_rules(self.rules),
                  lambda: v.one_of(self.held_leases, "held_leases", run.HELD_CHOICES)]
        if self.maintenance is not None:
            checks.append(lambda: v.dns_subdomain(self.maintenance, "maintenance", "NodeMaintenance name"))
        if self.run_id:
            checks.append(lambda: run.validate_id(self.run_id))
        v.problems(*checks)
        self.selection()  # the selection is made once here: what it parses fails before any request
