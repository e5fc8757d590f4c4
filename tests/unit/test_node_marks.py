"""The node annotations nmo_cordon sets with the cordon (the role's campaign mark)."""

from ansible_collections.nmo.maintenance.plugins.module_utils.node.marks import annotation_changes, cordon_ops


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
    assert cordon_ops(node, KEY)[:2] == [
        {"op": "add", "path": "/spec/unschedulable", "value": True},
        {"op": "add", "path": "/metadata/labels/remediation.medik8s.io~1exclude-from-remediation", "value": "true"}]


def test_cordon_ops_nothing_when_already_cordoned_labelled_and_recorded():
    node = {"spec": {"unschedulable": True},
            "metadata": {"labels": {KEY: "true"}, "annotations": {"nmo.maintenance/maintained-by": "r0"}}}
    assert cordon_ops(node, KEY, "r1") == [], "a resumed maintenance keeps its first record"


def test_cordon_ops_a_node_without_labels_gets_the_map():
    assert cordon_ops({"spec": {"unschedulable": True}, "metadata": {}}, "a~b/c")[0] == {
        "op": "add", "path": "/metadata/labels", "value": {"a~b/c": "true"}}


def test_begin_records_that_it_added_the_label_and_who_cordoned():
    from ansible_collections.nmo.maintenance.plugins.module_utils.node import marks

    bare = {"metadata": {"name": "w1"}, "spec": {}}
    ops = marks.cordon_ops(bare, marks.EXCLUDE_FROM_REMEDIATION, "r1")
    added = {op["path"]: op["value"] for op in ops}
    assert added["/metadata/annotations"] == {marks.MAINTAINED_BY: "r1", marks.LABEL_ADDED: "true"}
    labelled = {"metadata": {"name": "w1", "labels": {marks.EXCLUDE_FROM_REMEDIATION: "true"}, "annotations": {}},
                "spec": {}}
    ops = marks.cordon_ops(labelled, marks.EXCLUDE_FROM_REMEDIATION, "r1")
    paths = [op["path"] for op in ops]
    assert "/metadata/annotations/nmo.maintenance~1label-added" not in paths, "an administrator's label is not ours"
    assert "/metadata/annotations/nmo.maintenance~1maintained-by" in paths


def test_the_end_removes_the_label_only_when_it_is_ours():
    from ansible_collections.nmo.maintenance.plugins.module_utils.node import marks

    def node(notes):
        return {"metadata": {"annotations": notes}}

    assert marks.ours_to_unlabel(node({marks.MAINTAINED_BY: "r1", marks.LABEL_ADDED: "true"}))
    assert not marks.ours_to_unlabel(node({marks.MAINTAINED_BY: "r1"})), "it was there before we came"
    assert marks.ours_to_unlabel(node({})), "no record at all: as before marks were kept"
    assert marks.end_marks() == {marks.MAINTAINED_BY: None, marks.LABEL_ADDED: None}
