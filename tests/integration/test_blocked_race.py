"""Two nodes blocked at the same moment, one place left under node_maintenance_max_blocked
(docs/design.md §18.4, issue 32): the count on the run lease is a guarded write, so exactly one
of them is quarantined and the other takes the failure path.

No playbook: two threads call the Python that counts (workflows/blocked.counted) against the
real API server. Each thread's client stops after its first read of the run lease until the
other has read it too, so both decide from the same resourceVersion and both try to write:
without the guard both would be let through.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, List

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.model import blocked as rule
from ansible_collections.nmo.maintenance.plugins.module_utils.model import failure
from ansible_collections.nmo.maintenance.plugins.module_utils.stores import leases as lease_store
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import blocked, disruption, lifecycle
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import run as runs

pytestmark = [pytest.mark.cluster]

BLOCKER = "pod default/web-0: its PodDisruptionBudget web never allows the eviction"
TIMEOUT = 60  # seconds a thread waits for the other: generous on a loaded machine


class MeetAfterFirstRead:
    """The client, except that the first read of the run lease waits at ``barrier`` once it has
    its answer: the two threads then hold the same resourceVersion before either writes."""

    def __init__(self, client: Any, lease_path: str, barrier: threading.Barrier) -> None:
        self._client, self._path, self._barrier = client, lease_path, barrier
        self.reads = 0

    def get_or_none(self, path: str, query: Any = None) -> Any:
        answer = self._client.get_or_none(path, query)
        if path == self._path:
            self.reads += 1
            if self.reads == 1:
                self._barrier.wait(TIMEOUT)
        return answer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_two_nodes_blocked_at_once_within_a_bound_of_one_one_is_let_through(cluster, world):
    run_id = f"race-{world.id}"
    nodes = [f"race-a-{world.id}", f"race-b-{world.id}"]
    lease_store.ensure_namespace(cluster.client)
    runs.start(cluster.client, run_id, controller=f"test/{run_id}", mode="standalone")
    path = lease_store.leases_path(lease_store.LEASE_NAMESPACE, runs.lease_name(run_id))
    start = threading.Barrier(2)  # released together
    read = threading.Barrier(2)  # both have read the lease
    clients = {node: MeetAfterFirstRead(cluster.client, path, read) for node in nodes}
    verdicts: Dict[str, Any] = {}

    def count(node: str) -> None:
        opts = lifecycle.Options(node=node, run_id=run_id, lease=disruption.Request(node=node, run_id=run_id))
        start.wait(TIMEOUT)
        try:
            verdicts[node] = blocked.counted(clients[node], opts, rule.QUARANTINE, failure.DRAIN, BLOCKER, 1)
        except Exception as exc:  # noqa: BLE001 - the assertion below names it
            verdicts[node] = exc
            read.abort()

    threads = [threading.Thread(target=count, args=(node,), daemon=True) for node in nodes]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(TIMEOUT * 2)
        assert not any(thread.is_alive() for thread in threads), "a counting thread never returned"
        assert all(isinstance(v, rule.Verdict) for v in verdicts.values()), verdicts

        let_through: List[str] = [n for n, v in verdicts.items() if v.action == rule.QUARANTINE]
        failed = [n for n, v in verdicts.items() if v.action == rule.FAIL]
        assert len(let_through) == 1 and len(failed) == 1, verdicts
        within, over = verdicts[let_through[0]], verdicts[failed[0]]
        assert within.goes_on and "1 of at most 1 blocked nodes" in within.why, within
        assert over.block and not over.goes_on and over.blocker == BLOCKER, over
        assert "the 2nd blocked node of this run: more than node_maintenance_max_blocked (1)" in over.why, over
        # both decided from the same lease, so the one refused read it again after its write failed
        assert clients[let_through[0]].reads == 1 and clients[failed[0]].reads == 2, \
            {n: c.reads for n, c in clients.items()}

        lease = runs.read_lease(cluster.client, run_id)
        assert lease is not None
        assert rule.parse(lease["metadata"]["annotations"].get(rule.BLOCKED)) == let_through, lease["metadata"]
    finally:
        runs.stop(cluster.client, run_id)
