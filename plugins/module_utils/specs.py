"""The module options that several modules share, one group each, defined here once.

Each group is documented once, in the doc fragment of the same name
(``plugins/doc_fragments/<group>.py``, used through ``extends_documentation_fragment``).
Each default is given here once; ``tests/unit/test_specs.py`` holds the doc fragments, the
core's lease options objects (``disruption.Request``, ``etcd_guard.Options``) and the role's
defaults to it. (The defaults are not imported from those objects: that would import the
drain and the guards into every module, about 60 ms of each in-process task.) The drain's
options are declared in model/drain_spec.py, pure data the core's options objects take their
fields and defaults from, and imported here.

- ``CONNECTION``: how to reach the API server (every module).
- ``LEASE``: the slot, the node lease and the etcd guard (``nmo_lease``, ``nmo_maintenance``).
- ``SELECTION`` (model/drain_spec.py): which pods a drain takes and how (``nmo_preflight`` uses only these).
- ``DRAIN`` (model/drain_spec.py): SELECTION plus the drain's timing, retry, fallback and returning-pod bound: the
  sub-options of the ``drain`` option of ``nmo_drain`` and ``nmo_preflight`` (``DRAIN_OPTION``),
  documented once by the ``drain`` doc fragment, which also documents the same options at the
  top level (``FLAT_DRAIN``, the form from before ``drain``). ``drain_params`` takes one or the other.
  ``ROLE_DRAIN`` is the role's own choice where it differs (its whole-node timeout).
- ``EVENTS``: the events to record (``nmo_crd``, ``nmo_maintenance``).
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

from ansible.module_utils.common.parameters import env_fallback

from .api.client import CONNECTION_ENV
from .model.drain_spec import DRAIN, MAX_PARALLELISM, ROLE_DRAIN, SELECTION
from .model.leases import SLOT_PREFIX

__all__ = ["CONNECTION", "LEASE", "SELECTION", "DRAIN", "ROLE_DRAIN", "DRAIN_OPTION", "FLAT_DRAIN", "EVENTS",
           "ALERTMANAGER_OPTIONS", "ALERTMANAGER", "NOTIFY_TARGET", "NOTIFY_TARGETS", "drain_params", "pool_size"]

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

# SELECTION, DRAIN and the role's ROLE_DRAIN are declared once, in model/drain_spec.py (imported
# above), where the core's options objects take their fields from them.

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
    """Connections for a module with DRAIN_OPTION: its parallel requests plus the watch and a
    status write. Read from the parameters as given, before the options object is made and
    checked: never a huge pool first."""
    parallelism = drain_params(params)[0].get("parallelism")
    if parallelism is None:
        parallelism = DRAIN["parallelism"]["default"]
    return min(max(int(parallelism or 1), 1), MAX_PARALLELISM) + 2


def drain_params(params: Dict[str, Any]) -> Tuple[Dict[str, Any], List[str]]:
    """(params, warnings): the module's parameters with the drain options at the top level, as
    the core's options classes take them (an option left unset, None, takes their default, the
    spec's). ``drain``, when given, is taken as it is, whole (Ansible has filled its defaults in;
    the role hands it complete); the top-level options then are ignored, with a warning for each
    one set. Without ``drain``, the top-level options given apply."""
    given = params.get("drain")
    if given is None:
        return params, []
    warnings = [f"{name} is ignored: drain is given, so drain.{name} applies (give it there)"
                for name in DRAIN if params.get(name) is not None]
    return {**params, **given}, sorted(warnings)


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
