"""The filter nmo.maintenance.requests_added: a node's API requests by kind, over its calls."""

from __future__ import annotations

from typing import Any, Dict, List

from ansible_collections.nmo.maintenance.plugins.module_utils.adapter import added

DOCUMENTATION = r"""
name: requests_added
short_description: The API requests of several module calls, summed by kind
version_added: 0.2.0
description:
  - Each item is a module's registered result; its C(node_api_requests_by) when it has one (the
    call that finishes a node, which adds the begin's requests kept in the node's progress record to
    its own), else its C(api_requests_by). Skipped and failed results without counts add nothing.
  - The role's per-node summary (set_stats), where a node's cost went in one place.
options:
  _input:
    description: Registered module results (dicts); anything else is ignored.
    type: list
    elements: raw
    required: true
author:
  - nmo.maintenance contributors
"""

EXAMPLES = r"""
- name: The node's requests by kind
  ansible.builtin.debug:
    msg: "{{ [node_maintenance_drained, node_maintenance_end] | nmo.maintenance.requests_added }}"
"""

RETURN = r"""
_value:
  description: Requests by kind (C(verb resource)), sorted by kind.
  type: dict
"""


def requests_added(results: List[Any]) -> Dict[str, int]:
    counts = []
    for res in results or []:
        if isinstance(res, dict):
            by = res.get("node_api_requests_by", res.get("api_requests_by"))
            counts.append(by if isinstance(by, dict) else {})
    return added(counts)


class FilterModule:
    """The collection's filter of request counts."""

    def filters(self):
        return {"requests_added": requests_added}
