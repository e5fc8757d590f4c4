#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: nmo_crd
short_description: The NodeMaintenance CRD, NodeMaintenance objects, their status and events
version_added: "0.1.0"
description:
  - With O(object=crd), installs or upgrades the C(NodeMaintenance) CustomResourceDefinition
    shipped with the collection (NMO's schema, printer columns for C(kubectl get nm), and a
    CEL rule that makes the API server refuse a change of C(spec.nodeName)). A CRD installed
    by the Node Maintenance Operator is detected and left alone.
  - With O(object=nodemaintenance), makes sure a node has its C(NodeMaintenance) (found by
    C(spec.nodeName), whatever its name, so a rerun resumes it), updates its status through
    the status subresource, records events, or deletes it.
  - Creating one is refused before anything is written when the node does not exist or when
    another C(NodeMaintenance) already names the node.
  - O(events) are recorded besides C(BeginMaintenance) (recorded when a C(NodeMaintenance) is
    created) and C(RemovedMaintenance) (when one is deleted).
author:
  - nmo.maintenance maintainers (@nmo-maintenance)
extends_documentation_fragment:
  - nmo.maintenance.connection
  - nmo.maintenance.events
attributes:
  check_mode:
    support: full
    description: Reads, and reports what it would create, change or delete; writes nothing, not even events.
  diff_mode:
    support: full
    description: Shows the NodeMaintenance (spec and status) before and after.
options:
  object:
    description: What to manage.
    type: str
    choices: [nodemaintenance, crd]
    default: nodemaintenance
  state:
    description:
      - V(present) creates or keeps, V(absent) deletes.
      - For O(object=crd), V(absent) deletes only a CRD installed by this collection, and with
        it every C(NodeMaintenance).
    type: str
    choices: [present, absent]
    default: present
  install_crd:
    description:
      - With O(object=nodemaintenance) and O(state=present), install or upgrade the CRD first
        in the same call.
    type: bool
    default: false
  node:
    description: The node the C(NodeMaintenance) is for. Required with O(object=nodemaintenance).
    type: str
  name:
    description:
      - Name of the C(NodeMaintenance). Default C(maintenance-) plus the node name without
        a C(node-) prefix. An existing one for the node is found whatever its name; giving a
        different name for a node that already has one is refused.
    type: str
  reason:
    description: Why the node is maintained (C(spec.reason)); used when creating.
    type: str
    default: ""
  status:
    description:
      - Status fields to set; only those that differ are written, with C(lastUpdate).
    type: dict
    suboptions:
      phase:
        description: Phase of the maintenance.
        type: str
        choices: [Pending, Running, Succeeded, Failed]
      drainProgress:
        description: Percent of the pods to evict that are gone.
        type: int
      totalpods:
        description: Pods on the node when the drain started.
        type: int
      evictionPods:
        description: Pods to evict when the drain started.
        type: int
      pendingPods:
        description: Names of the pods not yet gone.
        type: list
        elements: str
      pendingPodsRefs:
        description: Namespace and name of the pods not yet gone.
        type: list
        elements: dict
      lastError:
        description: The latest error; an empty string clears it.
        type: str
      errorOnLeaseCount:
        description: Consecutive failures to obtain the lease.
        type: int
  run_id:
    description:
      - The playbook run this is for (M(nmo.maintenance.nmo_run)). A C(NodeMaintenance) held
        by another run that is alive is refused, before anything is written; one held by a
        run that is gone is adopted for this run (a C(ResumeMaintenance) event says so).
      - Without it, a C(NodeMaintenance) held by a live run is refused all the same.
    type: str
"""

EXAMPLES = r"""
- name: Install the CRD and start the maintenance of a node
  nmo.maintenance.nmo_crd:
    node: node-worker-01
    reason: Hardware memory upgrade
    install_crd: true
  delegate_to: localhost

- name: Record success
  nmo.maintenance.nmo_crd:
    node: node-worker-01
    status:
      phase: Succeeded
    events:
      - reason: SucceedMaintenance
  delegate_to: localhost

- name: End the maintenance
  nmo.maintenance.nmo_crd:
    node: node-worker-01
    state: absent
  delegate_to: localhost
"""

RETURN = r"""
crd:
  description:
    - What happened to the CRD (C(created), C(upgraded), C(unchanged), C(foreign), C(deleted), C(absent)).
    - C(warning) when the API server dropped its validation rule (a server without CRD validation rules), also
      given as a task warning.
  returned: when the CRD was handled
  type: dict
maintenance:
  description: The NodeMaintenance (name, nodeName, reason, phase, drainProgress, pendingPods, lastError...).
  returned: with O(object=nodemaintenance)
  type: dict
created:
  description: Whether the NodeMaintenance was created by this call.
  returned: with O(object=nodemaintenance)
  type: bool
deleted:
  description: Whether the NodeMaintenance was deleted by this call.
  returned: with O(object=nodemaintenance) and O(state=absent)
  type: bool
events:
  description: The events recorded (reason, type, message).
  returned: always
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

from ansible_collections.nmo.maintenance.plugins.module_utils import specs
from ansible_collections.nmo.maintenance.plugins.module_utils.adapter import run
from ansible_collections.nmo.maintenance.plugins.module_utils.errors import InputError
from ansible_collections.nmo.maintenance.plugins.module_utils.model import validation
from ansible_collections.nmo.maintenance.plugins.module_utils.stores import crd, events, maintenance
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import lifecycle

STATUS_OPTIONS = {
    "phase": {"type": "str", "choices": list(crd.PHASES)},
    "drainProgress": {"type": "int"},
    "totalpods": {"type": "int"},
    "evictionPods": {"type": "int"},
    "pendingPods": {"type": "list", "elements": "str"},
    "pendingPodsRefs": {"type": "list", "elements": "dict"},
    "lastError": {"type": "str"},
    "errorOnLeaseCount": {"type": "int"},
}


def validate(params):
    """Every option of object=nodemaintenance, before anything (the CRD included) is written."""
    if params["object"] != "nodemaintenance":
        return
    if params["node"] is None:
        raise InputError("node is required with object=nodemaintenance")
    validation.node_name(params["node"])
    if params["name"] is not None:
        validation.dns_subdomain(params["name"], "name", "NodeMaintenance name")
    else:
        validation.derived_name(maintenance.default_name(params["node"]), "node", params["node"])
    validation.text(params["reason"] or "", "reason", validation.MAX_REASON)
    validation.maintenance_status(params["status"])
    validation.events(params["events"])


def _maintenance(client, params, result, recorder):
    node = params["node"]
    if params["state"] == "absent":
        nm = maintenance.get(client, params["name"]) if params["name"] else maintenance.find(client, node)
        result.update(created=False, deleted=False, maintenance=maintenance.summary(nm))
        if nm is None:
            return
        lifecycle.refuse_if_live_run(client, nm, params["run_id"] or "", node)
        lifecycle.record_on(client, recorder, nm, params["events"], node)
        result["deleted"] = lifecycle.remove_maintenance(client, recorder, nm)
        result["changed"] = result["deleted"]
        result["diff"] = {"before": lifecycle.view(nm), "after": {}}
        return
    made = lifecycle.ensure_maintenance(client, recorder, node, params["reason"], params["name"],
                                        params["run_id"] or "")
    status = {k: v for k, v in (params["status"] or {}).items() if v is not None}
    nm, status_changed = maintenance.update_status(client, made["nm"], status)
    lifecycle.record_on(client, recorder, nm, params["events"], node)
    result.update(created=made["created"], maintenance=maintenance.summary(nm),
                  changed=result["changed"] or made["created"] or status_changed or bool(params["events"]),
                  diff={"before": lifecycle.view(made["before"]), "after": lifecycle.view(nm)})


def core(client, params):
    validate(params)
    result = {"changed": False}
    recorder = events.EventRecorder(client)
    if params["object"] == "crd":
        result["crd"] = crd.ensure(client) if params["state"] == "present" else crd.remove(client)
        result["changed"] = result["crd"]["changed"]
        if result["crd"]["state"] == "foreign":
            result["warnings"] = ["the NodeMaintenance CRD was installed by someone else (the Node Maintenance "
                                  "Operator?); it was left as it is"]
    else:
        if params["install_crd"] and params["state"] == "present":
            result["crd"] = crd.ensure(client)
            result["changed"] = result["crd"]["changed"]
        _maintenance(client, params, result, recorder)
    if (result.get("crd") or {}).get("warning"):  # a server without CRD validation rules
        result["warnings"] = result.get("warnings", []) + [result["crd"]["warning"]]
    result["events"] = recorder.recorded
    if recorder.warnings:
        result["warnings"] = result.get("warnings", []) + recorder.warnings
    return result


ARGUMENT_SPEC = {
    "object": {"type": "str", "choices": ["nodemaintenance", "crd"], "default": "nodemaintenance"},
    "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
    "install_crd": {"type": "bool", "default": False},
    "node": {"type": "str"},
    "name": {"type": "str"},
    "reason": {"type": "str", "default": ""},
    "status": {"type": "dict", "options": STATUS_OPTIONS},
    **specs.EVENTS,
    "run_id": {"type": "str"}}


MODULE_KWARGS = {"required_if": [("object", "nodemaintenance", ("node",))]}


def main():
    run(ARGUMENT_SPEC, core, **MODULE_KWARGS)


if __name__ == "__main__":
    main()
