# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nmo_crd, in Ansible's worker process when it would run on the controller (see plugin_utils/in_process.py)."""

from __future__ import annotations

from ansible_collections.nmo.maintenance.plugins.plugin_utils.in_process import NmoAction


class ActionModule(NmoAction):
    module = "nmo_crd"
