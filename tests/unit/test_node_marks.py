"""The node annotations nmo_cordon sets with the cordon (the role's campaign mark)."""

from ansible_collections.nmo.maintenance.plugins.module_utils.node import annotation_changes


def test_only_annotations_that_differ_are_written():
    node = {"metadata": {"annotations": {"nmo.maintenance/campaign": "w48", "other": "x"}}}
    assert annotation_changes(node, {"nmo.maintenance/campaign": "w48"}) == {}
    assert annotation_changes(node, {"nmo.maintenance/campaign": "w49"}) == {"nmo.maintenance/campaign": "w49"}
    assert annotation_changes(node, {"nmo.maintenance/campaign": None}) == {"nmo.maintenance/campaign": None}
    assert annotation_changes({"metadata": {}}, {"gone": None}) == {}
    assert annotation_changes(node, None) == {}
