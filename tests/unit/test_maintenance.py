"""NodeMaintenance naming, progress arithmetic and status change detection."""

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.errors import InputError
from ansible_collections.nmo.maintenance.plugins.module_utils.model.tracking import drain_progress
from ansible_collections.nmo.maintenance.plugins.module_utils.stores import crd
from ansible_collections.nmo.maintenance.plugins.module_utils.stores.maintenance import (
    default_name,
    find,
    status_changes,
)


def test_default_name_follows_the_seed():
    assert default_name("node-worker-01") == "maintenance-worker-01"
    assert default_name("worker-01") == "maintenance-worker-01"


PROGRESS_CASES = [(8, 8, 0), (8, 6, 25), (8, 0, 100), (3, 1, 66), (0, 0, 100), (4, 9, 0), (4, -1, 100)]


@pytest.mark.parametrize("evict,pending,want", PROGRESS_CASES)
def test_drain_progress(evict, pending, want):
    assert drain_progress(evict, pending) == want


def test_status_changes_only_what_differs():
    nm = {"status": {"phase": "Running", "drainProgress": 25, "pendingPods": ["a"]}}
    assert status_changes(nm, {"phase": "Running", "drainProgress": 50, "pendingPods": ["a"]}) == {"drainProgress": 50}
    assert status_changes(nm, {"phase": "Running"}) == {}
    assert status_changes({}, {"phase": "Pending"}) == {"phase": "Pending"}


def test_status_changes_refuses_unknown_fields_and_phases():
    with pytest.raises(InputError, match="unknown status fields: percent"):
        status_changes({}, {"percent": 3})
    with pytest.raises(InputError, match="phase must be one of"):
        status_changes({}, {"phase": "Done"})


def test_find_by_node_whatever_the_name_oldest_first():
    items = [
        {"metadata": {"name": "b", "creationTimestamp": "2026-01-02T00:00:00Z"}, "spec": {"nodeName": "n1"}},
        {"metadata": {"name": "hand-made", "creationTimestamp": "2026-01-01T00:00:00Z"}, "spec": {"nodeName": "n1"}},
        {"metadata": {"name": "c", "creationTimestamp": "2026-01-01T00:00:00Z"}, "spec": {"nodeName": "n2"}},
    ]
    assert find(None, "n1", items)["metadata"]["name"] == "hand-made"
    assert find(None, "n3", items) is None


def test_crd_manifest_carries_the_immutability_rule_and_columns():
    m = crd.manifest()
    version = m["spec"]["versions"][0]
    node_name = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["nodeName"]
    assert node_name["x-kubernetes-validations"] == [{"rule": "self == oldSelf", "message": crd.NODE_NAME_IMMUTABLE}]
    assert [c["name"] for c in version["additionalPrinterColumns"] if not c.get("priority")] == \
        ["Node", "Phase", "Progress", "Age"]
    assert m["spec"]["names"]["shortNames"] == ["nm"]
    assert crd.is_ours(m)
