"""Our marks on a node: what the begin records, and what the end takes back."""

from ansible_collections.nmo.maintenance.plugins.module_utils.node import marks

KEY = marks.EXCLUDE_FROM_REMEDIATION


def test_begin_records_that_it_added_the_label_and_who_cordoned():
    bare = {"metadata": {"name": "w1"}, "spec": {}}
    assert marks.begin_marks(bare, KEY, "r1") == ({KEY: "true"}, {marks.MAINTAINED_BY: "r1", marks.LABEL_ADDED: "true"})
    labelled = {"metadata": {"name": "w1", "labels": {KEY: "true"}, "annotations": {}}, "spec": {}}
    labels, notes = marks.begin_marks(labelled, KEY, "r1")
    assert marks.LABEL_ADDED not in notes, "an administrator's label is not ours"
    assert notes[marks.MAINTAINED_BY] == "r1"
    assert marks.begin_marks(bare, KEY)[1][marks.MAINTAINED_BY] == "standalone"


def test_a_resumed_maintenance_keeps_its_first_record():
    node = {"metadata": {"annotations": {marks.MAINTAINED_BY: "r0"}}}
    assert marks.begin_marks(node, KEY, "r1") == ({KEY: "true"}, {})


def test_the_end_removes_the_label_only_when_it_is_ours():
    def node(notes):
        return {"metadata": {"annotations": notes}}

    assert marks.ours_to_unlabel(node({marks.MAINTAINED_BY: "r1", marks.LABEL_ADDED: "true"}))
    assert not marks.ours_to_unlabel(node({marks.MAINTAINED_BY: "r1"})), "it was there before we came"
    assert marks.ours_to_unlabel(node({})), "no record at all: as before marks were kept"
    assert marks.end_marks() == {marks.MAINTAINED_BY: None, marks.LABEL_ADDED: None}


def test_uncordon_keeps_an_administrators_label_and_forgets_our_marks():
    theirs = {"metadata": {"labels": {KEY: "true"}, "annotations": {marks.MAINTAINED_BY: "r1"}}}
    wanted = marks.cordon_wanted(theirs, False, KEY, True, {"nmo.maintenance/campaign": "w48"})
    assert wanted.unschedulable is False and wanted.labels == {}
    assert wanted.annotations == {**marks.end_marks(), "nmo.maintenance/campaign": "w48"}
    ours = {"metadata": {"labels": {KEY: "true"}, "annotations": {marks.MAINTAINED_BY: "r1", marks.LABEL_ADDED: "true"}}}
    assert marks.cordon_wanted(ours, False, KEY, True).labels == {KEY: None}
    assert marks.cordon_wanted(ours, False, KEY, False).labels == {}, "label=false leaves the label alone"


def test_the_end_also_removes_the_maintenance_taints():
    assert marks.end_wanted({"metadata": {}}, KEY).remove == marks.MAINTENANCE_TAINTS
