"""Events: the object they point at, a stable name per story line, and check mode writing nothing."""

from __future__ import annotations

from ansible_collections.nmo.maintenance.plugins.module_utils.stores import events

NM = {"apiVersion": "nodemaintenance.medik8s.io/v1beta1", "kind": "NodeMaintenance",
      "metadata": {"name": "maintenance-w1", "uid": "u-1", "resourceVersion": "42"}}


class DryRunOnly:
    """A client in dry run with no way to send anything: a request would fail on it."""

    dry_run = True


def test_the_reference_names_the_object_and_its_namespace_only_when_it_has_one():
    assert events.reference(NM) == {"apiVersion": "nodemaintenance.medik8s.io/v1beta1", "kind": "NodeMaintenance",
                                    "name": "maintenance-w1", "uid": "u-1", "resourceVersion": "42"}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns", "uid": "u-2"}}
    assert events.reference(pod)["namespace"] == "ns" and "resourceVersion" not in events.reference(pod)


def test_an_event_name_is_the_same_for_the_same_story_and_differs_otherwise():
    ref = events.reference(NM)
    name = events.EventRecorder.event_name(ref, "Normal", "Cordon", "Cordoned node w1")
    assert name == events.EventRecorder.event_name(ref, "Normal", "Cordon", "Cordoned node w1")
    assert name.startswith("maintenance-w1.") and len(name.split(".")[-1]) == 16
    assert name != events.EventRecorder.event_name(ref, "Normal", "Cordon", "Cordoned node w2")
    assert name != events.EventRecorder.event_name({**ref, "uid": "u-9"}, "Normal", "Cordon", "Cordoned node w1"), \
        "a new object of the same name starts its own story"
    long = events.EventRecorder.event_name({"name": "n" * 300}, "Normal", "Cordon", "x")
    assert len(long) <= 253


def test_check_mode_records_the_design_type_and_text_and_makes_no_request():
    recorder = events.EventRecorder(DryRunOnly())  # a request would fail: it has no methods
    assert recorder.record(NM, events.FAILED_MAINTENANCE) is None
    recorder.record(NM, events.CORDON, "Cordoned node w1")
    recorder.record(NM, "SomethingNew")
    assert recorder.recorded == [
        {"reason": "FailedMaintenance", "type": "Warning", "message": "Failed a node maintenance"},
        {"reason": "Cordon", "type": "Normal", "message": "Cordoned node w1"},
        {"reason": "SomethingNew", "type": "Normal", "message": "SomethingNew"}]
    assert recorder.warnings == []
