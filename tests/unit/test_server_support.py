"""Which Kubernetes the server is and what the collection says about it (api/server.py),
and the CRD's validation rule that an older server would drop without a word (crd.py)."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.api import server
from ansible_collections.nmo.maintenance.plugins.module_utils.stores import crd


@pytest.mark.parametrize("answer, minor", [
    ({"major": "1", "minor": "31", "gitVersion": "v1.31.13"}, (1, 31)),
    ({"major": "1", "minor": "30+", "gitVersion": "v1.30.4-gke.1348000"}, (1, 30)),
    ({"gitVersion": "v1.37.2"}, (1, 37)),
    ({"gitVersion": "weird"}, None),
    ("not a dict", None),
])
def test_parse(answer, minor) -> None:
    assert server.parse(answer).minor == minor


def test_the_tested_range_has_no_warning() -> None:
    for minor in ("31", "34", "37", "38"):
        assert server.parse({"major": "1", "minor": minor, "gitVersion": f"v1.{minor}.0"}).warning is None


def test_an_older_server_is_warned_about_with_the_tested_range() -> None:
    warning = server.parse({"major": "1", "minor": "30", "gitVersion": "v1.30.4"}).warning
    assert warning and "v1.30.4 is older" in warning and "1.31 to 1.37" in warning


def test_an_unreadable_version_is_warned_about() -> None:
    assert "could not be read" in (server.parse({}).warning or "")


def test_the_shipped_crd_keeps_its_rule() -> None:
    assert not crd.rule_dropped(crd.manifest())


def test_a_crd_stored_without_its_rule_is_noticed() -> None:
    stored = copy.deepcopy(crd.manifest())
    node_name = stored["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["nodeName"]
    del node_name["x-kubernetes-validations"]  # what a server without validation rules stores
    assert crd.rule_dropped(stored)


class FakeClient:
    dry_run = False

    def __init__(self, existing) -> None:
        self.existing = existing

    def get_or_none(self, _path):
        return self.existing


def test_ensure_warns_about_an_installed_crd_without_its_rule() -> None:
    stored = copy.deepcopy(crd.manifest())
    stored["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["nodeName"].pop(
        "x-kubernetes-validations")
    result = crd.ensure(FakeClient(stored))
    assert result["state"] == "unchanged" and result["warning"] == crd.RULE_DROPPED
    assert "warning" not in crd.ensure(FakeClient(crd.manifest()))
