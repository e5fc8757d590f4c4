"""The role carries no begin's answer from task to task (docs/design.md §18.5): only begin.yml,
where the begin is, reads what the begin returned; every later task reads the node's progress
record, or the call that finished the node."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
BEGIN = ROOT / "roles" / "node_maintenance" / "tasks" / "begin.yml"
READS = re.compile(r"\bnode_maintenance_begin\b")


def strings(node):
    """Every string of a YAML document (keys too): what a task may template."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from strings(key)
            yield from strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from strings(item)
    elif isinstance(node, str):
        yield node


def yaml_files():
    for folder in (ROOT / "roles", ROOT / "playbooks"):
        yield from sorted(p for p in folder.rglob("*") if p.suffix in (".yml", ".yaml"))


def readers():
    return sorted(str(path.relative_to(ROOT)) for path in yaml_files()
                  if any(READS.search(text) for text in strings(yaml.safe_load(path.read_text()))))


def test_only_begin_yml_reads_the_begins_answer():
    assert readers() == [str(BEGIN.relative_to(ROOT))]


def test_the_check_finds_a_reader(tmp_path):
    # the rule is only as good as its search: a later task that reads it is seen
    task = [{"name": "x", "ansible.builtin.debug": {"msg": "{{ node_maintenance_begin.maintenance.name }}"}}]
    assert any(READS.search(t) for t in strings(yaml.safe_load(yaml.safe_dump(task))))
    assert not any(READS.search(t) for t in strings(["{{ node_maintenance_begun_name }}",
                                                     "{{ node_maintenance_unbegun }}"]))
