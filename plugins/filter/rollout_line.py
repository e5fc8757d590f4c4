"""The filter nmo.maintenance.rollout_line: one line of status.yml for a rollout of several runs."""

from __future__ import annotations

from typing import Any, Dict

DOCUMENTATION = r"""
name: rollout_line
short_description: One line saying where a rollout of several runs stands
version_added: 0.2.0
description:
  - Takes one entry of M(nmo.maintenance.nmo_info)'s RV(nmo.maintenance.nmo_info#module:rollouts) and says its
    live runs, whether it stopped (after which node, phase and run), the blocked nodes it counted and until when
    its lease is kept.
options:
  _input:
    description: One entry of RV(nmo.maintenance.nmo_info#module:rollouts).
    type: dict
    required: true
author:
  - nmo.maintenance contributors
"""

EXAMPLES = r"""
- name: Where each rollout stands
  ansible.builtin.debug:
    msg: "{{ info.rollouts | map('nmo.maintenance.rollout_line') | list }}"
"""

RETURN = r"""
_value:
  description: The line.
  type: str
"""


def rollout_line(entry: Dict[str, Any]) -> str:
    runs = entry.get("runs") or []
    alive = f"{len(runs)} live run(s): {', '.join(runs)}" if runs else "no live run"
    stopped = entry.get("stopped_after") or ""
    if stopped:
        node, _sep, phase = stopped.rpartition("/")
        state = (f"STOPPED after {node} failed (in the {phase.replace('_', '-')} phase, run "
                 f"{entry.get('stopped_run') or '?'}): no node of it begins")
    else:
        state = "going on"
    blocked = entry.get("blocked") or []
    counted = f"; blocked nodes counted: {', '.join(blocked)}" if blocked else ""
    return (f"rollout {entry.get('rollout')}: {state}; {alive}{counted}; last run started {entry.get('last_start')}, "
            f"kept until {entry.get('kept_until')}")


class FilterModule:
    """The collection's filter of status.yml's rollout lines."""

    def filters(self):
        return {"rollout_line": rollout_line}
