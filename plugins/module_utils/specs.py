"""The module options that several modules share, one group each, defined here once.

Each group is documented once, in the doc fragment of the same name
(``plugins/doc_fragments/<group>.py``, used through ``extends_documentation_fragment``).
A default is the core's own: the default of the field of the options object the group
fills (``DrainOptions``, ``disruption.Request``...), so a module, the core and the
documentation cannot disagree. ``tests/unit/test_specs.py`` holds the doc fragments and the
role's defaults to these specs.

- ``CONNECTION``: how to reach the API server (every module).
- ``LEASE``: the slot, the node lease and the etcd guard (``nmo_lease``, ``nmo_maintenance``).
- ``SELECTION``: which pods a drain takes and how (``nmo_drain``, ``nmo_preflight``).
- ``EVENTS``: the events to record (``nmo_crd``, ``nmo_maintenance``).
"""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any, Dict

from ansible.module_utils.common.parameters import env_fallback

from .api.client import CONNECTION_ENV
from .drain.drain import DrainOptions
from .guards import etcd_guard
from .guards.disruption import Request

Spec = Dict[str, Dict[str, Any]]


def default_of(cls: Any, name: str) -> Any:
    """The default of field ``name`` of the dataclass ``cls``."""
    for item in fields(cls):
        if item.name == name:
            if item.default is not MISSING:
                return item.default
            if item.default_factory is not MISSING:
                return item.default_factory()
    raise KeyError(f"{cls.__name__} has no default for {name}")


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

_ETCD = etcd_guard.Options()
LEASE: Spec = {
    "concurrency": {"type": "int", "default": default_of(Request, "concurrency")},
    "duration": {"type": "int", "default": default_of(Request, "duration")},
    "slot_prefix": {"type": "str", "default": default_of(Request, "slot_prefix")},
    "wait": {"type": "bool", "default": default_of(Request, "wait")},
    "timeout": {"type": "float", "default": default_of(Request, "timeout")},
    "etcd_guard": {"type": "str", "choices": list(etcd_guard.FLAVOURS), "default": _ETCD.flavour},
    "etcd_pod_selector": {"type": "str", "default": _ETCD.pod_selector},
    "etcd_pod_namespace": {"type": "str", "default": _ETCD.pod_namespace},
    "etcd_guard_namespace": {"type": "str", "default": _ETCD.guard_namespace},
    "run_id": {"type": "str"},
}

SELECTION: Spec = {
    "force": {"type": "bool", "default": default_of(DrainOptions, "force")},
    "delete_emptydir_data": {"type": "bool", "default": default_of(DrainOptions, "delete_emptydir_data")},
    "ignore_daemonsets": {"type": "bool", "default": default_of(DrainOptions, "ignore_daemonsets")},
    "pod_selector": {"type": "str"},
    "disable_eviction": {"type": "bool", "default": default_of(DrainOptions, "disable_eviction")},
    "skip_wait_for_delete_timeout": {"type": "int", "default": default_of(DrainOptions, "skip_wait_for_delete_timeout")},
    "parallelism": {"type": "int", "default": default_of(DrainOptions, "parallelism")},
}

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
