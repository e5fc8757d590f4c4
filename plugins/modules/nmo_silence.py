#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: nmo_silence
short_description: Silence a node's alerts in Alertmanager while it is in maintenance
version_added: "0.3.0"
description:
  - O(state=present) makes a silence for the node in Alertmanager (API v2) that ends
    O(alertmanager.duration) seconds from now, with the node's matchers, C(createdBy)
    C(nmo.maintenance) and a comment that names the run and the C(NodeMaintenance), and records
    its id on the C(NodeMaintenance) (annotation C(nmo.maintenance/silence)). When that
    annotation names a silence that is still active (a resumed run), it is extended instead;
    Alertmanager may answer a new id (it replaces a silence it cannot update in place), which
    is then recorded.
  - The run's heartbeat (M(nmo.maintenance.nmo_run) given the same O(alertmanager)) extends
    every silence its C(NodeMaintenance) objects name once half of it is gone; a run that is killed stops
    extending, and the silence lapses by itself.
  - O(state=absent) expires the silence (O(silence_id), or the one the node's
    C(NodeMaintenance) names).
  - Alertmanager unreachable or refusing is a warning and the task succeeds; a maintenance
    never fails for its silence. Bad input (a matcher that is not one, none naming the node) fails.
author:
  - nmo.maintenance maintainers (@nmo-maintenance)
extends_documentation_fragment:
  - nmo.maintenance.connection
  - nmo.maintenance.alertmanager
attributes:
  check_mode:
    support: full
    description: Reads the node's C(NodeMaintenance) and silence and says what it would do; writes nothing.
  diff_mode:
    support: full
    description: The silence id before and after.
options:
  node:
    description: Name of the node; its C(NodeMaintenance) must exist for O(state=present).
    type: str
    required: true
  state:
    description: V(present) creates or extends the silence, V(absent) expires it.
    type: str
    choices: [present, absent]
    default: present
  run_id:
    description: The run, named in the silence's comment.
    type: str
    default: ""
  silence_id:
    description: With O(state=absent), the silence to expire (the one the begin returned).
    type: str
notes:
  - The silence's times are the controller's clock.
  - Idempotent; an extension is not reported as a change (the silence stays as it was, only later).
"""

EXAMPLES = r"""
- name: Silence the node's alerts
  nmo.maintenance.nmo_silence:
    node: node-worker-01
    run_id: "{{ run.run }}"
    alertmanager:
      url: http://alertmanager.monitoring:9093
      matchers: ['node="{node}"', 'instance=~"{node}(:[0-9]+)?"']
  delegate_to: localhost
  register: silence

- name: Expire it at the end
  nmo.maintenance.nmo_silence:
    node: node-worker-01
    state: absent
    silence_id: "{{ silence.silence_id }}"
    alertmanager:
      url: http://alertmanager.monitoring:9093
  delegate_to: localhost
"""

RETURN = r"""
silence_id:
  description: The silence's id (empty when none was made).
  returned: always
  type: str
  sample: 895dd6e8-c5b8-4202-80d0-74f7e2e752e6
action:
  description: V(created), V(extended), V(expired) or V(none) (nothing to do, or Alertmanager did not answer).
  returned: always
  type: str
ends_at:
  description: The silence's new C(endsAt).
  returned: state=present and a silence was made or extended
  type: str
maintenance:
  description: The node's C(NodeMaintenance).
  returned: state=present
  type: str
matchers:
  description: The node's matchers, as sent.
  returned: state=present
  type: list
  elements: dict
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
from ansible_collections.nmo.maintenance.plugins.module_utils.errors import InputError
from ansible_collections.nmo.maintenance.plugins.module_utils.model import validation
from ansible_collections.nmo.maintenance.plugins.module_utils.specs import ALERTMANAGER
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import silences


def core(client, params):
    validation.node_name(params["node"])
    if not params["alertmanager"]:
        raise InputError("alertmanager is required (its url at least)")
    if params["state"] == "present":
        done = silences.ensure(client, params["alertmanager"], params["node"], params["run_id"] or "")
        done["diff"] = {"before": {"silence": done.pop("previous") or None}, "after": {"silence": done["silence_id"] or None}}
    else:
        done = silences.expire(client, params["alertmanager"], params["silence_id"] or "", params["node"])
        gone = done["action"] == "expired"
        done["diff"] = {"before": {"silence": done["silence_id"] or None, "expired": not gone},
                        "after": {"silence": done["silence_id"] or None, "expired": True}}
    return done


ARGUMENT_SPEC = {
    "node": {"type": "str", "required": True},
    "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
    "run_id": {"type": "str", "default": ""},
    "silence_id": {"type": "str"},
    **ALERTMANAGER,
}


def main():
    run(ARGUMENT_SPEC, core)


if __name__ == "__main__":
    main()
