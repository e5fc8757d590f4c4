"""The role's inputs as its tasks will use them, checked once before the node is touched.

Ansible's role argument validation (meta/argument_specs.yml) converts values to check them
and then leaves the variables as they were given: a ``node_maintenance_hooks_work`` given as
a string passes it and then fails the include's loop (``The loop value must resolve to a
'list', not 'str'``) on a node already cordoned and half drained. So every option is looked
at here as given: a list option must be a list (of strings, for paths), a dict option a
dict, and no scalar option a list or a dict. The checks the argument spec cannot say
(the shortest lease the heartbeat can keep, the window's format and zone) are here too,
each message naming the role's variable. So are the checks of the options only later phases
use: the drain options as nmo_drain checks them (``drain_problems``, what its validate_only
did for each node before the begin) and the role's own waits (``ROLE_WAITS``).

Pure: the argument spec and the values come in, the problems (and the window's end, parsed)
go out.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional, Tuple

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from . import specs
from .errors import InputError
from .model import blocked, drain_spec, order, pod_filters, renewal, topology_budgets, validation
from .model.window import WINDOW_END, kind, window_end
from .model.window import shown as _shown
from .workflows.drain_options import DrainOptions

Spec = Dict[str, Dict[str, Any]]

LEASE_DURATION = "node_maintenance_lease_duration"
# The drain options, one dict handed whole to nmo_drain and nmo_preflight (specs.DRAIN)
DRAIN = "node_maintenance_drain"
# Deprecated in 0.2.0, removed in 1.0.0: the drain options one variable each, as the role took
# them before node_maintenance_drain (model/drain_spec.py, ROLE_DEPRECATED: frozen, a new drain
# option is a key of that dict only)
DEPRECATED_DRAIN = {**{f"{DRAIN}_{name}": name for name in drain_spec.ROLE_DEPRECATED}, **drain_spec.ROLE_DEPRECATED_OWN}
REMOVED_IN = "1.0.0"
BUDGETS = "node_maintenance_budgets"
CONTROL_PLANE_CONCURRENCY = "node_maintenance_control_plane_concurrency"
ORDER, ORDER_KEY = "node_maintenance_order", "node_maintenance_order_key"  # model/order.py
PREFER_NO_SCHEDULE = "node_maintenance_prefer_no_schedule"
ON_BLOCKED, MAX_BLOCKED = "node_maintenance_on_blocked", "node_maintenance_max_blocked"  # model/blocked.py
# what Ansible's boolean() takes, as -e gives it (a string) or YAML does
BOOLEANS = ("true", "false", "yes", "no", "on", "off", "1", "0", "y", "n", "t", "f")
_SCALARS = ("str", "bool", "int", "float", "path", "raw")


def path_list_hint(value: str) -> str:
    """How to give a list of files that came as a string: one file, or the list of its lines
    (a YAML block scalar, or a list written inside a string, ``- a.yml``, for several files)."""
    lines = [line.strip().removeprefix("- ").strip() for line in value.splitlines()]
    lines = [line for line in lines if line]
    if len(lines) > 1:
        return f" (for these {len(lines)} files, one a line: {lines!r})"
    return f" (for one file: [{value!r}])"


def shape_problems(spec: Spec, values: Dict[str, Any]) -> List[str]:
    """Every value whose shape is not its option's: the container types, as given, unconverted."""
    found: List[str] = []
    for name, option in spec.items():
        if name not in values:
            continue
        value = values[name]
        wanted = option.get("type", "str")
        if value is None:
            continue  # unset: the default applies (null is the default of the options that allow it)
        if wanted == "list":
            if not isinstance(value, (list, tuple)):
                hint = (path_list_hint(value) if isinstance(value, str) and option.get("elements") == "path"
                        else f" ({option['hint']})" if option.get("hint") else "")
                found.append(f"{name}: {kind(value)} was given ({_shown(value)}), a list is needed{hint}")
                continue
            elements = option.get("elements")
            for index, item in enumerate(value):
                if elements in ("str", "path") and not isinstance(item, str):
                    found.append(f"{name}[{index}]: {kind(item)} was given ({_shown(item)}), a string is needed"
                                 f"{' (a file path)' if elements == 'path' else ''}")
                elif elements == "dict" and not isinstance(item, dict):
                    found.append(f"{name}[{index}]: {kind(item)} was given ({_shown(item)}), a dict is needed")
        elif wanted == "dict":
            if not isinstance(value, dict):
                found.append(f"{name}: {kind(value)} was given ({_shown(value)}), a dict is needed")
            elif option.get("options"):  # its keys as given too, each named as name.key
                found += [f"{name}.{problem}" for problem in shape_problems(option["options"], value)]
                found += [f"{name}.{key}: not an option of {name} (it takes {', '.join(sorted(option['options']))})"
                          for key in value if key not in option["options"]]
        elif wanted in _SCALARS and wanted != "raw" and isinstance(value, (list, tuple, dict)):
            found.append(f"{name}: {kind(value)} was given ({_shown(value, option)}), {_article(wanted)} is needed")
    return found


def _article(wanted: str) -> str:
    return {"str": "a string", "path": "a string (a file path)", "bool": "a boolean (true or false)",
            "int": "a whole number", "float": "a number"}.get(wanted, wanted)


def lease_duration(value: Any, option: str = LEASE_DURATION) -> None:
    """At least what the heartbeat can keep (renewal.MIN_LEASE_SECONDS); -e gives it as a string."""
    try:
        seconds = int(value) if isinstance(value, str) else value
    except ValueError:
        return  # not a number: the argument spec said so already
    short = renewal.too_short(seconds, option)
    if short:
        raise InputError(short)


def drain(values: Dict[str, Any]) -> Tuple[Dict[str, Any], List[str]]:
    """(the drain dict the role hands to nmo_drain and nmo_preflight as it is, deprecation
    messages). Every drain option: the modules' default (drain_spec.DRAIN), or the role's own
    (drain_spec.ROLE_DRAIN), then each deprecated variable that is set (not null), then the keys
    of node_maintenance_drain that are set, which win. Values stay as given: the modules
    convert and check them."""
    given = values.get(DRAIN) or {}
    merged = {name: option.get("default") for name, option in drain_spec.DRAIN.items()}
    merged.update(drain_spec.ROLE_DRAIN)
    messages = []
    for variable, key in DEPRECATED_DRAIN.items():
        if values.get(variable) is None:
            continue
        # Ansible's display adds when it goes (REMOVED_IN, passed with the message)
        messages.append(f"{variable} is deprecated, give it as the key {key} of {DRAIN} "
                        f"({DRAIN}: {{{key}: ...}})" + (f"; ignored here: {DRAIN}.{key} is given" if key in given else ""))
        merged[key] = values[variable]
    merged.update({key: value for key, value in given.items() if value is not None})
    return merged, messages


# The waits of docs/design.md §4.7.8 and §4.9.1: seconds, 0 (off) to a week; -e gives them as strings
WAITS = ("node_maintenance_volume_detach_timeout", "node_maintenance_settle_timeout")
MAX_WAIT = 604800


def whole(value: Any, option: str) -> int:
    """A whole number as given (``-e`` gives a string), or the option named."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and re.fullmatch(r"\s*\d+\s*", value):
        return int(value)
    raise InputError(f"{option} must be a whole number, 0 or more, got {_shown(value)}")


def wait_seconds(value: Any, option: str) -> None:
    """A number of seconds from 0 (no wait) to a week, as given (a string from -e too)."""
    if value is None:
        return
    number: Any = value
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    if isinstance(number, bool) or not isinstance(number, (int, float)) or math.isnan(number):
        raise InputError(f"{option}: {_shown(value)} is not a number of seconds (0 to {MAX_WAIT}, 0: no wait)")
    if not 0 <= number <= MAX_WAIT:
        raise InputError(f"{option}: {_shown(value)} must be between 0 (no wait) and {MAX_WAIT} seconds (a week)")


# What the role hands nmo_drain beside the drain dict (drain.yml): the progress interval, and
# the volume wait (one of WAITS, whose bounds are the drain's own, validation.seconds)
PROGRESS_INTERVAL = "node_maintenance_progress_interval"
# nmo_drain's argument spec for the drain dict and the progress interval (its drain and
# progress_interval options), each under the role's variable, so Ansible's own conversion
# messages name it
_DRAIN_TASK_SPEC: Spec = {DRAIN: {"type": "dict", "options": drain_spec.DRAIN},
                          PROGRESS_INTERVAL: {"type": "float", "default": 10}}
# The drain options are checked for a node of a valid name: the node is not a drain option, and
# its name is checked by the look and the begin (before their first write)
_ANY_NODE = "node"
# The role's own waits (ready.yml, gate.yml): seconds, 0 to a week; a negative one would end at once
ROLE_WAITS = ("node_maintenance_ready_timeout", "node_maintenance_gate_timeout", "node_maintenance_gate_delay")


def drain_problems(merged: Dict[str, Any], values: Dict[str, Any]) -> List[str]:
    """What nmo_drain would refuse in what drain.yml hands it (the drain dict ``merged``, the
    progress interval), checked as the module's validate_only does: its argument spec (types,
    choices, each drain option's default), then the progress interval's bounds and
    ``DrainOptions``' validation. Each problem names the role's variable. (The volume wait
    is one of WAITS, checked with the same bounds as the drain's.)"""
    given: Dict[str, Any] = {DRAIN: merged}
    if values.get(PROGRESS_INTERVAL) is not None:
        given[PROGRESS_INTERVAL] = values[PROGRESS_INTERVAL]
    converted = ArgumentSpecValidator(_DRAIN_TASK_SPEC).validate(given)
    if converted.error_messages:
        return list(converted.error_messages)
    params = converted.validated_parameters
    found: List[str] = []
    try:
        validation.seconds(params[PROGRESS_INTERVAL], PROGRESS_INTERVAL)
    except InputError as exc:
        found.append(exc.message)
    task, _warnings = specs.drain_params({"drain": params[DRAIN], "node": _ANY_NODE})
    try:
        DrainOptions.from_params(task).validate()
    except InputError as exc:
        found.append(f"{DRAIN}: {exc.message}")
    return found


def role_wait(value: Any, option: str) -> None:
    """One of the role's own waits: 0 to a week, as given (-e gives a string). Not a number: the
    argument spec says so (it is an int there)."""
    number: Any = value
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return
    if isinstance(number, bool) or not isinstance(number, (int, float)):
        return
    if not 0 <= number <= MAX_WAIT:  # nan too
        raise InputError(f"{option}: {value} must be between 0 and {MAX_WAIT} seconds (a week)")


def check(spec: Spec, values: Dict[str, Any], now: Optional[datetime] = None) -> Tuple[List[str], Dict[str, Any]]:
    """(problems, facts): every problem of the role's inputs; facts for the role's later
    tasks (the window's end as a UTC timestamp, and how long ago it was when in the past;
    the drain dict, ``drain``, every drain option as the modules take it; whether the begin
    refuses a node that is not Ready, ``refuse_not_ready``; the deprecated variables given,
    ``deprecations``)."""
    problems = shape_problems(spec, values)
    shapes = list(problems)
    facts: Dict[str, Any] = {}
    if DRAIN in values and isinstance(values[DRAIN] or {}, dict):
        facts["drain"], deprecations = drain(values)
        # the begin refuses a node without its kubelet as the pre-flight does (nmo_maintenance's refuse_not_ready)
        facts["refuse_not_ready"] = not pod_filters.lets_terminating_go(drain_spec.Drain.as_given(facts["drain"]))
        if deprecations:
            facts["deprecations"] = deprecations
    for option in WAITS:
        try:
            wait_seconds(values.get(option), option)
        except InputError as exc:
            problems.append(exc.message)
    # the drain options as the drain will check them; a value whose shape is wrong is said once, above
    if "drain" in facts and not any(p.startswith((DRAIN, PROGRESS_INTERVAL)) for p in shapes):
        problems += drain_problems(facts["drain"], values)
    for option in ROLE_WAITS:
        try:
            role_wait(values.get(option), option)
        except InputError as exc:
            problems.append(exc.message)
    if LEASE_DURATION in values:
        try:
            lease_duration(values[LEASE_DURATION])
        except InputError as exc:
            problems.append(exc.message)
    shaped = not any(p.startswith((BUDGETS, CONTROL_PLANE_CONCURRENCY)) for p in problems)
    if shaped and (BUDGETS in values or CONTROL_PLANE_CONCURRENCY in values):
        try:  # the module's own check, each message naming the role's variable
            cp = values.get(CONTROL_PLANE_CONCURRENCY)
            topology_budgets.parse(values.get(BUDGETS) or [], 1 if cp is None else cp,
                                   BUDGETS, CONTROL_PLANE_CONCURRENCY)
        except InputError as exc:
            problems.append(exc.message)
    if ORDER in values or ORDER_KEY in values:
        try:
            order.validate(values.get(ORDER, order.INVENTORY), values.get(ORDER_KEY, order.ZONE_KEY), ORDER, ORDER_KEY)
        except InputError as exc:
            problems.append(exc.message)
    if ON_BLOCKED in values or MAX_BLOCKED in values:
        try:
            blocked.validate(values.get(ON_BLOCKED, blocked.STOP), whole(values.get(MAX_BLOCKED, 1), MAX_BLOCKED))
        except InputError as exc:
            problems.append(exc.message)
    flag = values.get(PREFER_NO_SCHEDULE)
    if flag is not None and not isinstance(flag, bool) and str(flag).strip().lower() not in BOOLEANS:
        problems.append(f"{PREFER_NO_SCHEDULE}: {_shown(flag)} is not a boolean: give true or false")
    if WINDOW_END in values:
        try:
            end = window_end(values[WINDOW_END])
        except InputError as exc:
            problems.append(exc.message)
            end = None
        if end is not None:
            moment = now or datetime.now(timezone.utc)
            facts["window_end"] = {"at": end.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                                   "given": values[WINDOW_END], "timestamp": end.timestamp(),
                                   "ended": end <= moment}
    return problems, facts
