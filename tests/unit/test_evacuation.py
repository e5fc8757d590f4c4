"""Cooperative evictions: a 429 that says the pod's owner evacuates it is no budget's refusal.

The texts are KubeVirt's eviction webhook's (a VM with evictionStrategy LiveMigrate: the first
eviction starts the migration, a later one says it is in progress) as the API server relays a
webhook's denial, and the bare text of the descheduler's request-evict-only protocol."""

from __future__ import annotations

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.api import retry
from ansible_collections.nmo.maintenance.plugins.module_utils.errors import (
    DisruptionBudgetRefusal,
    EvacuationStarted,
    TooManyRequests,
    api_error,
    evacuation_started,
)
from ansible_collections.nmo.maintenance.plugins.module_utils.model import tracking
from ansible_collections.nmo.maintenance.plugins.module_utils.model.pod_filters import EVICT, PodPlan

WEBHOOK = 'admission webhook "virt-launcher-eviction-interceptor.kubevirt.io" denied the request: '
KUBEVIRT_FIRST = WEBHOOK + 'Eviction triggered evacuation of VMI "vms/db-01"'
KUBEVIRT_AGAIN = WEBHOOK + 'Evacuation in progress: Eviction triggered evacuation of VMI "vms/db-01"'
DESCHEDULER = "Eviction triggered evacuation"
BUDGET = "Cannot evict pod as it would violate the pod's disruption budget."
BUDGET_BODY = {"details": {"causes": [{"reason": "DisruptionBudget",
                                       "message": "The disruption budget db needs 1 healthy pods and has 1 currently"}]}}


@pytest.mark.parametrize("status, message, body, kind", [
    (429, KUBEVIRT_FIRST, None, EvacuationStarted),
    (429, KUBEVIRT_AGAIN, None, EvacuationStarted),
    (429, DESCHEDULER, None, EvacuationStarted),
    (429, BUDGET, BUDGET_BODY, DisruptionBudgetRefusal),
    (429, "Too many requests, please try again later.", None, TooManyRequests),
    (403, DESCHEDULER, None, None),  # only a 429 says so
])
def test_a_429_is_told_apart(status, message, body, kind):
    error = api_error(status, "TooManyRequests", message, "POST", "/api/v1/namespaces/vms/pods/p/eviction", body)
    if kind is None:
        assert not isinstance(error, TooManyRequests) and not evacuation_started(status, message)
    else:
        assert error.__class__ is kind, error.__class__
    assert isinstance(error, EvacuationStarted) == (kind is EvacuationStarted)


def test_an_evacuation_is_not_retried_by_the_client_nor_counted_as_a_budget():
    error = api_error(429, "TooManyRequests", KUBEVIRT_FIRST)
    assert not retry.transient(error), "the drain decides when to ask again, not the client's retry loop"
    outcome = tracking.outcome_of(error, "vms/virt-launcher-db-01")
    assert outcome.kind == tracking.EVACUATING
    assert outcome.message.startswith("pod vms/virt-launcher-db-01 is being evacuated by its owner (not blocked by a "
                                      "budget): ")


def test_an_evacuating_pod_is_asked_again_slower_and_never_blocked_by_a_budget():
    plan = PodPlan("vms", "virt-launcher-db-01", "u1", EVICT, "has a controller")
    tracker = tracking.Tracker.of([plan], retry_delay=1.0)
    [pod] = tracker.due(0.0)
    tracker.answer(pod.key, tracking.outcome_of(api_error(429, "", KUBEVIRT_FIRST), pod.key), 0.0)
    assert pod.next_attempt == tracking.EVACUATION_RETRY and pod.first_refusal is None
    assert tracker.due(5.0) == [] and tracker.due(tracking.EVACUATION_RETRY) == [pod]
    assert tracker.blocked(20.0, 1000.0) == [], "not in the blocker table: no budget keeps it"
    assert "being evacuated by its owner" in tracker.current_error()
    assert "being evacuated by its owner" in tracker.describe_pending()
