#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

# The work is done by the action plugin of the same name (plugins/action/nmo_check_files.py),
# on the controller, where include_tasks reads task files; this file documents it.

from __future__ import annotations

DOCUMENTATION = r"""
module: nmo_check_files
short_description: Check that task files to be included exist and load as task lists
version_added: "0.1.0"
description:
  - For each file, looks where C(ansible.builtin.include_tasks) in the same role (or play)
    would look (the role's C(tasks) folder, then the playbook's folder), and checks that it
    exists, is a file, is readable, is UTF-8 text (or vault-encrypted), parses as YAML, is
    a list of mappings, and loads as tasks (modules resolved, keywords known), without
    running anything.
  - Fails with every problem in one message, each naming the option, the file and the
    reason. It never talks to the cluster.
  - The C(node_maintenance) role runs it before any node is touched, for all of its hook
    and gate files, and again right before each include, so that a file that disappeared in
    between fails as an ordinary task that the role's rescue catches (an C(include_tasks)
    of a missing file ends a play with C(max_fail_percentage) set without running the
    rescue; a YAML error in it ends the whole play).
author:
  - nmo.maintenance maintainers (@nmo-maintenance)
attributes:
  check_mode:
    support: full
    description: Reads only; the same in check mode.
  diff_mode:
    support: none
    description: Changes nothing.
  action:
    support: full
    description: Runs on the controller, as an action plugin.
options:
  files:
    description:
      - The files to check, by the name of the option or variable that gave them (used in
        the messages); each value is a path or a list of paths. Empty values are skipped.
    type: dict
    default: {}
  inputs:
    description:
      - Variables to check as they are given (name to value), before anything is written.
        Ansible's role argument validation converts a value only to check it and leaves the
        variable as given, so a list option given as a string passes it and then fails the
        loop that uses it; here a list option must be a list (of strings, when its elements
        are paths), a dict option a dict, and no other option a list or a dict.
      - Also, with the role's names, C(node_maintenance_lease_duration) must be 30 s or more
        (what the run's heartbeat can keep), and C(node_maintenance_window_end) ISO 8601 with a
        time zone.
      - Every problem is named with the variable and the type given, in one failure.
    type: dict
  concurrency:
    description:
      - The C(node_maintenance_concurrency) the files will run at. Above 1 the maintenance
        playbook runs its nodes with the free strategy, which fails a task whose action bypasses
        the host loop (C(ansible.builtin.pause), C(ansible.builtin.add_host), any action plugin
        that sets C(BYPASS_HOST_LOOP)) when it reaches it, on a node already drained; such a
        task is then refused here, naming the file, the task, the module and what to use
        instead (M(ansible.builtin.wait_for) with C(timeout) for a pause).
      - Tasks are found through C(block), C(rescue) and C(always); an action is judged as the
        strategy judges it (its action plugin's class attribute, found for the task's
        C(collections)), or by ansible-core's names when the plugin loader cannot be asked.
        Files a task includes at run time (C(include_tasks)) are not followed.
      - Unset, 1, or not a number (the input check names that), nothing is refused for it.
    type: raw
  inputs_spec:
    description:
      - The argument spec of O(inputs) (name to C(type), C(elements), and an optional C(hint)
        added to the message), as in a role's C(meta/argument_specs.yml). Default, the options
        of the C(main) entry point of the role this task is in.
    type: dict
notes:
  - Runs on the controller whatever the host's connection; the files are read there, as
    C(include_tasks) reads them.
"""

EXAMPLES = r"""
- name: The options of a playbook, as given, before anything is written
  nmo.maintenance.nmo_check_files:
    inputs:
      nmo_nodes: "{{ nmo_nodes | default([]) }}"
    inputs_spec:
      nmo_nodes: {type: list, elements: str}

- name: The maintenance's hook files, before any node is touched
  nmo.maintenance.nmo_check_files:
    files:
      node_maintenance_hooks_work: "{{ node_maintenance_hooks_work }}"
      node_maintenance_gate: "{{ node_maintenance_gate }}"
"""

RETURN = r"""
files:
  description: One entry per file checked.
  returned: always
  type: list
  elements: dict
  contains:
    option:
      description: The key of O(files) that named it.
      type: str
    given:
      description: The path as given.
      type: str
    path:
      description: Where it was looked for (the path C(include_tasks) would read).
      type: str
    tasks:
      description: How many tasks the file holds (when it loaded).
      type: int
    problem:
      description: Why it would not load (when it did not), or which of its tasks bypass the host loop
        (above O(concurrency) 1).
      type: str
inputs:
  description:
    - With O(inputs), how many were checked (C(checked)) and, when C(node_maintenance_window_end)
      is set, C(window_end) (C(at) in UTC, C(given), C(timestamp), and whether it C(ended) already).
    - When C(node_maintenance_drain) is among them, C(drain), the dict the role hands as it is to
      M(nmo.maintenance.nmo_drain) and M(nmo.maintenance.nmo_preflight), every drain option with its
      default (the role's where it has its own), then the deprecated C(node_maintenance_drain_*)
      variables that are set (each with a deprecation warning), then the keys of
      C(node_maintenance_drain), which win; and C(refuse_not_ready), whether the begin refuses a
      node that is not Ready, as the pre-flight does (unless the drain options let the
      drain go on without its kubelet).
  returned: with inputs
  type: dict
problems:
  description: Every problem, as the option, the file and the reason; the task fails when there is one.
  returned: failure
  type: list
  elements: str
"""
