"""The drain options, declared once: each one's type, default and choices, as a module's
argument spec takes them, the fields of the core's options objects made from them, and the
bounds each value is checked against (``checks``), the same for the drain and the pre-flight.

This is the one place a drain option is written. The rest is made from it:

- module_utils/specs.py hands ``SELECTION`` and ``DRAIN`` to the modules (nmo_drain's and
  nmo_preflight's ``drain`` option, and the same options at the top level);
- the core's options objects take their fields from the classes below, whose defaults are
  read from the spec when this file is imported: ``PodSelection`` (model/pod_filters.py's
  ``SelectionOptions``), ``Selection`` (workflows/preflight.py's ``PreflightOptions``) and
  ``Drain`` (workflows/drain_options.py's ``DrainOptions``);
- hack/role_docs.py writes the doc fragment's top-level options
  (plugins/doc_fragments/drain.py), the role's ``node_maintenance_drain`` and its deprecated
  variables (roles/node_maintenance/meta/argument_specs.yml, defaults/main.yml) and the
  role README's table; tests/unit/test_specs.py fails, naming the file and the command, when
  one of them is out of date, and holds the fragment's sub-options to the spec.

A message that tells the operator to change an option takes its name from here too (the
``*_OPTION`` constants below), so that renaming an option is an edit of this file (and its
generated copies), not a search through the code's messages.

It lives in the model layer (pure data and its checks, no Ansible) so that the model's pod
filters can take their fields from it; specs.py, at the top, imports it like every layer may.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import validation
from .kubevirt import MODES as KUBEVIRT_MODES

Spec = Dict[str, Dict[str, Any]]

# The names of the options that messages outside the rule that uses them quote, to tell the
# operator which to change: each is its key in the spec below and its field's name further down
DISABLE_EVICTION_OPTION = "disable_eviction"
SKIP_WAIT_OPTION = "skip_wait_for_delete_timeout"

# Which pods a drain takes, and how it lets them go (model/pod_filters.py)
POD_SELECTION: Spec = {
    "force": {"type": "bool", "default": True},
    "delete_emptydir_data": {"type": "bool", "default": True},
    "ignore_daemonsets": {"type": "bool", "default": True},
    "pod_selector": {"type": "str"},
    DISABLE_EVICTION_OPTION: {"type": "bool", "default": False},
    SKIP_WAIT_OPTION: {"type": "int", "default": 0},
}

# The selection the pre-flight judges with (nmo_preflight uses only these)
SELECTION: Spec = {
    **POD_SELECTION,
    "parallelism": {"type": "int", "default": 32},
    "kubevirt": {"type": "str", "choices": ["wait", "migrate"], "default": "wait"},
    # surge-first (model/surge.py): restart the Deployment of a pod its budget keeps
    "surge": {"type": "bool", "default": False},
    # drain rules (model/drain_rules.py checks them again, for callers of the core and clear messages)
    "rules": {"type": "list", "elements": "dict", "options": {
        "name": {"type": "str"},
        "selector": {"type": "str"},
        "namespace_selector": {"type": "str"},
        "action": {"type": "str", "choices": ["drain", "skip", "wait-completed"], "default": "drain"},
        "order": {"type": "int", "default": 0}}},
}

# The drain's options beyond the selection: timing, retry, fallback, returning pods
DRAIN: Spec = {
    **SELECTION,
    "grace_period": {"type": "int"},
    "timeout": {"type": "float", "default": 600.0},
    "delete_fallback_after": {"type": "float"},
    "retry_delay": {"type": "float", "default": 1.0},
    "returning_pod_evictions": {"type": "int", "default": 3},
}

# The bounds of the values that have one beyond their type (``checks`` below)
MAX_PARALLELISM = 500  # requests at a time
MAX_RETURNING_EVICTIONS = 100  # evictions of one workload's returning pods

Check = Callable[[], Any]

# The role's defaults where they are not the modules', on purpose: a whole node's drain (VMs
# live-migrating, budgets letting one pod go at a time) gets half an hour.
ROLE_DRAIN: Dict[str, Any] = {"timeout": 1800.0}

# Deprecated in 0.2.0, removed in 1.0.0: the role's drain options one variable each
# (node_maintenance_drain_<name>), as the role took them before node_maintenance_drain, and
# kubevirt's own name. Frozen: a new drain option is a key of node_maintenance_drain only.
ROLE_DEPRECATED: Tuple[str, ...] = (
    "force", "delete_emptydir_data", "ignore_daemonsets", "pod_selector", "grace_period", "timeout",
    "disable_eviction", "delete_fallback_after", "skip_wait_for_delete_timeout", "parallelism", "retry_delay",
    "returning_pod_evictions")
ROLE_DEPRECATED_OWN = {"node_maintenance_kubevirt": "kubevirt"}


def _default(name: str) -> Any:
    """A field's default: the spec's (None where it has none; each is immutable, a plain value)."""
    default = DRAIN[name].get("default")
    if isinstance(default, (list, dict, set)):  # a dataclass default must not be shared
        raise TypeError(f"drain option {name}: a mutable default needs a default_factory")
    return default


@dataclass(frozen=True)
class PodSelection:
    """Which pods a drain takes (POD_SELECTION). pod_selector unset (None): every pod."""
    force: bool = _default("force")
    delete_emptydir_data: bool = _default("delete_emptydir_data")
    ignore_daemonsets: bool = _default("ignore_daemonsets")
    pod_selector: Optional[str] = _default("pod_selector")
    disable_eviction: bool = _default("disable_eviction")
    skip_wait_for_delete_timeout: int = _default("skip_wait_for_delete_timeout")

    @classmethod
    def as_given(cls, values: Dict[str, Any]) -> Any:
        """The options of a dict as the operator gave them, unconverted (-e gives strings):
        the role's drain dict before a module checks it. Its keys that are no option are left
        out (the role's input check names them)."""
        return cls(**{name: value for name, value in values.items() if name in cls.__dataclass_fields__})

    def checks(self) -> List[Check]:
        """Each option's check (validation.problems runs them: one error lists every problem).
        The drain rules are model/drain_rules.py's to check (the options objects' validate()
        call it), so that a module that only reads these defaults does not import them."""
        v = validation
        return [lambda: v.number(self.skip_wait_for_delete_timeout, SKIP_WAIT_OPTION, 0, v.MAX_WAIT_SECONDS,
                                 "seconds", integer=True),
                lambda: v.label_selector(self.pod_selector or "", "pod_selector")]


@dataclass(frozen=True)
class Selection(PodSelection):
    """The pre-flight's options of the drain (SELECTION): the pods, then how the drain goes."""
    parallelism: int = _default("parallelism")
    kubevirt: str = _default("kubevirt")  # migrate: live-migrate the VMs whose pods a budget keeps (migrations.py)
    surge: bool = _default("surge")
    rules: Optional[List[Dict[str, Any]]] = _default("rules")  # None: no rule

    def checks(self) -> List[Check]:
        v = validation
        return [lambda: v.number(self.parallelism, "parallelism", 1, MAX_PARALLELISM, "requests", integer=True),
                *super().checks(),
                lambda: v.one_of(self.kubevirt, "kubevirt", KUBEVIRT_MODES)]

    def requests_at_once(self, jobs: Optional[int] = None) -> int:
        """How many requests the drain, or the pre-flight, sends at a time: ``parallelism``,
        never more than the ``jobs`` there are (when known), at least one. Every pool of the
        drain's and the pre-flight's requests is this wide (their evictions, dry runs, reads)."""
        return max(1, self.parallelism if jobs is None else min(self.parallelism, jobs))


@dataclass(frozen=True)
class Drain(Selection):
    """Every drain option (DRAIN)."""
    grace_period: Optional[int] = _default("grace_period")  # None: each pod's own
    timeout: float = _default("timeout")
    delete_fallback_after: Optional[float] = _default("delete_fallback_after")  # None: a budget is never bypassed
    retry_delay: float = _default("retry_delay")
    # pods that land on the node after the drain began (returning.py), evicted again at most
    # this many times per workload before the drain fails naming them
    returning_pod_evictions: int = _default("returning_pod_evictions")

    def checks(self) -> List[Check]:
        v = validation
        checks = [lambda: v.positive_seconds(self.timeout, "timeout"),
                  *super().checks(),
                  lambda: v.seconds(self.retry_delay, "retry_delay", 0.1, 3600),
                  lambda: v.number(self.returning_pod_evictions, "returning_pod_evictions", 0,
                                   MAX_RETURNING_EVICTIONS, "evictions", integer=True)]
        if self.grace_period is not None:  # unset: each pod's own
            checks.append(lambda: v.number(self.grace_period, "grace_period", 0, v.MAX_WAIT_SECONDS, "seconds",
                                           integer=True))
        if self.delete_fallback_after is not None:
            checks.append(lambda: v.seconds(self.delete_fallback_after, "delete_fallback_after"))
        return checks
