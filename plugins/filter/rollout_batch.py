"""The filter nmo.maintenance.rollout_batch: the maintenance plays' batch (serial)."""

from __future__ import annotations

from typing import Any

from ansible_collections.nmo.maintenance.plugins.module_utils.model.rollout import batch

DOCUMENTATION = r"""
name: rollout_batch
short_description: The maintenance playbook's batch (serial) for a rollout's concurrency
version_added: 0.3.0
description:
  - With C(node_maintenance_concurrency) above 1 the maintenance playbook runs its nodes with
    Ansible's C(host_pinned) strategy. A started node keeps its worker until it ends, and the
    next node of the batch starts as soon as one ends, so a place a node leaves is taken at once
    rather than when a whole batch has finished.
  - Ansible starts as many nodes at once as it has forks, up to the batch. The forks refusal
    keeps that at least the concurrency, and nodes beyond it get ready and wait for a place.
  - Returns a bounded multiple of the concurrency, or 1 for one node at a time.
options:
  _input:
    description: The rollout's concurrency (C(node_maintenance_concurrency)).
    type: int
    required: true
author:
  - nmo.maintenance contributors
"""

EXAMPLES = r"""
- name: A rollout's play
  hosts: workers
  serial: "{{ node_maintenance_concurrency | nmo.maintenance.rollout_batch }}"
  strategy: "{{ 'ansible.builtin.host_pinned' if node_maintenance_concurrency | int > 1 else 'ansible.builtin.linear' }}"
  roles:
    - nmo.maintenance.node_maintenance
"""

RETURN = r"""
_value:
  description: The number of hosts of a batch.
  type: int
"""


def rollout_batch(concurrency: Any) -> int:
    return batch(concurrency)


class FilterModule:
    """The collection's filter of the rollout's batch."""

    def filters(self):
        return {"rollout_batch": rollout_batch}
