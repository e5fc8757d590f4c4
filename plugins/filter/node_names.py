"""The filter nmo.maintenance.node_names: the Kubernetes node of each inventory host."""

from __future__ import annotations

from typing import Any, List, Mapping

DOCUMENTATION = r"""
name: node_names
short_description: The Kubernetes node name of each inventory host
version_added: 0.2.0
description:
  - For each host, the host's C(node_maintenance_node) when it sets one, else its inventory name.
  - The play's whole list of nodes for M(nmo.maintenance.nmo_plan) and M(nmo.maintenance.nmo_preflight),
    written once instead of as a Jinja loop in each playbook.
options:
  _input:
    description: Inventory host names, usually C(ansible_play_hosts_all).
    type: list
    elements: str
    required: true
  hostvars:
    description: The play's C(hostvars).
    type: dict
    required: true
author:
  - nmo.maintenance contributors
"""

EXAMPLES = r"""
- name: Pre-flight every node of the play
  nmo.maintenance.nmo_preflight:
    nodes: "{{ ansible_play_hosts_all | nmo.maintenance.node_names(hostvars) }}"
"""

RETURN = r"""
_value:
  description: One node name a host, in the hosts' order.
  type: list
  elements: str
"""


def node_names(hosts: List[str], hostvars: Mapping[str, Any]) -> List[str]:
    """A host's ``node_maintenance_node`` when set and not empty, else the host's own name."""
    names = []
    for host in hosts:
        node = hostvars[host].get("node_maintenance_node") if host in hostvars else None
        names.append(str(node) if node else str(host))
    return names


class FilterModule:
    """The collection's filters."""

    def filters(self):
        return {"node_names": node_names}
