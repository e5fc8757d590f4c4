# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The notification targets (module_utils/specs.py, NOTIFY_TARGETS), documented once for both
modules that take them: nmo_notify's ``targets`` (DOCUMENTATION) and the sub-options of nmo_run's
``notify`` (RUN, named ``nmo.maintenance.notify.run``).

Two literals, not one string placed twice: ansible-test's yamllint reads a fragment's
assignments without importing it, and a fragment's options merge only at the top level (the
module keeps ``notify``'s description, the fragment gives its sub-options). The targets are the
same in both; tests/unit/test_doc_fragments.py fails when they differ or leave specs.py.
"""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  targets:
    description: Where to send it.
    type: list
    elements: dict
    default: []
    suboptions:
      url:
        description: The webhook's URL (no_log, as a chat webhook's URL is its token).
        type: str
        required: true
      kind:
        description:
          - What the URL takes. V(slack), an incoming webhook (also Mattermost's and Rocket.Chat's);
            V(teams), a workflow webhook (an Adaptive Card); V(webhook), the documented JSON.
        type: str
        choices: [slack, teams, webhook]
        default: webhook
      secret:
        description:
          - V(webhook) only. Signs each request with HMAC-SHA256; headers C(X-NMO-Timestamp) (Unix
            seconds) and C(X-NMO-Signature) (C(sha256=<hex>) of C(<timestamp>.<body>)).
        type: str
      ca_path:
        description: CA bundle to verify an https URL with.
        type: path
      validate_certs:
        description: Verify the server's certificate.
        type: bool
        default: true
"""

    RUN = r"""
options:
  notify:
    suboptions:
      targets:
        description: Where to send them, as M(nmo.maintenance.nmo_notify)'s O(nmo.maintenance.nmo_notify#module:targets).
        type: list
        elements: dict
        default: []
        suboptions:
          # written by hack/shared_docs.py from the targets of plugins/doc_fragments/notify.py: run it after a change there
          url:
            description: The webhook's URL (no_log, as a chat webhook's URL is its token).
            type: str
            required: true
          kind:
            description:
              - What the URL takes. V(slack), an incoming webhook (also Mattermost's and Rocket.Chat's); V(teams),
                a workflow webhook (an Adaptive Card); V(webhook), the documented JSON.
            type: str
            choices:
              - slack
              - teams
              - webhook
            default: webhook
          secret:
            description:
              - V(webhook) only. Signs each request with HMAC-SHA256; headers C(X-NMO-Timestamp) (Unix seconds)
                and C(X-NMO-Signature) (C(sha256=<hex>) of C(<timestamp>.<body>)).
            type: str
          ca_path:
            description: CA bundle to verify an https URL with.
            type: path
          validate_certs:
            description: Verify the server's certificate.
            type: bool
            default: true
          # end of what hack/shared_docs.py writes
      blocked_after:
        description: Seconds without progress before a node is said to be blocked; 0 or none tells nothing.
        type: int
      report:
        description: The run report's path, named by the C(run_finished) notification.
        type: str
      timeout:
        description: Seconds for each attempt of the heartbeat's notifications (three at most per target).
        type: float
"""
