# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A task's arguments checked on the controller, for the code that acts there itself.

Modules check their own arguments (``AnsibleModule``, in process or shipped). Two pieces of
controller code need the values without running a module: ``nmo_run``, which is no module
at all (it ties the run to the ``ansible-playbook`` process), and ``nmo_drain``'s progress
printer, which reads the NodeMaintenance beside the drain. They check the task's arguments
against the same spec, connection options included (aliases, ``K8S_AUTH_*`` fallbacks).
"""

from __future__ import annotations

from typing import Any, Dict

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator, ValidationResult


def check(module_spec: Dict[str, Any], args: Dict[str, Any], **module_kwargs: Any) -> ValidationResult:
    """``args`` checked against the connection options plus ``module_spec``. ImportError when
    the controller's Python lacks what the core needs (urllib3): imported here, not when the
    action plugins load, so that such a controller still ships the modules."""
    from ansible_collections.nmo.maintenance.plugins.module_utils.specs import CONNECTION

    return ArgumentSpecValidator({**CONNECTION, **module_spec}, **module_kwargs).validate(dict(args))
