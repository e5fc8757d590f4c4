"""The option checks: every bad value refused with the option and the value named."""

from __future__ import annotations

import math
from typing import Any, Callable

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.errors import InputError
from ansible_collections.nmo.maintenance.plugins.module_utils.model import leases, validation
from ansible_collections.nmo.maintenance.plugins.module_utils.model.taints import UnprocessableEntity, is_test_failure
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import disruption, info, lifecycle
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows.drain import DrainOptions
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows.etcd_guard import Options as EtcdOptions
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows.preflight import PreflightOptions

GOOD_NODES = ["node-worker-01", "a", "1", "w1.rack-2.example.com", "a" * 253, "x-y.z"]
BAD_NODES = ["", " ", ".", "..", "../x", "a/b", "Node-1", "node_1", "-a", "a-", "a..b", ".a", "a.", "nöde", "a b",
             "a" * 254, "node\n", "%2e%2e", "a" * 64 + ".-b"]


@pytest.mark.parametrize("name", GOOD_NODES)
def test_node_names_that_kubernetes_accepts(name: str) -> None:
    assert validation.node_name(name) == name and validation.is_node_name(name)


@pytest.mark.parametrize("name", BAD_NODES)
def test_node_names_refused_with_option_and_value(name: str) -> None:
    with pytest.raises(InputError) as caught:
        validation.node_name(name)
    message = caught.value.message
    assert message.startswith("node: "), message
    assert repr(name)[:40] in message or "characters" in message, message
    assert not validation.is_node_name(name)


@pytest.mark.parametrize("value", [None, 5, ["a"], {"a": 1}])
def test_node_name_of_the_wrong_type(value: Any) -> None:
    with pytest.raises(InputError, match="node: .* must be a string"):
        validation.node_name(value)


def test_an_empty_node_name_says_so() -> None:
    with pytest.raises(InputError, match=r"^node: '' is empty: give the node name$"):
        validation.node_name("")


def test_a_huge_value_is_shown_shortened() -> None:
    with pytest.raises(InputError) as caught:
        validation.node_name("a" * 100_000)
    assert len(caught.value.message) < 500 and "100000 characters" in caught.value.message


@pytest.mark.parametrize("key,ok", [
    ("remediation.medik8s.io/exclude-from-remediation", True), ("app", True), ("a_b.c-d", True),
    ("", False), ("/x", False), ("a/b/c", False), ("Example.com/x", False), ("x/", False), ("-x", False),
    ("a" * 64, False), ("exclüde", False), ("a b", False), ("../x", False)])
def test_label_keys(key: str, ok: bool) -> None:
    if ok:
        assert validation.qualified_name(key, "label_key") == key
    else:
        with pytest.raises(InputError, match=r"^label_key: "):
            validation.qualified_name(key, "label_key")


@pytest.mark.parametrize("selector,ok", [
    ("component=etcd", True), ("component=etcd,nmo.test/world=abc", True), ("env in (a,b),!legacy", True),
    ("", True), ("component in (etcd", False), ("=x", False), ("a=b c", False), ("a=" + "v" * 64, False),
    ("a/b/c=x", False)])
def test_label_selectors(selector: str, ok: bool) -> None:
    if ok:
        validation.label_selector(selector, "etcd_pod_selector")
    else:
        with pytest.raises(InputError, match=r"^etcd_pod_selector"):
            validation.label_selector(selector, "etcd_pod_selector")


@pytest.mark.parametrize("value", ["kube-system", "a", "a" * 63])
def test_namespaces_accepted(value: str) -> None:
    assert validation.namespace(value, "etcd_pod_namespace") == value


@pytest.mark.parametrize("value", ["", "Kube", "a.b", "a" * 64, "..", "-a"])
def test_namespaces_refused(value: str) -> None:
    with pytest.raises(InputError, match=r"^etcd_pod_namespace: "):
        validation.namespace(value, "etcd_pod_namespace")


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, -1, -0.5, 10**12, True, "10"])
def test_seconds_refuse_what_never_ends_or_makes_no_sense(value: Any) -> None:
    with pytest.raises(InputError, match=r"^timeout: "):
        validation.seconds(value, "timeout")


def test_positive_seconds_refuse_zero() -> None:
    with pytest.raises(InputError, match=r"^timeout: 0 must be more than 0 seconds$"):
        validation.positive_seconds(0, "timeout")
    assert validation.positive_seconds(0.5, "timeout") == 0.5


# -- the validate() functions of the core, one bad option each ----------------------------------------
def request(**overrides: Any) -> disruption.Request:
    etcd = overrides.pop("etcd", EtcdOptions())
    return disruption.Request(**{"node": "node-worker-01", "etcd": etcd, **overrides})


def options(**overrides: Any) -> lifecycle.Options:
    lease = overrides.pop("lease", request())
    return lifecycle.Options(**{"node": "node-worker-01", "lease": lease, **overrides})


CASES = [
    # (what, build-and-validate, the start of the message)
    ("node empty", lambda: options(node="").validate(), "node: '' is empty"),
    ("node ..", lambda: options(node="..").validate(), "node: '..' is not a valid node name"),
    ("node .", lambda: options(node=".").validate(), "node: '.' is not a valid node name"),
    ("node traversal", lambda: options(node="../x").validate(), "node: '../x' is not a valid node name"),
    ("node too long for a lease", lambda: options(node="a" * 250, name="m", lease=request(node="a" * 250)).validate(),
     "node: 'aaaa"),
    ("name", lambda: options(name="Maintenance 1").validate(), "name: 'Maintenance 1' is not a valid NodeMaintenance"),
    ("label_key empty", lambda: options(label_key="").validate(), "label_key: '' is empty"),
    ("label_key bad", lambda: options(label_key="a/b/c").validate(), "label_key: 'a/b/c' is not a valid label key"),
    ("reason huge", lambda: options(reason="x" * 5000).validate(), "reason: 'xxx"),
    ("annotation key", lambda: options(annotations={"bad key": "v"}).validate(), "annotations key: 'bad key'"),
    ("annotation value", lambda: options(annotations={"a": 5}).validate(), "annotations[a]: 5 must be a string"),
    ("event reason", lambda: options(end_events=[{"reason": ""}]).validate(), "events[0].reason: ''"),
    ("event type", lambda: options(end_events=[{"reason": "X", "type": "Bad"}]).validate(),
     "events[0].type: 'Bad' must be one of"),
    ("duration 0", lambda: request(duration=0).validate(), "duration: 0 is shorter than the 30 s a lease needs"),
    ("duration 5", lambda: request(duration=5).validate(), "duration: 5 is shorter than the 30 s a lease needs"),
    ("duration int32", lambda: request(duration=2**31).validate(), "duration: 2147483648 must be between 30 and 604800"),
    ("concurrency 0", lambda: request(concurrency=0).validate(), "concurrency: 0 must be between 1 and 1000"),
    ("concurrency huge", lambda: request(concurrency=10**9).validate(), "concurrency: 1000000000 must be between"),
    ("timeout negative", lambda: request(timeout=-1).validate(), "timeout: -1 must be between 0 and 604800"),
    ("timeout nan", lambda: request(timeout=math.nan).validate(), "timeout: nan must be a finite number"),
    ("slot_prefix", lambda: request(slot_prefix="Slot").validate(), "slot_prefix: 'Slot' is not a valid start"),
    ("slot_prefix dots", lambda: request(slot_prefix="a..b").validate(), "slot_prefix: 'a..b' is not a valid start"),
    ("slot_prefix node-", lambda: request(slot_prefix="node-x").validate(), "slot_prefix: 'node-x' must not start"),
    ("maintenance", lambda: request(maintenance="..").validate(), "maintenance: '..' is not a valid NodeMaintenance"),
    ("etcd selector", lambda: request(etcd=EtcdOptions(member_selector="component in (etcd")).validate(),
     "etcd_pod_selector: 'component in (etcd' is not a valid label selector"),
    ("etcd namespace", lambda: request(etcd=EtcdOptions(pod_namespace="Kube System")).validate(),
     "etcd_pod_namespace: 'Kube System' is not a valid namespace"),
    ("etcd guard namespace", lambda: request(etcd=EtcdOptions(guard_namespace="")).validate(),
     "etcd_guard_namespace: '' is empty"),
    ("etcd flavour", lambda: request(etcd=EtcdOptions(flavour="etcd")).validate(), "etcd_guard: 'etcd' must be one of"),
    ("drain timeout nan", lambda: DrainOptions(node="n", timeout=math.nan).validate(), "timeout: nan must be a finite"),
    ("drain timeout inf", lambda: DrainOptions(node="n", timeout=math.inf).validate(), "timeout: inf must be a finite"),
    ("drain timeout 0", lambda: DrainOptions(node="n", timeout=0).validate(), "timeout: 0 must be more than 0"),
    ("drain node", lambda: DrainOptions(node="..").validate(), "node: '..'"),
    ("retry_delay nan", lambda: DrainOptions(node="n", retry_delay=math.nan).validate(), "retry_delay: nan"),
    ("grace_period", lambda: DrainOptions(node="n", grace_period=-5).validate(), "grace_period: -5 must be between 0"),
    ("fallback", lambda: DrainOptions(node="n", delete_fallback_after=-1.0).validate(), "delete_fallback_after: -1.0"),
    ("parallelism", lambda: DrainOptions(node="n", parallelism=0).validate(), "parallelism: 0 must be between 1 and 500"),
    ("pod_selector", lambda: DrainOptions(node="n", pod_selector="a=(").validate(), "pod_selector: 'a=('"),
    ("preflight empty", lambda: PreflightOptions(nodes=()).validate(), "nodes: [] must be a non-empty list"),
    ("info events_limit", lambda: info.validate(None, None, "a", -1, None), "events_limit: -1 must be between 0"),
    ("info node", lambda: info.validate("", None, "a", 1, None), "node: '' is empty"),
    ("info selector", lambda: info.validate(None, "a in (", "a", 1, None), "label_selector: 'a in ('"),
    ("taint key", lambda: validation.taints([{"key": "a b", "effect": "NoSchedule"}]), "taints[0].key: 'a b'"),
    ("taint value", lambda: validation.taints([{"key": "a", "value": "x" * 64, "effect": "NoSchedule"}]),
     "taints[0].value: 'xxx"),
    ("taint field", lambda: validation.taints([{"key": "a", "effect": "NoSchedule", "evil": 1}]),
     "taints[0]: {'key': 'a', 'effect': 'NoSchedule', 'evil': 1} has unknown fields evil"),
    ("status progress", lambda: validation.maintenance_status({"drainProgress": 101}),
     "status.drainProgress: 101 must be between 0 and 100"),
    ("status pods", lambda: validation.maintenance_status({"pendingPods": ["../x"]}), "status.pendingPods[0]: '../x'"),
]


@pytest.mark.parametrize("what,call,message", CASES, ids=[c[0] for c in CASES])
def test_core_validate_names_the_option_and_the_value(what: str, call: Callable[[], None], message: str) -> None:
    with pytest.raises(InputError) as caught:
        call()
    assert caught.value.message.startswith(message) or f"; {message}" in caught.value.message, caught.value.message


def test_valid_options_pass() -> None:
    options(name="maintenance-worker-01", annotations={"nmo.maintenance/campaign": "w48", "x": None},
            end_events=[{"reason": "SucceedMaintenance", "on": "maintenance"}]).validate()
    request(duration=validation.MAX_LEASE_SECONDS, concurrency=3, timeout=0).validate()
    DrainOptions(node="n", grace_period=0, delete_fallback_after=0.0, pod_selector="app=web").validate()
    PreflightOptions(nodes=("a", "b")).validate()
    info.validate("n", "a=b", "a", 0, ["whatever", "Not A Node"])
    leases.validate(1, 30, "nmo-maintenance-slot")


def test_drain_lists_every_problem_at_once() -> None:
    with pytest.raises(InputError) as caught:
        DrainOptions(node="", timeout=-1, parallelism=0).validate()
    assert [p.split(":")[0] for p in caught.value.message.split("; ")] == ["node", "timeout", "parallelism"]


def test_info_reports_impossible_names_as_missing() -> None:
    assert info.missing(["a", "..", "a", "b"], [{"node": "a"}]) == ["..", "b"]


@pytest.mark.parametrize("message,causes,is_test", [
    # what kube-apiserver v1.37 answers to a failed test operation (no details)
    ("the server rejected our request due to an error in our request", None, True),
    ("testing value /spec/taints failed: test failed", None, True),
    ('Node "n" is invalid: metadata.taints[0].key: Invalid value: "a b": name part must consist of ...',
     [{"reason": "FieldValueInvalid", "field": "metadata.taints[0].key"}], False),
    ("", None, False)])
def test_a_failed_test_operation_is_told_from_a_refusal(message: str, causes: Any, is_test: bool) -> None:
    body = {"kind": "Status", "code": 422, "reason": "Invalid", "message": message,
            "details": {"causes": causes} if causes else {}}
    assert is_test_failure(UnprocessableEntity(422, "Invalid", message, "PATCH", "/api/v1/nodes/n", body)) is is_test


@pytest.mark.parametrize("name", ["", ".", ".."])
def test_no_url_path_segment_can_leave_its_collection(name: str) -> None:
    from ansible_collections.nmo.maintenance.plugins.module_utils.api.paths import segment as path_segment

    with pytest.raises(InputError, match="cannot be the name of a Kubernetes object"):
        path_segment(name)
    assert path_segment("a/b") == "a%2Fb"
