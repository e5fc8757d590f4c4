# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Ansible loads the callback plugins beside a playbook by itself: this one makes every run of
# maintenance.yml (and of recover.yml and status.yml, which get no report: they start no run)
# write the run report without any configuration (docs/report.md). The plugin is the collection's.
from __future__ import annotations

from ansible_collections.nmo.maintenance.plugins.callback.nmo_report import DOCUMENTATION, CallbackModule  # noqa: F401  # pylint: disable=unused-import
