"""NodeMaintenance naming, progress arithmetic and status change detection."""

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.errors import InputError, NotFound
from ansible_collections.nmo.maintenance.plugins.module_utils.model.tracking import drain_progress
from ansible_collections.nmo.maintenance.plugins.module_utils.stores import crd
from ansible_collections.nmo.maintenance.plugins.module_utils.stores.maintenance import (
    API,
    default_name,
    find,
    locate,
    status_changes,
)
from ansible_collections.nmo.maintenance.plugins.module_utils.stores.maintenance import path as maintenance_path


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


class ByName:
    """A stand-in API server of NodeMaintenances that counts what is asked of it."""

    def __init__(self, *items):
        self.items = list(items)
        self.asked = []

    def get(self, path, query=None):
        self.asked.append(("list" if path == API else "get", path.rsplit("/", 1)[-1]))
        if path == API:
            return {"items": [dict(i) for i in self.items]}
        for item in self.items:
            if path == maintenance_path(item["metadata"]["name"]):
                return dict(item)
        raise NotFound(404, "NotFound", "not found")

    def get_or_none(self, path, query=None):
        try:
            return self.get(path, query)
        except NotFound:
            return None


def nm_of(name, node, created="2026-01-01T00:00:00Z"):
    return {"metadata": {"name": name, "creationTimestamp": created}, "spec": {"nodeName": node}}


def test_locate_reads_the_default_name_and_lists_nothing_on_a_hit():
    client = ByName(nm_of("maintenance-w1", "node-w1"), nm_of("maintenance-w2", "node-w2"))
    assert locate(client, "node-w1")["metadata"]["name"] == "maintenance-w1"
    assert client.asked == [("get", "maintenance-w1")]


def test_locate_reads_the_run_s_name_when_given():
    client = ByName(nm_of("fw-w1", "node-w1"))
    assert locate(client, "node-w1", "fw-w1")["metadata"]["name"] == "fw-w1"
    assert client.asked == [("get", "fw-w1")]


def test_locate_lists_when_the_name_misses_a_hand_made_object_is_found():
    client = ByName(nm_of("by-hand", "node-w1"))
    assert locate(client, "node-w1")["metadata"]["name"] == "by-hand"
    assert [asked[0] for asked in client.asked] == ["get", "list"]


def test_locate_never_takes_an_object_of_another_node_under_the_name():
    # maintenance-w1 names node w1 in the cluster: the node "w1" (default name maintenance-w1 too) has none
    client = ByName(nm_of("maintenance-w1", "node-w1"))
    assert locate(client, "w1") is None
    assert [asked[0] for asked in client.asked] == ["get", "list"]
    client = ByName(nm_of("maintenance-w1", "node-w1"), nm_of("other", "w1"))
    assert locate(client, "w1")["metadata"]["name"] == "other"


def test_locate_finds_none_when_there_is_none():
    client = ByName()
    assert locate(client, "node-w1") is None
    assert [asked[0] for asked in client.asked] == ["get", "list"]
