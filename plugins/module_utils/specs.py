"""The module options that several modules share, one group each, defined here once.

Each group is documented once, in the doc fragment of the same name
(``plugins/doc_fragments/<group>.py``, used through ``extends_documentation_fragment``).
Each default is given here once; ``tests/unit/test_specs.py`` holds the doc fragments, the
core's options objects (``DrainOptions``, ``PreflightOptions``, ``disruption.Request``,
``etcd_guard.Options``) and the role's defaults to it. (The defaults are not imported from
those objects: that would import the drain and the guards into every module, about 60 ms
of each in-process task.)

- ``CONNECTION``: how to reach the API server (every module).
- ``LEASE``: the slot, the node lease and the etcd guard (``nmo_lease``, ``nmo_maintenance``).
- ``SELECTION``: which pods a drain takes and how (``nmo_preflight`` uses only these).
- ``DRAIN``: SELECTION plus the drain's timing, retry, fallback and returning-pod bound: the
  sub-options of the ``drain`` option of ``nmo_drain`` and ``nmo_preflight`` (``DRAIN_OPTION``),
  documented once by the ``drain`` doc fragment, which also documents the same options at the
  top level (``FLAT_DRAIN``, the form from before ``drain``). ``drain_params`` merges the two.
  ``ROLE_DRAIN`` is the role's own choice where it differs (its whole-node timeout).
- ``EVENTS``: the events to record (``nmo_crd``, ``nmo_maintenance``).
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

from ansible.module_utils.common.parameters import env_fallback

from .api.client import CONNECTION_ENV
from .model.leases import SLOT_PREFIX

Spec = Dict[str, Dict[str, Any]]


CONNECTION: Spec = {
    "kubeconfig": {"type": "raw"},
    "context": {"type": "str"},
    "host": {"type": "str"},
    "api_key": {"type": "str", "no_log": True},
    "validate_certs": {"type": "bool", "aliases": ["verify_ssl"]},
    "ca_cert": {"type": "path", "aliases": ["ssl_ca_cert"]},
    "client_cert": {"type": "path", "aliases": ["cert_file"]},
    "client_key": {"type": "path", "aliases": ["key_file"], "no_log": False},
    "proxy": {"type": "str"},
}
for _name, _env in CONNECTION_ENV.items():
    CONNECTION[_name]["fallback"] = (env_fallback, [_env])

LEASE: Spec = {
    "concurrency": {"type": "int", "default": 1},
    "duration": {"type": "int", "default": 3600},
    "slot_prefix": {"type": "str", "default": SLOT_PREFIX},
    "wait": {"type": "bool", "default": False},
    "timeout": {"type": "float", "default": 600.0},
    "etcd_guard": {"type": "str", "choices": ["auto", "kubeadm", "openshift", "none"], "default": "auto"},
    "etcd_pod_selector": {"type": "str", "default": "component=etcd"},
    "etcd_pod_namespace": {"type": "str", "default": "kube-system"},
    "etcd_guard_namespace": {"type": "str", "default": "openshift-etcd"},
    "run_id": {"type": "str"},
    "rollout": {"type": "str"},
    "budgets": {"type": "list", "elements": "dict", "default": []},
    "control_plane_concurrency": {"type": "int", "default": 1},
    "turn": {"type": "int"},
}

SELECTION: Spec = {
    "force": {"type": "bool", "default": True},
    "delete_emptydir_data": {"type": "bool", "default": True},
    "ignore_daemonsets": {"type": "bool", "default": True},
    "pod_selector": {"type": "str"},
    "disable_eviction": {"type": "bool", "default": False},
    "skip_wait_for_delete_timeout": {"type": "int", "default": 0},
    "parallelism": {"type": "int", "default": 32},
    "kubevirt": {"type": "str", "choices": ["wait", "migrate"], "default": "wait"},
    # surge-first (model/surge.py): restart the Deployment of a pod its budget keeps
    "surge": {"type": "bool", "default": False},
    # drain rules (model/drain_rules.py checks them again, for callers of the core and clear messages)
    "rules": {"type": "list", "elements": "dict", "options": {
        "name": {"type": "str"},
        "selector": {"type": "str"},
        "namespace_selector": {"type": "str"},
        "action": {"type": "str", "choices": ["drain", "skip", "wait-completed"], "default": "drain"},
        "order": {"type": "int", "default": 0}}},
}

# The drain's options beyond the selection. Their defaults are DrainOptions'
# (workflows/drain_options.py), held to these by tests/unit/test_specs.py.
DRAIN: Spec = {
    **SELECTION,
    "grace_period": {"type": "int"},
    "timeout": {"type": "float", "default": 600.0},
    "delete_fallback_after": {"type": "float"},
    "retry_delay": {"type": "float", "default": 1.0},
    "returning_pod_evictions": {"type": "int", "default": 3},
}
# The role's defaults where they are not the module's, on purpose: a whole node's drain (VMs
# live-migrating, budgets letting one pod go at a time) gets half an hour. The role's
# argument_specs.yml and README.md are checked against DRAIN with these applied.
ROLE_DRAIN: Dict[str, Any] = {"timeout": 1800.0}

DRAIN_OPTION: Spec = {"drain": {"type": "dict", "options": DRAIN}}
# The same options at the top level, as modules took them before ``drain``. No default: a
# value there is one the caller gave (``drain_params`` tells them apart by that).
FLAT_DRAIN: Spec = {name: {key: value for key, value in option.items() if key != "default"}
                    for name, option in DRAIN.items()}

EVENTS: Spec = {
    "events": {"type": "list", "elements": "dict", "default": [], "options": {
        "reason": {"type": "str", "required": True},
        "text": {"type": "str"},
        "type": {"type": "str", "choices": ["Normal", "Warning"]},
        "on": {"type": "str", "choices": ["maintenance", "node"], "default": "maintenance"}}},
}


def pool_size(params: Dict[str, Any]) -> int:
    """Connections for a module with DRAIN_OPTION: its parallel requests plus the watch and a status write."""
    parallelism = drain_params(params)[0]["parallelism"]
    return min(max(int(parallelism or 1), 1), 500) + 2  # checked later: never a huge pool first


def drain_params(params: Dict[str, Any]) -> Tuple[Dict[str, Any], List[str]]:
    """(params, warnings): the module's parameters with the drain options at the top level, as
    the core's options classes take them. ``drain``, when given, wins whole (Ansible has filled
    its defaults in); the top-level options then are ignored, with a warning for each one set.
    Without ``drain``, the top-level options given apply, the rest take DRAIN's defaults."""
    given = params.get("drain")
    flat = {name: params[name] for name in DRAIN if params.get(name) is not None}
    merged = {name: option.get("default") for name, option in DRAIN.items()}
    warnings: List[str] = []
    if given is None:
        merged.update(flat)
    else:
        merged.update(given)
        warnings = [f"{name} is ignored: drain is given, so drain.{name} applies (give it there)"
                    for name in sorted(flat)]
    return {**params, **merged}, warnings


# The Alertmanager of the role's silences (nmo_run's heartbeat, nmo_silence; docs/design.md §17.2),
# documented by the alertmanager doc fragment; its credentials are no_log.
ALERTMANAGER_OPTIONS: Spec = {
    "url": {"type": "str", "required": True},
    "matchers": {"type": "list", "elements": "str", "default": ['node="{node}"', 'instance=~"{node}(:[0-9]+)?"']},
    "duration": {"type": "int", "default": 600},
    "username": {"type": "str"},
    "password": {"type": "str", "no_log": True},
    "token": {"type": "str", "no_log": True},
    "ca_path": {"type": "path"},
    "validate_certs": {"type": "bool", "default": True},
    "timeout": {"type": "float", "default": 5.0},
}
ALERTMANAGER: Spec = {"alertmanager": {"type": "dict", "options": ALERTMANAGER_OPTIONS}}

# The notification targets (nmo_notify, nmo_run's heartbeat; docs/design.md §17.1): URLs and
# secrets are no_log (a chat webhook's URL is its token).
NOTIFY_TARGET: Spec = {
    "url": {"type": "str", "required": True, "no_log": True},
    "kind": {"type": "str", "choices": ["slack", "teams", "webhook"], "default": "webhook"},
    "secret": {"type": "str", "no_log": True},
    "ca_path": {"type": "path"},
    "validate_certs": {"type": "bool", "default": True},
}
NOTIFY_TARGETS: Spec = {"type": "list", "elements": "dict", "options": NOTIFY_TARGET, "default": []}
