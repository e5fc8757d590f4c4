"""What a module task imports is paid by every task that runs it.

A module task runs in a worker Ansible forks for it (plugin_utils/in_process.py), which
imports the module and its module_utils anew each time: an import a module does not need
costs every begin, end and cordon of a rollout. The modules that only take marks off a node
(the begin's rollback, the end, recover.yml) must not bring in the drain's and the settle's
pure models for a constant: model/marks.py holds the keys.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PACKAGE = "ansible_collections.nmo.maintenance.plugins"
# the settle's model and what it brings (the drain needs them; these modules do not)
NOT_NEEDED = ("module_utils.model.settle", "module_utils.model.pod_filters", "module_utils.model.drain_rules",
              "module_utils.model.budgets")


def imported(module: str) -> set:
    """The collection's modules a fresh interpreter holds after importing ``module``."""
    code = (f"import json, sys; import {PACKAGE}.{module}; "
            f"print(json.dumps(sorted(m for m in sys.modules if m.startswith({PACKAGE!r}))))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return {name[len(PACKAGE) + 1:] for name in json.loads(out.stdout)}


@pytest.mark.parametrize("module", ["modules.nmo_cordon", "modules.nmo_maintenance", "modules.nmo_recover"])
def test_modules_that_only_take_marks_off_import_no_settle_model(module):
    found = sorted(set(NOT_NEEDED) & imported(module))
    assert not found, f"{module} imports {found}: each of its tasks pays for them (take the key from model/marks.py)"


def test_the_drain_still_imports_them():
    """The check above can see these imports: the drain, which uses them, has them."""
    assert set(NOT_NEEDED) <= imported("modules.nmo_drain")


def test_the_look_imports_no_input_check():
    """nmo_plan (every node's look) needs only the window's end (model/window.py): the role's
    input check (role_inputs.py) imports the drain's options to check them, which the look does
    not need."""
    found = imported("modules.nmo_plan")
    assert not {"module_utils.role_inputs", "module_utils.workflows.drain_options"} & found, sorted(found)
