#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: nmo_notify
short_description: Tell people about a maintenance run, on Slack, Teams or a webhook
version_added: "0.3.0"
description:
  - Sends one event of a maintenance run (run started, node begun, node blocked, node failed,
    node back in service, run finished) to every target at once, from the controller. A
    V(slack) target gets an incoming webhook's JSON (C(text) and C(blocks); Mattermost and
    Rocket.Chat accept it), a V(teams) target a Teams workflow webhook's message with an
    Adaptive Card, a V(webhook) target the documented JSON body of docs/notifications.md (
    C(version), C(event), C(run), C(node), C(message), C(time), C(details)), signed with
    HMAC-SHA256 when it has a O(targets[].secret).
  - Each target gets O(attempts) tries of O(timeout) seconds at most (backoff between them,
    a C(Retry-After) of up to 10 s honoured); the targets are asked in parallel, so the task
    takes as long as the slowest target's bound, never more.
  - A target that does not take the message is a warning and the task succeeds; a
    notification never fails a maintenance. Bad input (an unknown kind, a URL that is not
    http or https) fails before anything is sent.
  - URLs and secrets are no_log, and no message names more of a URL than its scheme and host.
  - Needs no Kubernetes connection; it is not in the C(nmo.maintenance.nmo) action group.
author:
  - nmo.maintenance maintainers (@nmo-maintenance)
extends_documentation_fragment:
  - nmo.maintenance.notify
attributes:
  check_mode:
    support: full
    description: Builds the message and sends nothing.
  diff_mode:
    support: none
    description: A message changes nothing.
options:
  event:
    description: What happened.
    type: str
    required: true
    choices: [run_started, node_begun, node_blocked, node_failed, node_done, run_finished]
  run_id:
    description: The run.
    type: str
    required: true
  node:
    description: The node, for the node events.
    type: str
  details:
    description:
      - What the event says beyond run and node, sent as the webhook body's C(details) and shown
        by the chat kinds. Known keys C(nodes) and C(window_end) (run_started), C(maintenance),
        C(error), C(outcome), C(rolled_back) (node_failed), C(took_seconds) or C(since)
        (node_done; C(since) is when the maintenance began, RFC 3339), C(what) and
        C(blocked_seconds) (node_blocked), C(counts) and C(report) (run_finished).
    type: dict
    default: {}
  timeout:
    description: Seconds for each attempt (connect and read).
    type: float
    default: 5.0
  attempts:
    description: Tries per target at most, the first included (1 to 5).
    type: int
    default: 3
"""

EXAMPLES = r"""
- name: Tell the channel the node is back
  nmo.maintenance.nmo_notify:
    targets:
      - url: "{{ slack_webhook_url }}"
        kind: slack
      - url: https://hooks.example.com/nmo
        secret: "{{ webhook_secret }}"
    event: node_done
    run_id: "{{ run.run }}"
    node: node-worker-01
    details:
      since: "2026-12-01T02:00:00Z"
  delegate_to: localhost
"""

RETURN = r"""
message:
  description: The sentence every kind shows.
  returned: always
  type: str
  sample: "Node node-worker-01: back in service after 3 min 12 s (run 20261201-020000-a1b2c3)"
delivered:
  description: Targets that took it (2xx).
  returned: always
  type: int
undelivered:
  description: Targets that did not; each is a warning too.
  returned: always
  type: int
targets:
  description:
    - Per target, in order, C(index), C(kind), C(target) (scheme and host only), C(ok), C(status)
      (0 when no answer), C(attempts), C(seconds) and C(error). Empty in check mode.
  returned: always
  type: list
  elements: dict
event:
  description: The event sent.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.nmo.maintenance.plugins.module_utils.errors import NmoError
from ansible_collections.nmo.maintenance.plugins.module_utils.specs import NOTIFY_TARGETS
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import notify

ARGUMENT_SPEC = {
    "targets": NOTIFY_TARGETS,
    "event": {"type": "str", "required": True,
              "choices": ["run_started", "node_begun", "node_blocked", "node_failed", "node_done", "run_finished"]},
    "run_id": {"type": "str", "required": True},
    "node": {"type": "str"},
    "details": {"type": "dict", "default": {}},
    "timeout": {"type": "float", "default": 5.0},
    "attempts": {"type": "int", "default": 3},
}


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    try:
        result = notify.call(params, dry_run=module.check_mode)
    except NmoError as exc:
        module.fail_json(msg=exc.message)
    for warning in result.pop("warnings", []):
        module.warn(warning)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
