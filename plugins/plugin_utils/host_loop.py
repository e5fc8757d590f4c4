# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tasks that bypass Ansible's host loop, which the free strategy refuses to run.

Above ``node_maintenance_concurrency`` 1 the maintenance playbook runs its nodes with the free
strategy, and that strategy fails a task whose action plugin sets ``BYPASS_HOST_LOOP`` (an
``ansible.builtin.pause`` in a work hook) at the moment it reaches it: in the work phase,
after the node was cordoned and drained. ``nmo_check_files`` asks this module before any
write, over the tasks it loaded from each hook and gate file.

Whether an action bypasses the host loop is read where the strategy reads it: the class
attribute of the action plugin that ``action_loader`` finds for the task's action and its
``collections`` search list (so ``pause``, ``ansible.legacy.pause`` and a short name found
through a ``collections`` keyword all answer as they will when the task runs). When the
plugin loader cannot answer (an ansible-core that moved it, a loader not set up), the
actions ansible-core ships with the attribute set are named here instead, in every
spelling a task may use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Iterator, List, Optional, Sequence

try:
    from ansible.plugins.loader import action_loader
except ImportError:  # an ansible-core that moved it: the fallback list answers
    action_loader = None

# ansible-core's actions that set BYPASS_HOST_LOOP (plugins/action/pause.py, add_host.py),
# used only when the plugin loader cannot be asked
KNOWN = ("pause", "add_host")
FALLBACK = frozenset(name for short in KNOWN
                     for name in (short, f"ansible.builtin.{short}", f"ansible.legacy.{short}"))
PAUSES = frozenset(name for name in FALLBACK if name.rsplit(".", 1)[-1] == "pause")
INSTEAD_OF_PAUSE = ("use ansible.builtin.wait_for with timeout instead (ansible.builtin.wait_for: {timeout: 60} "
                    "waits 60 s on the node's host)")
INSTEAD_OTHERWISE = "move it out of the hook"


@dataclass(frozen=True)
class Bypass:
    """A task of a hook or gate file that the free strategy would refuse."""

    option: str
    path: str
    task: str
    action: str

    def message(self, concurrency: int) -> str:
        instead = INSTEAD_OF_PAUSE if self.action in PAUSES or _short(self.action) == "pause" else INSTEAD_OTHERWISE
        return (f"{self.option}: {self.path}: task '{self.task}' uses {self.action}, which bypasses Ansible's host "
                f"loop: the free strategy (host_pinned) that runs the nodes at node_maintenance_concurrency {concurrency} "
                f"refuses it when it reaches the task, after the node was drained; {instead}, or run at "
                "node_maintenance_concurrency 1")


def _short(action: str) -> str:
    return action.rsplit(".", 1)[-1]


def tasks_of(items: Iterable[Any]) -> Iterator[Any]:
    """Every task of loaded blocks, through ``block``, ``rescue`` and ``always`` at any depth."""
    for item in items:
        parts = [getattr(item, name, None) for name in ("block", "rescue", "always")]
        if any(isinstance(part, list) for part in parts):
            for part in parts:
                yield from tasks_of(part or [])
        else:
            yield item


def by_loader(action: str, collections: Optional[Sequence[str]]) -> Optional[bool]:
    """The strategy's own answer: the action plugin's class attribute; None when the loader
    cannot be asked (the fallback list answers then)."""
    if action_loader is None:
        return None
    try:
        found = action_loader.get(action, class_only=True, collection_list=list(collections or []))
    except Exception:  # pylint: disable=broad-except  # a loader that cannot answer: the list does
        return None
    # None: no action plugin of its own (the module runs per host), or a loader without its
    # collection finder, which finds nothing by a full name: the list says which
    return None if found is None else bool(getattr(found, "BYPASS_HOST_LOOP", False))


def by_name(action: str, resolved: str = "") -> bool:
    """The fallback: the names ansible-core's bypassing actions go by, as written or resolved."""
    return action in FALLBACK or resolved in FALLBACK


def bypasses(task: Any, ask_loader: bool = True) -> bool:
    action = str(getattr(task, "action", "") or "")
    if not action:
        return False
    answer = by_loader(action, getattr(task, "collections", None)) if ask_loader else None
    if answer is None:
        return by_name(action, str(getattr(task, "resolved_action", "") or ""))
    return answer


def bypassing(option: str, path: str, blocks: Iterable[Any], ask_loader: bool = True) -> List[Bypass]:
    """The tasks of one file's loaded blocks that bypass the host loop, in file order."""
    return [Bypass(option=option, path=path, task=str(getattr(task, "name", "") or task.action), action=str(task.action))
            for task in tasks_of(blocks) if bypasses(task, ask_loader)]
