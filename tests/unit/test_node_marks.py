"""The node annotations nmo_cordon sets with the cordon (the role's campaign mark)."""

from ansible_collections.nmo.maintenance.plugins.module_utils.node import annotation_changes, cordon_ops


def test_only_annotations_that_differ_are_written():
    node = {"metadata": {"annotations": {"nmo.maintenance/campaign": "w48", "other": "x"}}}
    assert annotation_changes(node, {"nmo.maintenance/campaign": "w48"}) == {}
    assert annotation_changes(node, {"nmo.maintenance/campaign": "w49"}) == {"nmo.maintenance/campaign": "w49"}
    assert annotation_changes(node, {"nmo.maintenance/campaign": None}) == {"nmo.maintenance/campaign": None}
    assert annotation_changes({"metadata": {}}, {"gone": None}) == {}
    assert annotation_changes(node, None) == {}


KEY = "remediation.medik8s.io/exclude-from-remediation"


def test_cordon_ops_cordon_and_label_with_an_escaped_pointer():
    node = {"spec": {}, "metadata": {"labels": {"kubernetes.io/hostname": "w1"}}}
    assert cordon_ops(node, KEY) == [
        {"op": "add", "path": "/spec/unschedulable", "value": True},
        {"op": "add", "path": "/metadata/labels/remediation.medik8s.io~1exclude-from-remediation", "value": "true"}]


def test_cordon_ops_nothing_when_already_cordoned_and_labelled():
    node = {"spec": {"unschedulable": True}, "metadata": {"labels": {KEY: "true"}}}
    assert cordon_ops(node, KEY) == []


def test_cordon_ops_a_node_without_labels_gets_the_map():
    assert cordon_ops({"spec": {"unschedulable": True}, "metadata": {}}, "a~b/c") == [
        {"op": "add", "path": "/metadata/labels", "value": {"a~b/c": "true"}}]
