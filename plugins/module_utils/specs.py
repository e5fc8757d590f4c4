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
- ``SELECTION``: which pods a drain takes and how (``nmo_drain``, ``nmo_preflight``).
- ``EVENTS``: the events to record (``nmo_crd``, ``nmo_maintenance``).
"""

from __future__ import annotations

from typing import Any, Dict

from ansible.module_utils.common.parameters import env_fallback

from .api.client import CONNECTION_ENV

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
    "slot_prefix": {"type": "str", "default": "nmo-maintenance-slot"},
    "wait": {"type": "bool", "default": False},
    "timeout": {"type": "float", "default": 600.0},
    "etcd_guard": {"type": "str", "choices": ["auto", "kubeadm", "openshift", "none"], "default": "auto"},
    "etcd_pod_selector": {"type": "str", "default": "component=etcd"},
    "etcd_pod_namespace": {"type": "str", "default": "kube-system"},
    "etcd_guard_namespace": {"type": "str", "default": "openshift-etcd"},
    "run_id": {"type": "str"},
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
}

# nmo_drain's own options beside SELECTION (DrainOptions' defaults)
DRAIN_TIMEOUT = 600.0
DRAIN_RETRY_DELAY = 1.0
DRAIN_RETURNING_POD_EVICTIONS = 3

EVENTS: Spec = {
    "events": {"type": "list", "elements": "dict", "default": [], "options": {
        "reason": {"type": "str", "required": True},
        "text": {"type": "str"},
        "type": {"type": "str", "choices": ["Normal", "Warning"]},
        "on": {"type": "str", "choices": ["maintenance", "node"], "default": "maintenance"}}},
}


def pool_size(params: Dict[str, Any]) -> int:
    """Connections for a module with SELECTION: its parallel requests plus the watch and a status write."""
    return min(max(int(params["parallelism"] or 1), 1), 500) + 2  # checked later: never a huge pool first
