"""The filter nmo.maintenance.forks_refusal: why a concurrency cannot run with Ansible's forks."""

from __future__ import annotations

from typing import Any

from ansible_collections.nmo.maintenance.plugins.module_utils.model.rollout import forks_refusal as refusal

DOCUMENTATION = r"""
name: forks_refusal
short_description: Why a rollout's concurrency cannot run with Ansible's forks
version_added: 0.2.0
description:
  - The maintenance playbook runs a batch of C(node_maintenance_concurrency) nodes with the free
    strategy, and a batch gets as many Ansible workers as the forks allow. A node waiting in its
    begin for a place keeps its worker, and the node holding that place needs a worker for its next
    task, so with fewer forks than the concurrency the batch can stand still until its waits time out.
  - Returns the operator's message (what to run instead) when the concurrency is above the forks,
    else an empty string. Unknown forks (0) refuse nothing.
options:
  _input:
    description: The rollout's concurrency (C(node_maintenance_concurrency)).
    type: int
    required: true
  forks:
    description: Ansible's forks for the run (the magic variable C(ansible_forks)).
    type: int
    required: true
author:
  - nmo.maintenance contributors
"""

EXAMPLES = r"""
- name: Refuse a concurrency the forks cannot run
  ansible.builtin.fail:
    msg: "{{ node_maintenance_concurrency | nmo.maintenance.forks_refusal(ansible_forks) }}"
  when: node_maintenance_concurrency | nmo.maintenance.forks_refusal(ansible_forks) | length > 0
"""

RETURN = r"""
_value:
  description: The refusal's message, or an empty string when the forks suffice.
  type: str
"""


def forks_refusal(concurrency: Any, forks: Any) -> str:
    return refusal(concurrency, forks)


class FilterModule:
    """The collection's filter of the rollout's workers."""

    def filters(self):
        return {"forks_refusal": forks_refusal}
