"""A settle that fails stops the rollout (workflows/settle.py, docs/design.md §4.9.1 and §18): the
failure path's mark on the run lease, whatever failed in the wait; a settle that finishes marks
nothing."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.errors import NmoError
from ansible_collections.nmo.maintenance.plugins.module_utils.model import settle as model
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import settle

WORKLOAD = {"kind": "Deployment", "namespace": "ns", "name": "web", "replicaset": "web-abc", "ready": 1}
SNAPSHOT = model.encode({"workloads": [WORKLOAD], "budgets": []})


class Client:
    requests = 0
    dry_run = False


def node(_client: Any, name: str) -> Dict[str, Any]:
    return {"metadata": {"name": name, "annotations": {model.ANNOTATION: SNAPSHOT, model.ENDED: "true"}}}


@pytest.fixture
def marks(monkeypatch) -> List[tuple]:
    said: List[tuple] = []
    monkeypatch.setattr(settle, "read_node", node)
    monkeypatch.setattr(settle.run, "mark_stopped", lambda _c, run_id, name, phase: said.append((run_id, name, phase)))
    return said


@pytest.mark.parametrize("error", [
    settle.SettleFailed("workloads evicted from node w1 are not whole again"),  # the timeout
    NmoError("the API server refused the watch"),  # anything else that fails the wait
])
def test_a_failed_settle_marks_the_run_stopped_after_its_node(monkeypatch, marks, error):
    def fails(*_a: Any) -> Dict[str, Any]:
        raise error

    monkeypatch.setattr(settle, "_wait", fails)
    with pytest.raises(type(error)):
        settle.settle(Client(), settle.Options(node="w1", timeout=5, run_id="r1"))
    assert marks == [("r1", "w1", "settle")]


def test_a_mark_that_cannot_be_written_leaves_the_settles_own_failure(monkeypatch):
    monkeypatch.setattr(settle, "read_node", node)

    def refused(*_a: Any) -> bool:
        raise NmoError("leases: forbidden")

    def fails(*_a: Any) -> Dict[str, Any]:
        raise settle.SettleFailed("not whole again")

    monkeypatch.setattr(settle.run, "mark_stopped", refused)
    monkeypatch.setattr(settle, "_wait", fails)
    with pytest.raises(settle.SettleFailed, match="not whole again"):
        settle.settle(Client(), settle.Options(node="w1", timeout=5, run_id="r1"))


def test_a_settle_that_finishes_marks_nothing(monkeypatch, marks):
    monkeypatch.setattr(settle, "_wait", lambda *_a: {"settled": True})
    assert settle.settle(Client(), settle.Options(node="w1", timeout=5, run_id="r1")) == {"settled": True}
    assert marks == []
