"""The disruption request: built from module options, refused whole before any request, and
the holders and leases it reports."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.errors import InputError
from ansible_collections.nmo.maintenance.plugins.module_utils.model import leases
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import disruption, etcd_guard

PARAMS = {"node": "w1", "concurrency": 2, "duration": 600, "slot_prefix": "team-a", "wait": True, "timeout": 30,
          "etcd_guard": "kubeadm", "etcd_pod_selector": "component=etcd", "etcd_pod_namespace": "kube-system",
          "etcd_guard_namespace": "openshift-etcd", "run_id": None}


def lease(name: str, holder: str, renewed: str, duration: int = 60) -> dict:
    return {"metadata": {"name": name, "namespace": "medik8s-leases"},
            "spec": {"holderIdentity": holder, "renewTime": renewed, "leaseDurationSeconds": duration}}


def test_a_request_takes_every_lease_option_of_the_module():
    req = disruption.Request.from_params(PARAMS, "maintenance-w1")
    assert (req.node, req.concurrency, req.duration, req.slot_prefix, req.wait, req.timeout) == (
        "w1", 2, 600, "team-a", True, 30)
    assert req.maintenance == "maintenance-w1" and req.run_id == ""
    assert req.etcd == etcd_guard.Options("kubeadm", "component=etcd", "kube-system", "openshift-etcd")
    req.validate()


@pytest.mark.parametrize("change, option", [
    ({"concurrency": 0}, "concurrency"),
    ({"slot_prefix": "Not_A_Name"}, "slot_prefix"),
    ({"timeout": -1}, "timeout"),
    ({"etcd_guard": "sometimes"}, "etcd_guard"),
    ({"etcd_pod_selector": "a in (b"}, "etcd_pod_selector"),
    ({"etcd_guard_namespace": "Bad Namespace"}, "etcd_guard_namespace"),
    ({"node": "../x"}, "node"),
    ({"rollout": "Bad_ID"}, "rollout"),
])
def test_bad_options_are_refused_by_name_before_any_request(change, option):
    with pytest.raises(InputError) as exc:
        disruption.Request.from_params({**PARAMS, **change}).validate()
    assert option in str(exc.value)


def test_the_earliest_expiry_is_when_a_blocked_wait_can_next_succeed():
    items = [lease("a", "x", "2026-12-01T10:00:00.000000Z", 600), lease("b", "y", "2026-12-01T10:05:00.000000Z", 60),
             {"metadata": {"name": "c"}, "spec": {}}]
    assert disruption._earliest(items) == datetime(2026, 12, 1, 10, 6, tzinfo=timezone.utc)
    assert disruption._earliest([{"metadata": {"name": "c"}, "spec": {}}]) is None


def test_a_holder_is_reported_with_its_lease_and_expiry():
    held = lease(leases.node_lease_name("w1"), "node-healthcheck-x", "2026-12-01T10:00:00.000000Z", 3600)
    assert disruption._lease_holder("lease", held) == {
        "kind": "lease", "lease": "medik8s-leases/node-w1", "holder": "node-healthcheck-x",
        "expires": "2026-12-01T11:00:00.000000Z"}
    anonymous = {"metadata": {"name": "s-0"}, "spec": {}}
    assert disruption._lease_holder("slot", anonymous)["holder"] == "unknown"


def test_an_outcome_entry_names_the_lease_and_what_was_done():
    after = lease("team-a-0", "nmo.maintenance", "2026-12-01T10:00:00.000000Z", 600)
    entry = disruption._entry("slot", leases.Outcome("created", "team-a-0", None, after))
    assert entry == {"role": "slot", "name": "team-a-0", "namespace": "medik8s-leases", "action": "created",
                     "holder": "nmo.maintenance", "expires": "2026-12-01T10:10:00.000000Z"}


def test_the_blockers_records_are_read_from_either_mode_and_only_theirs():
    from ansible_collections.nmo.maintenance.plugins.module_utils.model.record import ANNOTATION, Record
    from ansible_collections.nmo.maintenance.plugins.module_utils.stores.maintenance import MODE_ANNOTATION
    failed = Record(run="r1", phase="work", failure="boom", failed_phase="work", failed_run="r1")

    def nm(node: str, operator: bool) -> dict:
        meta = {"name": f"nm-{node}", "annotations": {MODE_ANNOTATION: "operator" if operator else "standalone"}}
        if operator:
            meta["annotations"][ANNOTATION] = json.dumps(failed.wire())
            return {"metadata": meta, "spec": {"nodeName": node}, "status": {"phase": "Running"}}
        return {"metadata": meta, "spec": {"nodeName": node}, "status": {"progress": failed.wire()}}

    items = [nm("w1", False), nm("w2", True), nm("w3", False), {"metadata": {"name": "x"}, "spec": {"nodeName": "w4"}}]
    found = disruption.records_of(items, ["w1", "w2", "w4"])
    assert found == {"w1": failed, "w2": failed}
