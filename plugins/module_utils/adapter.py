"""The one place where Ansible meets the core: argument spec in, result or failure out.

A module's ``main()`` is ``run(spec, core_function)``, shipped or called in Ansible's worker
(plugin_utils/in_process.py) alike; the core function gets a connected client (in dry run
when Ansible runs in check mode: ``client.dry_run``) and the parameters, and returns the
result dict (``changed``, ``diff``, module-specific keys, optional ``warnings``). The shared option
groups of a spec are in ``specs.py``.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from ansible.module_utils.basic import AnsibleModule

from .api.client import Client, ConnectionOptions, connect
from .errors import NmoError
from .specs import CONNECTION

CoreFunction = Callable[[Client, Dict[str, Any]], Dict[str, Any]]


def execute(params: Dict[str, Any], core: CoreFunction, check_mode: bool, diff: bool,
            pool_size: Optional[Callable[[Dict[str, Any]], int]] = None, client: Optional[Client] = None
            ) -> Dict[str, Any]:
    """Validated parameters in, the module's result out (``failed`` and ``msg`` on an NmoError)."""
    if isinstance(params.get("kubeconfig"), dict):
        return {"failed": True, "msg": "kubeconfig as a dict is not supported: give the path of a kubeconfig file"}
    try:
        client = client or connect(ConnectionOptions.from_params(params), pool_size(params) if pool_size else 16)
        client.dry_run = check_mode  # what every store and workflow of this call reads
        mark = dict(client.requests_by)
        result = core(client, params)
    except NmoError as exc:
        details = {k: v for k, v in exc.details.items() if v is not None}
        return {**details, "failed": True, "msg": exc.message}
    if client.warnings:  # about the connection itself (api_key beside a client certificate)
        result["warnings"] = list(client.warnings) + list(result.get("warnings") or [])
    if not diff:
        result.pop("diff", None)
    result.setdefault("changed", False)
    result.setdefault("api_requests", client.requests)
    result.setdefault("api_requests_by", client.requests_since(mark))
    recorded = result.pop("recorded_requests", None)
    if recorded is not None:  # the call that finishes a node: the begin's, as its record keeps them, and its own
        result["node_api_requests_by"] = added([recorded, result["api_requests_by"]])
        result["node_api_requests"] = sum(result["node_api_requests_by"].values())
    return result


def added(counts: List[Dict[str, int]]) -> Dict[str, int]:
    """Requests by kind of several calls, summed kind by kind."""
    total: Dict[str, int] = {}
    for by_kind in counts:
        for kind, number in (by_kind or {}).items():
            total[kind] = total.get(kind, 0) + int(number)
    return dict(sorted(total.items()))


def run(argument_spec: Dict[str, Any], core: CoreFunction, pool_size: Optional[Callable[[Dict[str, Any]], int]] = None,
        **module_kwargs: Any) -> None:
    module = AnsibleModule(argument_spec={**CONNECTION, **argument_spec}, supports_check_mode=True,
                           **module_kwargs)
    result = execute(dict(module.params), core, module.check_mode, module._diff, pool_size)
    for warning in result.pop("warnings", []):
        module.warn(warning)
    if result.pop("failed", False):
        module.fail_json(**result)
    module.exit_json(**result)
