"""Our marks on a node: what the begin records, and what the end takes back."""

from ansible_collections.nmo.maintenance.plugins.module_utils.model import marks
from ansible_collections.nmo.maintenance.plugins.module_utils.model.node_state import plan

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
    assert marks.end_marks() == {marks.MAINTAINED_BY: None, marks.LABEL_ADDED: None, marks.CORDONED_BEFORE: None,
                                 marks.TAINTS_BEFORE: None}


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


DRAIN = {"key": "medik8s.io/drain", "effect": "NoSchedule"}
MIRROR = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


def test_begin_records_an_administrators_cordon_and_a_maintenance_taint_found_on_the_node():
    cordoned = {"metadata": {"name": "w1"}, "spec": {"unschedulable": True, "taints": [MIRROR, DRAIN]}}
    notes = marks.begin_marks(cordoned, KEY, "r1")[1]
    assert notes[marks.CORDONED_BEFORE] == "true"
    assert notes[marks.TAINTS_BEFORE] == "medik8s.io/drain:NoSchedule", "the mirror taint follows the cordon's record"
    bare = marks.begin_marks({"metadata": {"name": "w1"}, "spec": {}}, KEY, "r1")[1]
    assert marks.CORDONED_BEFORE not in bare and marks.TAINTS_BEFORE not in bare


def test_the_end_leaves_what_was_there_before_and_says_so():
    notes = {marks.MAINTAINED_BY: "r1", marks.LABEL_ADDED: "true", marks.CORDONED_BEFORE: "true",
             marks.TAINTS_BEFORE: "medik8s.io/drain:NoSchedule"}
    node = {"metadata": {"annotations": notes}, "spec": {"unschedulable": True, "taints": [MIRROR, DRAIN]}}
    wanted = marks.end_wanted(node, KEY)
    assert wanted.unschedulable is None and wanted.remove == [], "the cordon and both taints stay"
    assert wanted.labels == {KEY: None} and wanted.annotations[marks.CORDONED_BEFORE] is None
    assert marks.left_as_found("w1", node) == [
        "node w1 was cordoned before the maintenance began: left cordoned",
        "node w1 had the taint medik8s.io/drain:NoSchedule before the maintenance began: left in place"]
    only_taint = {"metadata": {"annotations": {marks.MAINTAINED_BY: "r1", marks.TAINTS_BEFORE: "medik8s.io/drain:NoSchedule"}}}
    wanted = marks.end_wanted(only_taint, KEY)
    assert wanted.unschedulable is False and wanted.remove == [MIRROR]
    assert marks.left_as_found("w1", {"metadata": {}}) == []
    assert marks.left_as_found("w1", node, ending=False)[0] == (
        "node w1 was cordoned before the maintenance began: it stays cordoned after it")


def test_the_end_removes_a_waiting_taint_in_its_one_patch():
    waiting = {"key": "nmo.maintenance/waiting", "value": "r1", "effect": "PreferNoSchedule"}
    node = {"metadata": {"annotations": {marks.MAINTAINED_BY: "r1"}},
            "spec": {"unschedulable": True, "taints": [MIRROR, DRAIN, waiting]}}
    wanted = marks.end_wanted(node, KEY)
    assert {"key": "nmo.maintenance/waiting", "effect": "PreferNoSchedule"} in wanted.remove
    assert plan(node, wanted).after["taints"] == [], "the maintenance and the waiting taint go"


def test_the_end_lifting_a_quarantine_removes_its_label_and_annotation_in_the_same_patch():
    notes = {marks.MAINTAINED_BY: "r1", marks.CORDONED_BEFORE: "true", marks.QUARANTINED: "drain blocked"}
    node = {"metadata": {"annotations": notes, "labels": {marks.QUARANTINED: "true", KEY: "true"}},
            "spec": {"unschedulable": True}}
    lifted = {marks.QUARANTINED: None}
    wanted = marks.end_wanted(node, KEY, dict(lifted), dict(lifted))
    assert wanted.labels == {marks.QUARANTINED: None}, "the label was there before us: it stays"
    assert wanted.annotations[marks.QUARANTINED] is None and wanted.annotations[marks.MAINTAINED_BY] is None
    assert wanted.unschedulable is None, "cordoned before the maintenance: the cordon stays"
    assert marks.QUARANTINED not in marks.end_wanted(node, KEY).labels, "the end alone leaves a quarantine"


def test_a_node_without_its_kubelet_is_named_with_its_state_and_refused_in_one_wording():
    def node(*conditions):
        return {"status": {"conditions": [{"type": "Ready", "status": c} for c in conditions]}}
    assert marks.not_ready(node("True")) is None
    assert marks.not_ready(node("False")).startswith("NotReady")
    assert marks.not_ready(node("Unknown")).startswith("unreachable (its Ready condition is Unknown")
    assert marks.not_ready({"status": {}}).startswith("not Ready (it has no Ready condition")
    said = marks.not_ready_refusal("w1", marks.not_ready(node("Unknown")))
    assert said.startswith("node w1 is unreachable") and "skip_wait_for_delete_timeout" in said


def test_an_operator_mode_quarantine_is_the_node_a_standalone_quarantine_leaves_and_the_lift_undoes_it():
    """NMO let the node go (uncordoned, untainted, unlabelled): cordoned, tainted and labelled
    again as ours, with our record, so the end that lifts it leaves nothing behind."""
    let_go = {"metadata": {"name": "w1", "labels": {"role": "worker"}}, "spec": {"taints": [{"key": "x", "effect": "NoExecute"}]}}
    wanted = marks.quarantine_wanted(let_go, KEY, "r1", "pod ns/web-0 pending")
    quarantined = plan(let_go, wanted).after
    assert quarantined["unschedulable"] is True
    assert [t["key"] for t in quarantined["taints"]] == ["node.kubernetes.io/unschedulable", "medik8s.io/drain", "x"]
    assert quarantined["labels"] == {"role": "worker", KEY: "true", marks.QUARANTINED: "true"}
    assert quarantined["annotations"] == {marks.MAINTAINED_BY: "r1", marks.LABEL_ADDED: "true",
                                          marks.QUARANTINED: "pod ns/web-0 pending"}
    node = {"metadata": {"name": "w1", "labels": quarantined["labels"], "annotations": quarantined["annotations"]},
            "spec": {"unschedulable": True, "taints": quarantined["taints"]}}
    lifted = {marks.QUARANTINED: None}
    back = plan(node, marks.end_wanted(node, KEY, dict(lifted), dict(lifted))).after
    assert back["unschedulable"] is False and back["taints"] == [{"key": "x", "effect": "NoExecute"}]
    assert back["labels"] == {"role": "worker"} and not back["annotations"]
