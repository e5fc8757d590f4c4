"""nmo_check_files through ansible-playbook, every reason at once (no cluster needed)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import yaml
from helpers import ansible_env

GOOD = "- name: Replace the memory\n  ansible.builtin.debug:\n    msg: memory replaced\n"


def check(tmp_path: Path, files: dict, *more: dict) -> dict:
    """The check of ``files`` (and of each further set of arguments, ``more``), in one playbook
    run: the result, or the list of results when there are several."""
    playbook = tmp_path / "play" / "check.yml"
    playbook.parent.mkdir(exist_ok=True)
    calls = [{"files": files}, *more]
    tasks = []
    for i, args in enumerate(calls):
        show = {"content": "{{ checked | to_json }}", "dest": str(tmp_path / f"result-{i}.json")}
        tasks += [{"name": f"Check {i}", "nmo.maintenance.nmo_check_files": args, "register": "checked",
                   "ignore_errors": True},
                  {"name": f"Show {i}", "ansible.builtin.copy": show}]
    playbook.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]))
    done = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), str(playbook), "-i", "localhost,",
                           "-c", "local"], capture_output=True, text=True, env=ansible_env(), timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    results = [json.loads((tmp_path / f"result-{i}.json").read_text()) for i in range(len(calls))]
    return results if more else results[0]


def test_every_kind_of_bad_file_is_named_with_its_reason(tmp_path):
    (tmp_path / "good.yml").write_text(GOOD)
    (tmp_path / "empty.yml").write_text("")
    (tmp_path / "broken.yml").write_text("- name: x\n  ansible.builtin.debug:\n    msg: [unclosed\n")
    (tmp_path / "mapping.yml").write_text("name: x\nansible.builtin.debug: {}\n")
    (tmp_path / "strings.yml").write_text("- reboot the node\n")
    (tmp_path / "binary.yml").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (tmp_path / "typo.yml").write_text("- name: Reboot\n  ansible.builtin.reboott: {}\n")
    (tmp_path / "folder.yml").mkdir()
    (tmp_path / "dangling.yml").symlink_to(tmp_path / "nowhere.yml")
    (tmp_path / "play" / "hooks").mkdir(parents=True)
    (tmp_path / "play" / "hooks" / "relative.yml").write_text(GOOD)
    t = str(tmp_path)
    result = check(tmp_path, {
        "ok": [f"{t}/good.yml", f"{t}/empty.yml", "hooks/relative.yml"],
        "bad": [f"{t}/missing.yml", f"{t}/folder.yml", f"{t}/binary.yml", f"{t}/broken.yml", f"{t}/mapping.yml",
                f"{t}/strings.yml", f"{t}/typo.yml", f"{t}/dangling.yml", ""],
        "gate": "",
    })

    assert result["failed"]
    by_file = {Path(f["given"]).name: f for f in result["files"]}
    assert by_file["good.yml"]["tasks"] == 1 and by_file["empty.yml"]["tasks"] == 0
    assert by_file["relative.yml"]["path"] == f"{t}/play/hooks/relative.yml", "relative to the playbook's folder"
    assert "problem" not in by_file["relative.yml"]
    assert result["problems"] == [
        f"bad: {t}/missing.yml: not found",
        f"bad: {t}/folder.yml: a directory, not a task file",
        f"bad: {t}/binary.yml: is not UTF-8 text (byte 0), so not a YAML task file",
        f"bad: {t}/broken.yml: is not valid YAML: " + by_file["broken.yml"]["problem"].split(": ", 1)[1],
        f"bad: {t}/mapping.yml: is YAML but not a task list (a mapping at the top, a list of tasks is needed)",
        f"bad: {t}/strings.yml: item 1 is a string, not a task (a mapping: name, a module and its arguments)",
        f"bad: {t}/typo.yml: " + by_file["typo.yml"]["problem"],
        f"bad: {t}/dangling.yml: a broken symbolic link",
        "bad: '' is not a file name (give the path of a task file)",
    ]
    assert re.search(r"\(at broken\.yml:\d+:\d+\)$", by_file["broken.yml"]["problem"]), "the YAML error's line"
    assert "couldn't resolve module/action 'ansible.builtin.reboott'" in by_file["typo.yml"]["problem"]
    assert result["msg"].startswith("task file check failed, nothing was done to the node: bad: ")


def test_good_files_pass(tmp_path):
    (tmp_path / "good.yml").write_text(GOOD)
    result = check(tmp_path, {"node_maintenance_hooks_work": [str(tmp_path / "good.yml")],
                              "node_maintenance_gate": str(tmp_path / "good.yml")})
    assert not result.get("failed") and not result["changed"], result
    assert result["msg"] == "2 task file(s) found and loaded"


def test_a_pause_is_refused_above_concurrency_one_and_allowed_at_one(tmp_path):
    """The free strategy (concurrency > 1) fails a task that bypasses the host loop when it
    reaches it; the check refuses it before, naming the file, the task, the module and what to
    use instead. At concurrency 1 (the linear strategy, where a pause works) it passes."""
    hook = tmp_path / "flash.yml"
    hook.write_text("- name: Flash\n  block:\n    - name: Let the firmware settle\n      ansible.builtin.pause:\n"
                    "        seconds: 1\n  always:\n    - name: Wait right\n      ansible.builtin.wait_for:\n"
                    "        timeout: 1\n")
    files = {"node_maintenance_hooks_work": [str(hook)], "node_maintenance_gate": ""}
    at_one, given_as_text, at_two = check(tmp_path, {**files}, {"files": files, "concurrency": 1},
                                          {"files": files, "concurrency": "2"})
    assert not at_one.get("failed") and not given_as_text.get("failed"), (at_one, given_as_text)
    assert at_two["failed"] and at_two["problems"] == [
        f"node_maintenance_hooks_work: {hook}: task 'Let the firmware settle' uses ansible.builtin.pause, which "
        "bypasses Ansible's host loop: the free strategy (host_pinned) that runs the nodes at node_maintenance_concurrency 2 "
        "refuses it when it reaches the task, after the node was drained; use ansible.builtin.wait_for with timeout "
        "instead (ansible.builtin.wait_for: {timeout: 60} waits 60 s on the node's host), or run at "
        "node_maintenance_concurrency 1"], at_two
    assert at_two["msg"].startswith("task file check failed, nothing was done to the node: ")
