"""The one-request phase write (model/record.py ``phase_patch``): applied where it may be, it
leaves exactly what the read-then-write would; everywhere else the server refuses it."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.model import record
from ansible_collections.nmo.maintenance.plugins.module_utils.model.record import Record

MODE = "nmo.maintenance/mode"


class Refused(Exception):
    """What the API server answers 422 for: a test op that does not hold, a path that is not there."""


def _walk(doc, pointer):
    parts = [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]
    for part in parts[:-1]:
        if not isinstance(doc, dict) or part not in doc:
            raise Refused(pointer)
        doc = doc[part]
    if not isinstance(doc, dict) or parts[-1] not in doc:
        raise Refused(pointer)
    return doc, parts[-1]


def apply(doc, ops):
    """RFC 6902 test and replace, all or nothing, as the API server applies them."""
    doc = copy.deepcopy(doc)
    for op in ops:
        parent, key = _walk(doc, op["path"])
        if op["op"] == "test" and parent[key] != op["value"]:
            raise Refused(op["path"])
        if op["op"] == "replace":
            parent[key] = op["value"]
    return doc


def nm(node="node-w1", mode="standalone", progress=None):
    annotations = {MODE: mode} if mode else {}
    body = {"metadata": {"name": "maintenance-w1", "annotations": annotations}, "spec": {"nodeName": node},
            "status": {"phase": "Running"}}
    if progress is not None:
        body["status"]["progress"] = progress.wire()
    return body


OURS = Record(run="r1", phase="drain", reached=("maintenance", "lease", "taints", "cordon"), held="all",
              places=("slot-0", "node-w1"), requests=(("get nodes", 2),))


@pytest.mark.parametrize("phase", record.PHASES)
def test_the_phase_write_leaves_what_the_read_then_write_would(phase):
    written = apply(nm(progress=OURS), record.phase_patch("node-w1", "r1", phase, MODE))
    assert record.of_maintenance(written, False) == OURS.started(phase, "r1")
    assert written["status"]["phase"] == "Running" and written["spec"] == {"nodeName": "node-w1"}


def test_a_failed_record_keeps_its_failure_as_started_does():
    failed = Record(run="r1", phase="work", held="all", failure="DIMM", failed_phase="work")
    written = apply(nm(progress=failed), record.phase_patch("node-w1", "r1", "end", MODE))
    assert record.of_maintenance(written, False) == failed.started("end", "r1")


@pytest.mark.parametrize("why,target", [
    ("a record of another run: held is reset by the read-then-write", nm(progress=Record(run="r0", held="all"))),
    ("no record yet", nm()),
    ("operator mode keeps the record in an annotation", nm(mode="operator", progress=OURS)),
    ("no mode said: made by hand", nm(mode="", progress=OURS)),
    ("another node's object under the name", nm(node="w1", progress=OURS)),
])
def test_the_server_refuses_it_wherever_the_read_is_needed(why, target):
    with pytest.raises(Refused):
        apply(target, record.phase_patch("node-w1", "r1", "gate", MODE))


def test_no_phase_write_without_a_run_or_for_an_unknown_phase():
    with pytest.raises(ValueError, match="unknown phase"):
        record.phase_patch("node-w1", "r1", "firmware", MODE)
    with pytest.raises(ValueError, match="run id"):
        record.phase_patch("node-w1", "", "gate", MODE)
