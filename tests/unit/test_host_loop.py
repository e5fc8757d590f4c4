"""Tasks that bypass the host loop (plugin_utils/host_loop.py): the plugin loader's answer, the
fallback names, and every place a task can hide in a loaded file (block, rescue, always).

The tasks are stand-ins with the attributes a loaded Task has (``action``, ``collections``,
``resolved_action``, ``name``), and the blocks with a Block's ``block``, ``rescue`` and
``always``: loading real ones needs Ansible's collection finder installed, which would take
over the imports of the other unit tests. tests/integration/test_check_files.py loads real
files through ansible-playbook."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, List

from ansible_collections.nmo.maintenance.plugins.plugin_utils import host_loop


def task(name: str, action: str, resolved: str = "", collections: Any = None) -> Any:
    return SimpleNamespace(name=name, action=action, resolved_action=resolved or action, collections=collections)


def block(body: List[Any], rescue: Any = None, always: Any = None) -> Any:
    return SimpleNamespace(block=body, rescue=rescue or [], always=always or [])


FILE = [
    task("Flash the firmware", "ansible.builtin.debug"),
    task("Let it settle", "pause", "ansible.builtin.pause"),
    block([task("Wait in the block", "ansible.legacy.pause", "ansible.builtin.pause")],
          rescue=[task("Remember the host", "ansible.builtin.add_host")],
          always=[block([task("Wait deep down", "ansible.builtin.pause"),
                         task("Wait the right way", "ansible.builtin.wait_for")])]),
    block([task("Short name", "pause", "ansible.builtin.pause", collections=["ansible.builtin"])]),
]
BYPASSING = ["Let it settle", "Wait in the block", "Remember the host", "Wait deep down", "Short name"]


def test_every_bypassing_task_is_found_through_block_rescue_and_always():
    found = host_loop.bypassing("node_maintenance_hooks_work", "flash.yml", FILE)
    assert [b.task for b in found] == BYPASSING
    assert [b.action for b in found][:3] == ["pause", "ansible.legacy.pause", "ansible.builtin.add_host"]
    names = [t.name for t in host_loop.tasks_of(FILE)]
    assert "Wait the right way" in names and "Flash the firmware" in names, "every task is walked, not only blocks"


def test_the_loader_answers_from_the_action_plugins_class_attribute():
    assert host_loop.by_loader("pause", []) is True
    assert host_loop.by_loader("ansible.legacy.pause", []) is True
    assert host_loop.by_loader("debug", []) is False
    # no action plugin of its own (or a full name a loader without its collection finder cannot
    # find): no answer, the names decide
    assert host_loop.by_loader("ansible.builtin.wait_for", []) is None


def test_without_the_loader_the_names_give_the_same_answer(monkeypatch):
    with_loader = host_loop.bypassing("o", "f.yml", FILE)
    monkeypatch.setattr(host_loop, "action_loader", None)
    assert host_loop.by_loader("pause", None) is None, "no loader: no answer from it"
    assert host_loop.bypassing("o", "f.yml", FILE) == with_loader


def test_a_loader_that_cannot_answer_falls_back_to_the_names(monkeypatch):
    class Broken:
        def get(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("moved")

    monkeypatch.setattr(host_loop, "action_loader", Broken())
    assert host_loop.by_loader("ansible.builtin.pause", []) is None
    assert host_loop.bypasses(task("t", "ansible.builtin.pause"))
    assert host_loop.by_name("pause") and host_loop.by_name("ansible.legacy.add_host")
    assert host_loop.by_name("my.collection.pause", resolved="ansible.builtin.pause")
    assert not host_loop.by_name("ansible.builtin.wait_for") and not host_loop.by_name("community.general.pause")


def test_the_message_names_the_file_the_task_the_module_and_what_to_use_instead():
    pause, _legacy, add_host = host_loop.bypassing("node_maintenance_hooks_work", "flash.yml", FILE)[:3]
    text = pause.message(2)
    assert text.startswith("node_maintenance_hooks_work: flash.yml: task 'Let it settle' uses pause, which bypasses "
                           "Ansible's host loop"), text
    assert "node_maintenance_concurrency 2" in text and "ansible.builtin.wait_for with timeout" in text
    assert "wait_for" not in add_host.message(4) and "move it out of the hook" in add_host.message(4)
