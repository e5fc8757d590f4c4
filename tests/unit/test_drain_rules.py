"""Drain rules (model/drain_rules.py) and what the pod filters and the tracker make of them:
the rule list checked, each pod's verdict, the order batches handed out one at a time."""

from __future__ import annotations

from typing import Any, Dict, Optional

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.errors import InputError
from ansible_collections.nmo.maintenance.plugins.module_utils.model import drain_rules as dr
from ansible_collections.nmo.maintenance.plugins.module_utils.model.pod_filters import (
    COMPLETE,
    EVICT,
    REFUSE,
    SKIP,
    SelectionOptions,
    classify,
    refusal_message,
)
from ansible_collections.nmo.maintenance.plugins.module_utils.model.tracking import ACCEPTED, Outcome, Tracker
from ansible_collections.nmo.maintenance.plugins.module_utils.stores.maintenance import progress_line
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import preflight as pf
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows.drain import DrainOptions
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows.preflight import PreflightOptions


def pod(name: str, labels: Optional[Dict[str, str]] = None, namespace: str = "ns", phase: str = "Running",
        annotations: Optional[Dict[str, str]] = None, **meta: Any) -> Dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "labels": labels or {},
                         "annotations": annotations or {},
                         "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "controller": True}], **meta},
            "spec": {}, "status": {"phase": phase}}


def selection(rules: Any = None, namespaces: Optional[Dict[str, Dict[str, str]]] = None) -> SelectionOptions:
    opts = SelectionOptions(rules=dr.parse_rules(rules))
    return SelectionOptions(rules=opts.rules, namespace_labels=namespaces)


# -- the option ---------------------------------------------------------------------------------------
def test_rules_parse_with_their_defaults_and_are_named_from_one():
    rules = dr.parse_rules([{"selector": "app=osd", "order": 10, "name": "storage-last"},
                            {"namespace_selector": "team=batch", "action": "wait-completed"},
                            {"selector": "app in (a,b)", "action": "skip"}])
    assert [(r.action, r.order) for r in rules] == [("drain", 10), ("wait-completed", 0), ("skip", 0)]
    assert rules[0].label == "rule 1 (storage-last)" and rules[1].label == "rule 2"
    assert dr.needs_namespaces(rules) and not dr.needs_namespaces(rules[:1])
    assert dr.parse_rules(None) == () and dr.parse_rules([]) == ()


@pytest.mark.parametrize("rules, said", [
    ([{"selector": "app=x", "action": "evict"}], "rules[0].action: 'evict' must be one of drain, skip, wait-completed"),
    ([{"selector": "app=x", "order": "ten"}], "rules[0].order: 'ten' must be a whole number"),
    ([{"selector": "app=x", "order": 1.5}], "rules[0].order: 1.5 must be a whole number"),
    ([{"selector": "app=x", "order": True}], "rules[0].order: True must be a whole number"),
    ([{"selector": "app=x", "order": 2**31}], "must be between"),
    ([{"selector": "app in (a"}], "rules[0].selector: 'app in (a' is not a valid label selector"),
    ([{"namespace_selector": "=x"}], "rules[0].namespace_selector: '=x' is not a valid label selector"),
    ([{"selector": "app=x", "podSelector": "a"}], "rules[0]: unknown key(s) podSelector"),
    ([{"selector": "app=x", "action": "skip", "order": 3}], "only a rule with action drain has an order"),
    (["app=x"], "rules[0]: 'app=x' must be a dict"),
    ({"selector": "app=x"}, "must be a list of rules"),
])
def test_bad_rules_are_refused_naming_the_rule_and_the_key(rules, said):
    with pytest.raises(InputError) as raised:
        dr.parse_rules(rules)
    assert said in raised.value.message


def test_every_problem_of_every_rule_is_said_at_once():
    with pytest.raises(InputError) as raised:
        dr.parse_rules([{"action": "nope", "order": "x"}, {"selector": "a in ("}])
    text = raised.value.message
    assert "rules[0].action" in text and "rules[0].order" in text and "rules[1].selector" in text


def test_the_drain_and_preflight_options_refuse_bad_rules_before_any_request():
    with pytest.raises(InputError, match=r"rules\[0\]\.action"):
        DrainOptions(node="w1", rules=[{"action": "later"}]).validate()
    with pytest.raises(InputError, match=r"rules\[0\]\.order"):
        PreflightOptions(nodes=("w1",), rules=[{"order": "soon"}]).validate()


# -- one pod --------------------------------------------------------------------------------------------
def test_the_first_matching_rule_wins_and_an_unmatched_pod_is_order_zero():
    rules = dr.parse_rules([{"selector": "app=osd", "order": 10}, {"selector": "tier=storage", "action": "skip"}])
    assert dr.judge({"app": "osd", "tier": "storage"}, rules) == dr.Verdict("drain", 10, "rule 1")
    assert dr.judge({"tier": "storage"}, rules).action == "skip"
    assert dr.judge({"app": "web"}, rules) == dr.DEFAULT


def test_a_namespace_selector_matches_the_namespaces_labels_and_both_selectors_must_match():
    rules = dr.parse_rules([{"selector": "app=osd", "namespace_selector": "kubernetes.io/metadata.name=rook",
                             "order": 5}])
    rook = {"kubernetes.io/metadata.name": "rook"}
    assert dr.judge({"app": "osd"}, rules, rook).order == 5
    assert dr.judge({"app": "osd"}, rules, {"kubernetes.io/metadata.name": "other"}) == dr.DEFAULT
    assert dr.judge({"app": "web"}, rules, rook) == dr.DEFAULT
    assert dr.judge({"app": "osd"}, rules, None) == dr.DEFAULT, "an unread namespace matches no namespace rule"


@pytest.mark.parametrize("key", [dr.DRAIN_LABEL, dr.CAPI_DRAIN_LABEL])
def test_the_pod_label_overrides_every_rule(key):
    rules = dr.parse_rules([{"selector": "app=osd", "order": 10}])
    assert dr.judge({"app": "osd", key: "skip"}, rules).action == "skip"
    assert dr.judge({"app": "osd", key: "wait-completed"}, rules).action == "wait-completed"
    assert dr.judge({"app": "osd", key: "order--3"}, rules) == dr.Verdict("drain", -3, f"label {key}=order--3")
    assert dr.judge({"app": "osd", key: "order-7"}, rules).order == 7
    assert dr.judge({"app": "osd", key: "drain"}, rules).order == 0
    bad = dr.judge({"app": "osd", key: "last"}, rules)
    assert bad.action == dr.ERROR and f"label {key}='last' is not one of skip" in bad.source
    assert dr.judge({"app": "osd"}, rules, None, {key: "order=-3"}) == \
        dr.Verdict("drain", -3, f"annotation {key}=order=-3")
    assert dr.judge({key: "skip"}, rules, None, {key: "order=4"}).action == "skip", "the label first"
    assert "fix or remove the annotation" in dr.judge({}, rules, None, {key: "x"}).source


def test_our_label_wins_over_cluster_apis():
    assert dr.judge({dr.DRAIN_LABEL: "order=2", dr.CAPI_DRAIN_LABEL: "skip"}, ()).order == 2


def test_do_not_disrupt_is_karpenters_annotation_or_ours_set_true():
    assert dr.do_not_disrupt(pod("a", annotations={"karpenter.sh/do-not-disrupt": "true"})) == \
        "karpenter.sh/do-not-disrupt=true"
    assert dr.do_not_disrupt(pod("a", annotations={"nmo.maintenance/do-not-disrupt": "True"})) == \
        "nmo.maintenance/do-not-disrupt=true"
    assert dr.do_not_disrupt(pod("a", annotations={"karpenter.sh/do-not-disrupt": "false"})) is None
    assert dr.do_not_disrupt(pod("a")) is None


# -- what the pod filters make of it ----------------------------------------------------------------------
def test_without_rules_labels_or_annotations_a_plan_is_what_it_always_was():
    plan = classify(pod("web-1", {"app": "web"}), SelectionOptions())
    assert (plan.action, plan.order, plan.blocked, plan.rule) == (EVICT, 0, "", "")
    assert plan.reason == "managed by ReplicaSet rs"


def test_rules_give_the_plan_its_order_skip_or_wait_completed_with_the_rule_in_the_reason():
    opts = selection([{"selector": "app=osd", "order": 10, "name": "storage-last"},
                      {"selector": "app=job", "action": "wait-completed"},
                      {"selector": "app=agent", "action": "skip"}])
    osd = classify(pod("osd-0", {"app": "osd"}), opts)
    assert (osd.action, osd.order) == (EVICT, 10) and "order 10 by rule 1 (storage-last)" in osd.reason
    job = classify(pod("job-1", {"app": "job"}), opts)
    assert job.action == COMPLETE and "wait-completed by rule 2" in job.reason
    done = classify(pod("job-2", {"app": "job"}, phase="Succeeded"), opts)
    assert done.action == SKIP and "already finished (Succeeded)" in done.reason
    agent = classify(pod("agent", {"app": "agent"}), opts)
    assert agent.action == SKIP and agent.reason == "skipped by rule 3: it stays on the node" and agent.rule == "rule 3"


def test_a_skip_rule_keeps_a_pod_an_option_would_refuse():
    unmanaged = pod("debug", {"app": "agent"})
    unmanaged["metadata"]["ownerReferences"] = []
    opts = SelectionOptions(force=False, rules=dr.parse_rules([{"selector": "app=agent", "action": "skip"}]))
    assert classify(unmanaged, opts).action == SKIP


def test_a_bad_drain_label_refuses_that_pod_alone_and_says_what_to_fix():
    plan = classify(pod("odd", {dr.DRAIN_LABEL: "later"}), SelectionOptions())
    assert plan.action == REFUSE and plan.options == ()
    message = refusal_message("w1", [plan])
    assert "ns/odd: label nmo.maintenance/drain='later' is not one of" in message
    assert "allow with" not in message and "nothing was evicted" in message


def test_a_do_not_disrupt_pod_keeps_its_action_but_is_blocked_and_a_finished_one_is_not():
    held = classify(pod("db-0", annotations={"karpenter.sh/do-not-disrupt": "true"}), SelectionOptions())
    assert held.action == EVICT and held.blocked == "karpenter.sh/do-not-disrupt=true"
    assert "never evicted" in held.reason
    done = classify(pod("db-1", phase="Succeeded", annotations={"karpenter.sh/do-not-disrupt": "true"}),
                    SelectionOptions())
    assert done.blocked == ""


# -- the tracker: one batch at a time, by UID ---------------------------------------------------------------
def plans_of(*pods: Dict[str, Any], rules: Any = None):
    opts = selection(rules)
    return [classify(p, opts) for p in pods]


def test_the_tracker_hands_out_one_order_batch_and_the_next_only_once_it_is_gone():
    pods = [pod("a", {"tier": "app"}), pod("b", {"tier": "app"}), pod("osd", {"tier": "storage"}),
            pod("first", {"tier": "first"})]
    rules = [{"selector": "tier=storage", "order": 10}, {"selector": "tier=first", "order": -1}]
    tracker = Tracker.of(plans_of(*pods, rules=rules))
    assert tracker.orders() == [-1, 0, 10]
    assert [p.key for p in tracker.due(0)] == ["ns/first"]
    tracker.answer("ns/first", Outcome(ACCEPTED), 0)
    assert tracker.due(1) == [], "nothing of the next batch while the first is still there"
    objects = {f"ns/{p['metadata']['name']}": p for p in pods}
    tracker.settle(objects, 0)
    assert tracker.due(1) == [], "accepted is not gone"
    del objects["ns/first"]
    tracker.settle(objects, 0)
    assert sorted(p.key for p in tracker.due(2)) == ["ns/a", "ns/b"]
    replaced = dict(objects["ns/a"], metadata={**objects["ns/a"]["metadata"], "uid": "new"})
    objects["ns/a"] = replaced  # a pod of the same name, another UID: the old one is gone
    tracker.settle(objects, 0)
    assert tracker.current_order() == 0 and [p.key for p in tracker.batch(0)] == ["ns/b"]
    del objects["ns/b"]
    tracker.settle(objects, 0)
    assert [p.key for p in tracker.due(3)] == ["ns/osd"]


def test_wait_completed_pods_are_never_sent_and_done_when_finished_and_blocked_ones_wait_for_the_annotation():
    pods = [pod("job", {"app": "job"}), pod("db", annotations={"karpenter.sh/do-not-disrupt": "true"})]
    tracker = Tracker.of(plans_of(*pods, rules=[{"selector": "app=job", "action": "wait-completed"}]))
    assert tracker.due(0) == []
    assert "waiting for it to complete" in tracker.pending["ns/job"].last_error
    assert "is annotated karpenter.sh/do-not-disrupt=true: never evicted" in tracker.pending["ns/db"].last_error
    assert tracker.current_order() == 0, "a wait-completed pod belongs to no batch"
    finished = dict(pods[0], status={"phase": "Succeeded"})
    objects = {"ns/job": finished, "ns/db": pods[1]}
    tracker.settle(objects, 0)
    assert [p.key for p in tracker.done] == ["ns/job"]
    assert tracker.unblock(objects, dr.do_not_disrupt) == []
    objects["ns/db"] = dict(pods[1], metadata={**pods[1]["metadata"], "annotations": {}})
    assert [p.key for p in tracker.unblock(objects, dr.do_not_disrupt)] == ["ns/db"]
    assert [p.key for p in tracker.due(1)] == ["ns/db"]


def test_batch_text_names_the_batch_of_all():
    assert dr.batch_text([0, 10, -5], 10, 4) == "batch 3 of 3 (order 10): 4 pod(s)"
    assert dr.batch_text([0], 0, 2) == "batch 1 of 1 (order 0): 2 pod(s)"


def test_the_progress_line_names_the_batch_being_drained():
    nm = {"metadata": {"name": "m"}, "status": {"drainProgress": 50, "pendingPods": ["osd-0"],
                                                "drainBatch": "batch 2 of 2 (order 10): 1 pod(s)"}}
    assert progress_line("w1", nm, 12) == \
        "w1: drainProgress 50%, 1 pending pod(s) (batch 2 of 2 (order 10): 1 pod(s)): osd-0 (12 s)"
    del nm["status"]["drainBatch"]
    assert progress_line("w1", nm, 12) == "w1: drainProgress 50%, 1 pending pod(s): osd-0 (12 s)"


# -- the pre-flight's judgement ---------------------------------------------------------------------------
def test_the_preflight_says_no_go_for_do_not_disrupt_warns_for_wait_completed_and_lists_the_batches():
    pods = [pod("db", annotations={"karpenter.sh/do-not-disrupt": "true"}), pod("job", {"app": "job"}),
            pod("osd", {"app": "osd"}), pod("web"), pod("odd", {dr.DRAIN_LABEL: "soon"})]
    opts = selection([{"selector": "app=osd", "order": 10}, {"selector": "app=job", "action": "wait-completed"}])
    report = pf.NodeReport("w1")
    report.plans = [classify(p, opts) for p in pods]
    pf.judge_options(report)
    pf.judge_rules(report)
    assert report.verdict == pf.NO_GO
    assert report.blockers[0].startswith("ns/odd: label nmo.maintenance/drain='soon' is not one of")
    assert report.blockers[1].startswith("ns/db is annotated karpenter.sh/do-not-disrupt=true (do-not-disrupt)")
    assert report.warnings == ["ns/job is waited for until it completes (rule 2), within the drain's timeout: "
                               "the drain does not evict it"]
    shown = report.as_dict()
    assert shown["batches"] == [{"order": 0, "pods": ["ns/db", "ns/web"]}, {"order": 10, "pods": ["ns/osd"]}]
    assert [p["name"] for p in shown["to_wait_completed"]] == ["job"]
    assert shown["do_not_disrupt"][0]["annotation"] == "karpenter.sh/do-not-disrupt=true"
    assert "in 2 order batches (0, 10)" in report.line()
    assert not pf.needs_room(report.plans[0], pods[0]), "a pod that stays needs no room elsewhere"
