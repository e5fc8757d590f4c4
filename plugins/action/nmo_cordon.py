# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nmo_cordon's action: the one every module shares (nmo_maintenance.py, plugin_utils/in_process.py)."""

from __future__ import annotations

from ansible_collections.nmo.maintenance.plugins.plugin_utils.in_process import NmoAction


class ActionModule(NmoAction):
    pass
