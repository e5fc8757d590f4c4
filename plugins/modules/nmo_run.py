#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: nmo_run
short_description: Give a playbook run its identity, kept alive by a heartbeat on the controller
version_added: "0.2.0"
description:
  - Every run of the maintenance playbook has an id. What the run holds says so (the
    annotation C(nmo.maintenance/run) on its C(NodeMaintenance) objects, node leases and
    maintenance slots), and the run is alive while its run lease C(nmo-run-<id>) in
    C(medik8s-leases) is valid. Another run never adopts a maintenance whose run is alive;
    it adopts one whose run is gone, and says so.
  - O(state=started) creates the run lease and starts a heartbeat process on the controller.
    The heartbeat looks at the run's leases every 10 s (one list), renews the run lease every 20 s,
    and the node leases and slots of the run once half of their duration is gone, so hooks may take hours. It watches the
    C(ansible-playbook) process; when that process ends (finished, cancelled or killed), the
    heartbeat deletes the run lease at once and exits. If the controller's host dies, the run
    lease lapses after O(duration) seconds.
  - O(state=stopped) deletes the run lease; the heartbeat then exits by itself.
  - With O(alertmanager), the heartbeat also extends the Alertmanager silence of each
    C(NodeMaintenance) of this run (annotation C(nmo.maintenance/silence), made by
    M(nmo.maintenance.nmo_silence)) once half of O(alertmanager.duration) is gone; both it and
    O(notify) are checked before anything is written.
  - This module always runs in the controller's own process (it ties the run to the
    C(ansible-playbook) process); delegate it to C(localhost).
author:
  - nmo.maintenance maintainers (@nmo-maintenance)
extends_documentation_fragment:
  - nmo.maintenance.connection
  - nmo.maintenance.alertmanager
  - nmo.maintenance.notify.run
attributes:
  check_mode:
    support: full
    description: Returns the id the run would have; writes nothing and starts no heartbeat.
  diff_mode:
    support: none
    description: The run lease is bookkeeping; nothing to show.
options:
  state:
    description: Start the run (lease and heartbeat) or stop it.
    type: str
    choices: [started, stopped]
    default: started
  run_id:
    description:
      - The run's id; 1 to 50 lower-case letters, digits and C(-).
      - Default C(awx-<awx_job_id>) when O(awx_job_id) is given, otherwise made from the
        time and a random part. Refused when a live run of another process holds the id.
    type: str
  awx_job_id:
    description: The AWX (or automation controller) job id, when there is one.
    type: str
  rollout:
    description:
      - The rollout this run is part of; 1 to 50 lower-case letters, digits and C(-). Runs that
        share a rollout (AWX's slice jobs of one sliced job, or runs started by hand with the same
        value) share, through a lease C(nmo-rollout-<id>) in C(medik8s-leases), the stop after a
        failure in any of them (no node of the rollout begins after it, and a run that starts
        later begins nothing) and the count of blocked nodes that C(node_maintenance_max_blocked)
        bounds. The concurrency's slots are shared by every run anyway.
      - Default C(awx-wf-<awx_workflow_job_id>) when O(awx_workflow_job_id) is given, otherwise the
        run alone (its own id; its run lease holds the stop and the count, and no rollout lease is made).
      - The rollout lease is kept a day after a run of it last started, then removed by a later run's start.
    type: str
  awx_workflow_job_id:
    description: The id of the AWX workflow job a slice job belongs to (AWX gives every slice job the same one).
    type: str
  duration:
    description:
      - Seconds after which the run lease lapses when its heartbeat stops, from 30 (three beats
        of the heartbeat, which renews it with 20 s left) to 3600; a shorter one is refused.
    type: int
    default: 60
  mode:
    description:
      - Who does the node's work in this run. V(standalone), this collection; V(operator), a
        running Node Maintenance Operator (NMO); V(auto), NMO when one runs here, else this
        collection.
      - NMO is found by its validating webhook for C(NodeMaintenance) objects (registered
        while it is installed, and in the path of every C(NodeMaintenance) write).
        V(standalone) with NMO found, and V(operator) without, are refused before anything is
        written.
    type: str
    choices: [auto, standalone, operator]
    default: auto
  install_crd:
    description:
      - Install the C(NodeMaintenance) CRD when it is missing (or upgrade an older revision of ours), once for
        the run, before any node; the run lease then says so, and M(nmo.maintenance.nmo_maintenance) given
        this run's O(run_id) reads the CRD no more at each begin.
    type: bool
    default: false
  notify:
    description:
      - With O(notify.targets) and O(notify.blocked_after), the heartbeat sends one C(node_blocked)
        notification (M(nmo.maintenance.nmo_notify)'s format) for a node of this run whose
        C(NodeMaintenance) says it is held back (pending pods, a last error such as a slot
        another holds) with no progress for longer than O(notify.blocked_after) seconds, and
        C(run_finished) when the run ends (the C(ansible-playbook) process is gone, however it
        ended), with the counts of the node events M(nmo.maintenance.nmo_notify) sent
        (done, failed, in maintenance).
    type: dict
"""

EXAMPLES = r"""
- name: Start the run
  nmo.maintenance.nmo_run:
    awx_job_id: "{{ awx_job_id | default(omit) }}"
  delegate_to: localhost
  run_once: true
  register: run
"""

RETURN = r"""
run:
  description: The run's id.
  returned: always
  type: str
  sample: 20261201-050102-a1b2c3
rollout:
  description: The rollout the run is part of (its own id when it is alone).
  returned: always
  type: str
  sample: awx-wf-1207
lease:
  description: The run lease, namespace/name.
  returned: always
  type: str
  sample: medik8s-leases/nmo-run-20261201-050102-a1b2c3
controller:
  description: host/pid/start time of the C(ansible-playbook) process the run lives in.
  returned: state=started
  type: str
heartbeat_pid:
  description: The heartbeat process (0 in check mode).
  returned: state=started
  type: int
removed_run_leases:
  description:
    - The run leases of runs that are gone (lapsed, not deleted by their heartbeat) that the start removed, by name.
  returned: state=started, not in check mode
  type: list
  elements: str
mode:
  description: The mode of the run, V(standalone) or V(operator).
  returned: state=started
  type: str
crd:
  description: What O(install_crd) found or did (C(state) created, upgraded, unchanged or foreign; C(changed)).
  returned: state=started and O(install_crd)
  type: dict
operator:
  description: Whether a Node Maintenance Operator was found (C(running)), and by what (C(signal)).
  returned: state=started
  type: dict
kubernetes:
  description:
    - The API server's version (C(gitVersion) of C(/version)), read once at the start of the run. A server older
      than the oldest tested minor (1.31) gets a warning; see docs/layout-and-development.md, "Supported versions".
  returned: state=started
  type: str
  sample: v1.31.13
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.nmo.maintenance.plugins.module_utils.specs import ALERTMANAGER, CONNECTION, NOTIFY_TARGETS

ARGUMENT_SPEC = {
    "state": {"type": "str", "choices": ["started", "stopped"], "default": "started"},
    "run_id": {"type": "str"},
    "awx_job_id": {"type": "str"},
    "rollout": {"type": "str"},
    "awx_workflow_job_id": {"type": "str"},
    "duration": {"type": "int", "default": 60},
    "mode": {"type": "str", "choices": ["auto", "standalone", "operator"], "default": "auto"},
    "install_crd": {"type": "bool", "default": False},
    **ALERTMANAGER,
    "notify": {"type": "dict", "options": {"targets": NOTIFY_TARGETS, "blocked_after": {"type": "int"},
                                           "report": {"type": "str"}, "timeout": {"type": "float"}}},
}


def main():
    # The action plugin does the work on the controller; shipped, the module can only refuse.
    module = AnsibleModule(argument_spec={**CONNECTION, **ARGUMENT_SPEC}, supports_check_mode=True)
    module.fail_json(msg="nmo_run must run in the controller's own process: delegate it to localhost "
                         "with a local connection, without become or async")


if __name__ == "__main__":
    main()
