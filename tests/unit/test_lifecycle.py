"""lifecycle's pure parts: options refused before the first request, the steps a failure
carries, and a rollback refusing what it cannot undo before it asks the API server anything."""

from __future__ import annotations

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.errors import InputError, RefusedError
from ansible_collections.nmo.maintenance.plugins.module_utils.model.record import Record
from ansible_collections.nmo.maintenance.plugins.module_utils.stores import node_ready as ready
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import disruption, lifecycle


def opts(**change) -> lifecycle.Options:
    return lifecycle.Options(**{"node": "w1", "lease": disruption.Request(node="w1"), **change})


@pytest.mark.parametrize("change, says", [
    ({"mode": "both"}, "mode must be standalone or operator"),
    ({"label_key": "not a key"}, "label_key"),
    ({"name": "Bad_Name"}, "name"),
    ({"run_id": "no spaces allowed"}, "run"),
    ({"node": ""}, "node"),
    ({"end_events": [{"reason": ""}]}, "reason"),
])
def test_bad_options_are_refused_by_name(change, says):
    with pytest.raises(InputError) as exc:
        opts(**change).validate()
    assert says in str(exc.value)


def test_a_failure_carries_the_steps_that_were_done():
    progress = lifecycle.Progress()
    progress.done("maintenance")
    progress.done("lease")
    exc = progress.fail(RefusedError("node w1: no slot"))
    assert exc.details["reached"] == ["maintenance", "lease"]
    progress.done("taints")
    assert exc.details["reached"] == ["maintenance", "lease"], "the error keeps what was done when it happened"


def test_a_rollback_of_unknown_steps_is_refused_before_any_request():
    with pytest.raises(InputError) as exc:
        lifecycle.rollback(None, opts(), ["maintenance", "drain"])  # a request would fail on None
    assert "unknown steps drain" in str(exc.value)


def test_a_rollback_of_nothing_reached_asks_nothing_and_changes_nothing():
    done = lifecycle.rollback(None, opts(), [])
    assert not done["changed"] and done["reached"] == []


def test_the_begin_steps_are_the_ones_nmo_maintenance_offers_for_reached():
    assert lifecycle.BEGIN_STEPS == ("maintenance", "lease", "taints", "cordon")
    assert lifecycle.END_STEPS == ("uncordon", "taints", "lease", "maintenance")


def test_a_long_error_is_cut_to_the_status_limit():
    assert lifecycle.truncate("x" * 10, 10) == "x" * 10
    assert lifecycle.truncate("x" * 11, 10) == "xxxxxxx..."


def test_the_view_of_a_missing_maintenance_is_empty():
    assert lifecycle.view(None) == {}
    nm = {"metadata": {"name": "m"}, "spec": {"nodeName": "w1"}, "status": {"phase": "Failed"}}
    assert lifecycle.view(nm) == {"name": "m", "spec": {"nodeName": "w1"}, "status": {"phase": "Failed"}}


def test_a_node_that_is_not_ready_is_described_for_an_operator():
    node = {"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                                       "message": "container runtime is down",
                                       "lastHeartbeatTime": "2026-12-01T10:00:00Z"}]}}
    assert ready.not_ready_text("w1", node) == (
        "node w1 is not Ready (Ready=False: reason KubeletNotReady, message container runtime is down, "
        "lastHeartbeatTime 2026-12-01T10:00:00Z)")
    assert "no Ready condition" in ready.not_ready_text("w1", {"status": {}})
    assert ready.not_ready_text("w1", None) == "node w1 was deleted while we waited for it to be Ready"


class LeasesOnly:
    """The leases namespace and nothing else: a request for anything but its list or a lease
    patch fails the test."""

    dry_run = False

    def __init__(self, items) -> None:
        self.items, self.patches = items, []

    def get(self, path, query=None):
        assert path.endswith("/leases") and not query, (path, query)
        return {"items": self.items}

    def patch(self, path, body, kind):
        self.patches.append((path, body, kind))


def test_a_begin_refused_before_its_first_write_still_stops_the_run():
    """docs/design.md §18.1: a failure in any phase stops the run; a begin refused before it wrote
    anything (a node without its kubelet) wrote nothing on the node, but the nodes after it must
    not begin: the run lease says the run stopped after it."""
    run_lease = {"metadata": {"name": "nmo-run-r1", "namespace": "medik8s-leases"}, "spec": {"holderIdentity": "r1"}}
    client = LeasesOnly([run_lease])
    done = lifecycle.failed(client, opts(run_id="r1"), "Begin | ...: node w1 is not Ready", [], phase="begin")
    assert "Nothing was written" in done["message"] or "nothing was written" in done["message"].lower()
    assert not done["changed"] and not done["kept"] and done["warnings"] == []
    (path, ops, kind), = client.patches
    assert path.endswith("/leases/nmo-run-r1") and kind == "json"
    assert ops[-1]["path"] == "/metadata/annotations/nmo.maintenance~1stopped-after" and ops[-1]["value"] == "w1/begin"


def test_the_run_is_marked_stopped_before_a_rollback_frees_the_places(monkeypatch):
    """docs/design.md §18.2: a node waiting for the failed node's place sees the place free the
    moment the rollback releases it; the run must be marked stopped by then, or that node begins
    (found by test_rollout_matrix: a drain failure at concurrency 2 with one node a zone)."""
    order = []
    nm = {"metadata": {"name": "maintenance-w1"}, "spec": {"nodeName": "w1"}, "status": {"phase": "Running"}}

    class Client:
        dry_run = False

        def get_or_none(self, _path):
            return {"metadata": {"name": "w1"}}

    monkeypatch.setattr(lifecycle.maintenance, "find", lambda *_a, **_k: nm)
    monkeypatch.setattr(lifecycle.maintenance, "update_status", lambda _c, found, _w: (found, False))
    monkeypatch.setattr(lifecycle, "refuse_if_live_run", lambda *_a: None)

    def unread(*_a, **_k):
        raise lifecycle.NmoError("not read")

    monkeypatch.setattr(lifecycle.info, "describe", unread)
    monkeypatch.setattr(lifecycle, "mark_stopped", lambda *_a: order.append("mark stopped") or [])
    monkeypatch.setattr(lifecycle, "rollback", lambda *_a, **_k: order.append("rollback") or {
        "reached": ["maintenance", "lease"], "warnings": [], "events": [], "changed": True})
    done = lifecycle.failed(Client(), opts(run_id="r1"), "Drain | Evict: timed out", ["maintenance", "lease"],
                            policy="auto", phase="drain")
    assert done["rolled_back"] and not done["kept"]
    assert order == ["mark stopped", "rollback"]


ALL = list(lifecycle.BEGIN_STEPS)


@pytest.mark.parametrize("progress, nm_run, reached", [
    (Record(run="r1", phase="begin", reached=("maintenance", "lease")), "r1", ["maintenance", "lease"]),
    (Record(run="r1", phase="drain", reached=("maintenance",)), "r1", ALL),  # past its begin: all of them
    (Record(run="r0", phase="work", reached=tuple(ALL)), "r0", []),  # another run's record: nothing of this run
    (None, "r1", ["maintenance"]),  # no record, a NodeMaintenance this run made
    (None, "r0", []),
    (Record(run="r1", phase="gate"), "r0", ALL),
])
def test_the_steps_to_undo_are_those_the_record_of_this_run_says(progress, nm_run, reached):
    nm = {"metadata": {"name": "maintenance-w1", "annotations": {"nmo.maintenance/run": nm_run}}}
    assert lifecycle.reached_of(None, opts(run_id="r1"), nm, progress) == reached


def test_without_a_maintenance_or_a_record_nothing_of_the_run_is_undone():
    assert lifecycle.reached_of(None, opts(run_id="r1"), None, None) == []
