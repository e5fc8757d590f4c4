# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The action of every module of this collection: each runs in Ansible's worker when it would
run on the controller anyway, and is shipped otherwise (plugin_utils/in_process.py).

The other modules' action files are copies of this one's three lines (the module's name in
their docstring). Not a ``plugin_routing`` redirect in meta/runtime.yml: Ansible then takes the
redirect's target as the task's resolved action, so ``module_defaults`` given for one module
(``nmo.maintenance.nmo_info: {...}``) would be ignored for it and those of nmo_maintenance
applied to every module instead. Not symbolic links either: antsibull-docs (the docs site's
builder and ``lint-collection-docs``) takes a link in plugins/action/ for a redirect of the
module to nmo_maintenance, and documents and checks every such module as nmo_maintenance.
"""

from __future__ import annotations

from ansible_collections.nmo.maintenance.plugins.plugin_utils.in_process import NmoAction


class ActionModule(NmoAction):
    pass
