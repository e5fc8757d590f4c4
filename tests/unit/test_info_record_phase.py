"""nmo_info's record_phase (the role's Ready wait, tasks/ready.yml): the node's progress record
says the phase started, by nmo_progress's own write, before the wait; the leases the wait checks
are those that record says the run holds, unless held_leases is given."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.errors import InputError
from ansible_collections.nmo.maintenance.plugins.module_utils.model.record import Record
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import run as runs
from ansible_collections.nmo.maintenance.plugins.modules import nmo_info, nmo_progress

RUN = "20261203-150102-a1b2c3"


class Client:
    dry_run = False

    def server_now(self):
        return None


def params(**given: Any) -> Dict[str, Any]:
    out = {name: option.get("default") for name, option in nmo_info.ARGUMENT_SPEC.items()}
    out.update(node="node-w1", events_limit=0, wait_ready=True, ready_timeout=60, run_id=RUN)
    out.update(given)
    return out


@pytest.fixture
def calls(monkeypatch) -> List[Any]:
    """What the core did, in order; the node's record says the run holds every lease."""
    seen: List[Any] = []
    held = {"record": Record(run=RUN, phase="work", held="all")}

    def started(client, node, phase, run_id, nm=None, name=None):
        seen.append(("started", node, phase, run_id))
        now = held["record"].started(phase, run_id) if held["record"] is not None else None
        return ({"metadata": {"name": "maintenance-w1"}} if now is not None else None), now

    def guard_for(client, run_id, namespace="", node="", held=runs.HELD_NONE):
        seen.append(("guard", held))
        return runs.NoGuard()

    monkeypatch.setattr(nmo_info.records, "started", started)
    monkeypatch.setattr(nmo_info.runs, "guard_for", guard_for)
    monkeypatch.setattr(nmo_info, "wait_ready", lambda client, node, timeout, guard=None: seen.append(("wait", node)))
    monkeypatch.setattr(nmo_info, "leases_of", lambda client: [])
    monkeypatch.setattr(nmo_info, "describe", lambda *args, **kwargs: [])
    monkeypatch.setattr(nmo_info.rollout_record, "describe", lambda *args: [])
    seen.append(held)  # seen[0]: the test may take the record away
    return seen


def test_the_phase_is_written_then_the_wait_checks_the_leases_the_record_names(calls):
    result = nmo_info.core(Client(), params(record_phase="ready"))
    assert calls[1:] == [("started", "node-w1", "ready", RUN), ("guard", "all"), ("wait", "node-w1")]
    assert result["record"]["phase"] == "ready" and result["record"]["held"] == "all"
    assert result["changed"] is False, "the run's bookkeeping, not a change to the node"


def test_held_leases_given_wins_over_the_record(calls):
    nmo_info.core(Client(), params(record_phase="ready", held_leases="slot"))
    assert ("guard", "slot") in calls


def test_a_node_without_a_record_has_nothing_written_and_no_lease_checked(calls):
    calls[0]["record"] = None
    result = nmo_info.core(Client(), params(record_phase="ready"))
    assert ("guard", "none") in calls and result["record"] == {}


def test_without_record_phase_nothing_is_written_and_no_lease_is_checked_by_default(calls):
    result = nmo_info.core(Client(), params())
    assert calls[1:] == [("guard", "none"), ("wait", "node-w1")] and "record" not in result


def test_record_phase_needs_the_wait(calls):
    with pytest.raises(InputError, match="record_phase needs wait_ready"):
        nmo_info.core(Client(), params(wait_ready=False, record_phase="ready"))
    assert calls[1:] == []


def test_the_write_is_nmo_progress_own():
    assert nmo_info.records is nmo_progress.records
