"""A node's progress record: how far its maintenance got, kept in the cluster (docs/design.md §18.5).

One record a node, written by every phase's module as the phase starts, and read by whatever
must know where the node stands: the failure policy (the phase that failed, the begin steps
to undo), the later steps (the leases the run must still hold), the summary and the report.
It replaces what the role used to carry from task to task in registered variables.

Where it lives: in standalone mode, ``status.progress`` of the node's NodeMaintenance (a
field of ours; an NMO-installed CRD prunes it); in operator mode NMO owns that status, and the
same fields are kept as JSON in the NodeMaintenance's annotation ``ANNOTATION``. The wire form
is one dict, the same in both places.

Pure: parse what was read (anything, garbled or absent fields included) and serialise what is
written. A field that is missing or cannot be read takes its empty value; ``phase_known``
says whether the phase reached is one the failure policy knows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Dict, List, Optional, Sequence, Tuple

ANNOTATION = "nmo.maintenance/progress"  # operator mode: the record as JSON on the NodeMaintenance
STATUS_FIELD = "progress"  # standalone mode: status.progress

# The phases a node goes through, in order (model/failure.py decides per phase).
BEGIN, BEFORE_DRAIN, DRAIN, WORK, READY, GATE, CONFIRM, END = (
    "begin", "before_drain", "drain", "work", "ready", "gate", "confirm", "end")
PHASES = (BEGIN, BEFORE_DRAIN, DRAIN, WORK, READY, GATE, CONFIRM, END)
# The rest of a node's run, which no record keeps (the failure policy needs only PHASES): the
# settle after the end, the after hooks, and the failure path.
SETTLE, AFTER, FAILED = "settle", "after", "failed"
# Every phase of a node's run, in order, and the name the run report gives it (docs/report.md).
# The one table of them: the role names the phase of each of its phase files with it
# (``node_maintenance_phase`` on the include, tasks/main.yml), which is what the report reads
# (plugin_utils/report_model.py), never a task's name. The hooks' phases say they are hooks.
REPORTED = {BEGIN: "begin", BEFORE_DRAIN: "hooks before_drain", DRAIN: "drain", WORK: "hooks work",
            READY: "ready wait", GATE: "gate", CONFIRM: "confirm", END: "end",
            SETTLE: "settle", AFTER: "hooks after", FAILED: "failed"}
HELD = ("none", "slot", "all")  # as workflows/run.py's HELD_*: which leases the run holds for the node

# the wire's keys (camelCase, as the rest of the status)
_KEYS = ("run", "phase", "reached", "held", "places", "waited", "failure", "failedPhase", "failedRun", "requests")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _texts(value: Any) -> Tuple[str, ...]:
    if not isinstance(value, (list, tuple)):
        return ()
    return tuple(v for v in value if isinstance(v, str) and v)


def _seconds(value: Any) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0
    return float(value) if ok else 0.0


def _counts(value: Any) -> Tuple[Tuple[str, int], ...]:
    """API requests by kind (``verb resource``), as sorted pairs; what is not a count is dropped."""
    if not isinstance(value, dict):
        return ()
    return tuple(sorted((k, v) for k, v in value.items()
                        if isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0))


@dataclass(frozen=True)
class Record:
    """Where a node's maintenance stands, as the cluster keeps it."""

    run: str = ""  # the run that wrote it last
    phase: str = ""  # the phase reached: the last one that started
    reached: Tuple[str, ...] = ()  # the begin steps done (workflows/lifecycle.py BEGIN_STEPS)
    held: str = "none"  # which leases the run holds for the node (HELD)
    places: Tuple[str, ...] = ()  # the leases it holds: node lease, slot, topology places
    waited: float = 0.0  # seconds the begin waited for its places (a lease or the etcd guard)
    failure: str = ""  # the error, once it failed
    failed_phase: str = ""  # the phase it failed in
    # the run it failed in: kept when a later run takes the record over (``run`` then names that
    # one), so the rollout scheduler (rollout.py) tells a failure of a gone run from this run's
    failed_run: str = ""
    requests: Tuple[Tuple[str, int], ...] = ()  # the API requests of the node's calls so far, by kind

    @property
    def phase_known(self) -> bool:
        return self.phase in PHASES

    @property
    def failed(self) -> bool:
        return bool(self.failure or self.failed_phase)

    def requests_by(self) -> Dict[str, int]:
        return dict(self.requests)

    # -- changes, as the modules make them ---------------------------------------------------
    def started(self, phase: str, run: str) -> Record:
        """The record once ``phase`` started in ``run``. A run that takes over a record of
        another (a resumed node) holds none of that run's leases by this record's word."""
        if phase not in PHASES:
            raise ValueError(f"unknown phase {phase!r} (known: {', '.join(PHASES)})")
        if not run or run == self.run:
            return replace(self, phase=phase)
        return replace(self, phase=phase, run=run, held="none")

    def with_requests(self, added: Dict[str, int]) -> Record:
        """The record with a call's API requests added, kind by kind."""
        total = self.requests_by()
        for kind, count in added.items():
            total[kind] = total.get(kind, 0) + count
        return replace(self, requests=_counts(total))

    # -- the wire ------------------------------------------------------------------------------
    @classmethod
    def parse(cls, raw: Any) -> Optional[Record]:
        """The record from its wire dict; None when there is none (absent, not a dict). Fields
        that are absent or garbled take their empty value."""
        if not isinstance(raw, dict):
            return None
        held = _text(raw.get("held"))
        return cls(run=_text(raw.get("run")), phase=_text(raw.get("phase")), reached=_texts(raw.get("reached")),
                   held=held if held in HELD else "none", places=_texts(raw.get("places")),
                   waited=_seconds(raw.get("waited")),
                   failure=_text(raw.get("failure")), failed_phase=_text(raw.get("failedPhase")),
                   failed_run=_text(raw.get("failedRun")), requests=_counts(raw.get("requests")))

    def wire(self) -> Dict[str, Any]:
        """Every key, empty ones too: a merge patch of it leaves nothing of an older record."""
        return {"run": self.run, "phase": self.phase, "reached": list(self.reached), "held": self.held,
                "places": list(self.places), "waited": self.waited, "failure": self.failure, "failedPhase": self.failed_phase,
                "failedRun": self.failed_run, "requests": dict(self.requests)}


def phase_patch(node: str, run: str, phase: str, mode_annotation: str) -> List[Dict[str, Any]]:
    """The one-request phase write (a JSON patch of the NodeMaintenance's status, written
    without reading it first): only ``phase`` changes, and only where nothing else would have
    to. Its ``test`` ops make the API server refuse it (422, nothing written) unless the object
    is the node's (``spec.nodeName``), in standalone mode (``mode_annotation``; operator mode
    keeps the record in an annotation, whole), and carries a record of this same ``run``:
    a record of another run, or none, needs the read-then-write (``Record.started`` resets
    ``held`` for a run that takes over). So a refusal is never a wrong record, only the
    slower path."""
    if phase not in PHASES:
        raise ValueError(f"unknown phase {phase!r} (known: {', '.join(PHASES)})")
    if not run:
        raise ValueError("the one-request phase write needs the run id")
    escaped = mode_annotation.replace("~", "~0").replace("/", "~1")
    base = f"/status/{STATUS_FIELD}"
    return [{"op": "test", "path": "/spec/nodeName", "value": node},
            {"op": "test", "path": f"/metadata/annotations/{escaped}", "value": "standalone"},
            {"op": "test", "path": f"{base}/run", "value": run},
            {"op": "replace", "path": f"{base}/phase", "value": phase}]


def of_maintenance(nm: Optional[Dict[str, Any]], operator: bool) -> Optional[Record]:
    """The record a NodeMaintenance carries: its status field (standalone) or its annotation
    (operator mode). None when it has none, or the annotation is not JSON."""
    if not nm:
        return None
    if not operator:
        return Record.parse((nm.get("status") or {}).get(STATUS_FIELD))
    text = ((nm.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION)
    if not text:
        return None
    try:
        return Record.parse(json.loads(text))
    except ValueError:
        return None


def annotation(record: Record) -> str:
    """The operator mode's annotation value."""
    return json.dumps(record.wire(), sort_keys=True, separators=(",", ":"))


def places_of(lease_result: Dict[str, Any]) -> Tuple[str, ...]:
    """The lease names a begin's lease step took (workflows/disruption.py's result, its
    ``acquired`` entries: slot, topology places, node lease), in that order, each once."""
    names = [item["name"] for item in lease_result.get("acquired") or []
             if isinstance(item, dict) and isinstance(item.get("name"), str) and item["name"]]
    return tuple(dict.fromkeys(names))


def keys() -> Sequence[str]:
    return _KEYS
