#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: nmo_settle
short_description: Wait until the workloads a node's drain evicted are whole again
version_added: "0.2.0"
description:
  - After a node is back in service, before the next node begins, waits (by watch) until every
    workload whose pods the node's drain evicted is as whole as it was before the drain (its Ready
    count then, at most the replicas it wants now; a Deployment at 2 of 3 Ready before the drain is
    done at 2 of 3), and every PodDisruptionBudget covering those pods allows at least as many
    disruptions as before the drain. A snapshot without the Ready count (taken by an older version)
    waits for every replica a workload wants.
  - What to wait for is the snapshot M(nmo.maintenance.nmo_drain) O(nmo.maintenance.nmo_drain#module:settle)
    took before it evicted, kept as the Node's annotation C(nmo.maintenance/settle). Deployments (through
    their ReplicaSet), StatefulSets, ReplicaSets and KubeVirt VirtualMachines are waited for; a workload
    or budget deleted meanwhile is not.
  - When settled, the annotations C(nmo.maintenance/settle) and C(nmo.maintenance/settle-ended) are
    removed. A node without a snapshot has nothing to wait for.
  - While it waits, the controller prints a progress line every O(progress_interval) seconds, naming the
    workloads waited for, each with its Ready and wanted replicas and its Ready count before the drain.
  - At O(timeout), fails naming each workload that is not whole and why (C(1 of 3 replicas ready (3 before
    the drain\))), with
    the reasons of its pods that are not ready (Pending and the scheduler's message, an image that cannot
    be pulled). The annotations stay, so the next run settles the node again before anything else.
author:
  - nmo.maintenance maintainers (@nmo-maintenance)
extends_documentation_fragment:
  - nmo.maintenance.connection
attributes:
  check_mode:
    support: full
    description: Reads the snapshot and the workloads once and returns what would be waited for
      (RV(would_wait_for)); no wait, nothing written.
  diff_mode:
    support: none
    description: Writes nothing but its own annotations.
options:
  node:
    description: The node whose drain's workloads must be whole again.
    type: str
    required: true
  timeout:
    description:
      - Seconds to wait. V(0) does not wait, only removes the annotations.
    type: float
    default: 900
  progress_interval:
    description:
      - Seconds between two progress lines while the settle waits; V(0) prints none. Each line reads
        the node and, per kind and namespace, its workloads (one request each).
    type: float
    default: 10
  run_id:
    description:
      - The playbook run this settle is for (M(nmo.maintenance.nmo_run)). The wait stops, removing
        nothing, when that run is gone (its run lease deleted or expired, the controller dead); the
        annotations stay for the next run.
    type: str
"""

EXAMPLES = r"""
- name: Wait until what the drain of node-worker-01 evicted is whole again
  nmo.maintenance.nmo_settle:
    node: node-worker-01
    timeout: 900
  delegate_to: localhost

- name: Show what a settle would wait for
  nmo.maintenance.nmo_settle:
    node: node-worker-01
  check_mode: true
"""

RETURN = r"""
node:
  description: The node.
  returned: always
  type: str
settled:
  description: True when nothing was left to wait for.
  returned: success
  type: bool
snapshot:
  description: The snapshot read from the node (C(workloads), C(budgets)).
  returned: always
  type: dict
not_whole:
  description:
    - On failure, each workload or budget not whole, with C(kind) (workloads only), C(namespace), C(name),
      C(why) and C(pods) (the reasons of its pods that are not ready).
  returned: always
  type: list
  elements: dict
would_wait_for:
  description: In check mode, what is not whole now (as RV(not_whole)).
  returned: check mode
  type: list
  elements: dict
standing:
  description:
    - When settled, each workload as it stood, as the progress line shows it
      (C(Deployment ns/web 2 of 3 Ready (2 before the drain\)); C(gone) when deleted meanwhile).
  returned: success, when there was something to wait for
  type: list
  elements: str
line:
  description: When settled, the settle's last progress line (which workloads, Ready of wanted, of before the drain).
  returned: success, when there was something to wait for
  type: str
elapsed:
  description: Seconds the wait took.
  returned: success
  type: float
timeout:
  description: The timeout applied.
  returned: always
  type: float
# written by hack/shared_docs.py from plugins/doc_fragments/api_requests.py (what the adapter adds): run it after a change there
api_requests:
  description:
    - Requests this task made to the API server; a watch counts as one.
  returned: success
  type: int
  sample: 14
api_requests_by:
  description:
    - The same requests by kind, as the API server's audit log names them (C(verb resource)), for
      example V(list pods), V(create pods/eviction), V(patch nodemaintenances/status), V(update leases).
  returned: success
  type: dict
  sample: {"get nodes": 1, "list pods": 2, "create pods/eviction": 11}
# end of what hack/shared_docs.py writes
"""

from ansible_collections.nmo.maintenance.plugins.module_utils.adapter import run
from ansible_collections.nmo.maintenance.plugins.module_utils.model import validation
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows.settle import Options, settle


def core(client, params):
    validation.seconds(params["progress_interval"], "progress_interval")  # the printer beside reads it
    return settle(client, Options(node=params["node"], timeout=params["timeout"], run_id=params["run_id"] or ""))


ARGUMENT_SPEC = {
    "node": {"type": "str", "required": True},
    "timeout": {"type": "float", "default": 900},
    "progress_interval": {"type": "float", "default": 10},
    "run_id": {"type": "str"}}


def main():
    run(ARGUMENT_SPEC, core)


if __name__ == "__main__":
    main()
