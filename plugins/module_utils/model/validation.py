"""Checks of module options, run before the first request that writes anything.

Each check takes the value and the option's name, and raises InputError with a message that
names both and says what is accepted; it returns the value as the code should use it.
Kubernetes' own rules (node names are RFC 1123 subdomains, label keys qualified names,
namespaces RFC 1123 labels) are checked here, so that a bad name is refused by us, clearly,
rather than half-way through a maintenance by the API server, or, worse, turned into another
URL (``..`` as a node name reads ``/api/v1``).
"""

from __future__ import annotations

import math
import re
from typing import Any, Dict, Iterable, List, Optional, Sequence

from ..errors import InputError
from .selectors import parse_selector

DNS_SUBDOMAIN_MAX = 253
DNS_LABEL_MAX = 63
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN_RE = re.compile(rf"{_DNS_LABEL}(\.{_DNS_LABEL})*")
_DNS_LABEL_RE = re.compile(_DNS_LABEL)
_QUALIFIED_NAME_RE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_LABEL_VALUE_RE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")

# leaseDurationSeconds is an int32 on the wire; a lease is also a promise to Node Health
# Check and Self Node Remediation to leave the node alone, and one left by a run that died
# keeps them away until it lapses: a week is already longer than any maintenance should hold
# one without renewing it.
MAX_LEASE_SECONDS = 7 * 24 * 3600
# A wait longer than a week is a typo (or inf): no maintenance window is that long.
MAX_WAIT_SECONDS = 7 * 24 * 3600
MAX_CONCURRENCY = 1000  # slots are tried by index: more than the nodes of any cluster
MAX_REASON = 1024  # spec.reason is shown by kubectl and in events
MAX_EVENTS_LIMIT = 1000
MAX_EVENT_REASON = 128  # what events.k8s.io/v1 accepts for a reason
MAX_EVENT_TEXT = 1024  # what events.k8s.io/v1 accepts for a note
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")  # what a Node's spec.taints accepts


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:60] + f"...' ({len(str(value))} characters)"


def _fail(option: str, value: Any, problem: str) -> InputError:
    return InputError(f"{option}: {_shown(value)} {problem}")


def _text(value: Any, option: str) -> str:
    if not isinstance(value, str):
        raise _fail(option, value, f"must be a string, not {type(value).__name__}")
    return value


def dns_subdomain(value: Any, option: str, what: str = "name") -> str:
    """An RFC 1123 subdomain: what Kubernetes accepts as the name of a node, a lease, a NodeMaintenance."""
    text = _text(value, option)
    if text == "":
        raise _fail(option, value, f"is empty: give the {what}")
    if len(text) > DNS_SUBDOMAIN_MAX or not _DNS_SUBDOMAIN_RE.fullmatch(text):
        raise _fail(option, value, f"is not a valid {what}: Kubernetes names are RFC 1123 subdomains, at most "
                                   f"{DNS_SUBDOMAIN_MAX} lower-case letters, digits, '-' and '.', starting and "
                                   "ending with a letter or digit")
    return text


def node_name(value: Any, option: str = "node") -> str:
    """A node name (RFC 1123 subdomain); the one check every module that takes a node uses."""
    return dns_subdomain(value, option, "node name")


def node_names(values: Any, option: str = "nodes") -> List[str]:
    if not isinstance(values, (list, tuple)) or not values:
        raise _fail(option, values, "must be a non-empty list of node names")
    return [node_name(v, f"{option}[{i}]") for i, v in enumerate(values)]


def is_node_name(value: Any) -> bool:
    try:
        node_name(value)
    except InputError:
        return False
    return True


def derived_name(name: str, option: str, source: str) -> str:
    """A name made from an option's value (``node-<node>``): it must still be a valid name."""
    if len(name) > DNS_SUBDOMAIN_MAX:
        raise InputError(f"{option}: {_shown(source)} is too long: the name made from it, {name[:40]}..., would be "
                         f"{len(name)} characters, and Kubernetes allows {DNS_SUBDOMAIN_MAX}")
    return name


def namespace(value: Any, option: str) -> str:
    """An RFC 1123 label: what Kubernetes accepts as a namespace."""
    text = _text(value, option)
    if text == "":
        raise _fail(option, value, "is empty: give a namespace")
    if len(text) > DNS_LABEL_MAX or not _DNS_LABEL_RE.fullmatch(text):
        raise _fail(option, value, f"is not a valid namespace: at most {DNS_LABEL_MAX} lower-case letters, digits "
                                   "and '-', starting and ending with a letter or digit")
    return text


def qualified_name(value: Any, option: str, what: str = "label key") -> str:
    """A label, annotation or taint key: ``[prefix/]name``, prefix a DNS subdomain, name at most 63."""
    text = _text(value, option)
    if text == "":
        raise _fail(option, value, f"is empty: give a {what}")
    prefix, slash, name = text.rpartition("/")
    rule = (f"is not a valid {what}: an optional DNS subdomain prefix and '/', then at most {DNS_LABEL_MAX} letters, "
            "digits, '-', '_' and '.', starting and ending with a letter or digit")
    if slash and (not prefix or len(prefix) > DNS_SUBDOMAIN_MAX or not _DNS_SUBDOMAIN_RE.fullmatch(prefix)):
        raise _fail(option, value, rule)
    if len(name) > DNS_LABEL_MAX or not _QUALIFIED_NAME_RE.fullmatch(name):
        raise _fail(option, value, rule)
    return text


def label_value(value: Any, option: str) -> str:
    text = _text(value, option)
    if len(text) > DNS_LABEL_MAX or not _LABEL_VALUE_RE.fullmatch(text):
        raise _fail(option, value, f"is not a valid label value: at most {DNS_LABEL_MAX} letters, digits, '-', '_' "
                                   "and '.', starting and ending with a letter or digit (or empty)")
    return text


def label_selector(value: Any, option: str) -> str:
    """A label selector as Kubernetes reads it (``app=web,tier!=db,env in (a,b),!legacy``)."""
    text = _text(value, option)
    try:
        requirements = parse_selector(text)
    except InputError as exc:
        raise _fail(option, value, "is not a valid label selector: " + exc.message.split(": ", 1)[-1]) from None
    for req in requirements:
        qualified_name(req.key, option + " (key)")
        for v in req.values:
            label_value(v, option + " (value)")
    return text


def number(value: Any, option: str, minimum: float, maximum: float, unit: str = "",
           integer: bool = False) -> Any:
    """A finite number within [minimum, maximum] (nan and inf are refused: a wait of nan never ends)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(option, value, f"must be a number{' of ' + unit if unit else ''}")
    if isinstance(value, float) and not math.isfinite(value):
        raise _fail(option, value, f"must be a finite number{' of ' + unit if unit else ''}")
    if integer and not float(value).is_integer():
        raise _fail(option, value, "must be a whole number")
    if not minimum <= value <= maximum:
        span = f"between {minimum:g} and {maximum:g}"
        raise _fail(option, value, f"must be {span}{' ' + unit if unit else ''}")
    return value


def seconds(value: Any, option: str, minimum: float = 0, maximum: float = MAX_WAIT_SECONDS) -> Any:
    return number(value, option, minimum, maximum, "seconds")


def positive_seconds(value: Any, option: str, maximum: float = MAX_WAIT_SECONDS) -> Any:
    seconds(value, option, 0, maximum)
    if value <= 0:
        raise _fail(option, value, "must be more than 0 seconds")
    return value


def text(value: Any, option: str, maximum: int, allow_empty: bool = True) -> str:
    result = _text(value, option)
    if not allow_empty and not result.strip():
        raise _fail(option, value, "is empty")
    if len(result) > maximum:
        raise _fail(option, value, f"is too long: at most {maximum} characters")
    return result


def one_of(value: Any, option: str, choices: Sequence[str]) -> str:
    if value not in choices:
        raise _fail(option, value, f"must be one of {', '.join(choices)}")
    return value


def annotations(value: Optional[Dict[str, Any]], option: str = "annotations") -> Optional[Dict[str, Optional[str]]]:
    """Annotation keys are qualified names; values strings, or null to remove one."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _fail(option, value, "must be a dict of annotation keys to strings (or null to remove one)")
    for key, item in value.items():
        qualified_name(key, f"{option} key", "annotation key")
        if item is not None and not isinstance(item, str):
            raise _fail(f"{option}[{key}]", item, "must be a string, or null to remove the annotation")
    return value


def events(specs: Optional[Iterable[Dict[str, Any]]], option: str = "events") -> None:
    """Events to record: a reason (CamelCase word), an optional text, type and target."""
    for i, spec in enumerate(specs or []):
        where = f"{option}[{i}]"
        if not isinstance(spec, dict):
            raise _fail(where, spec, "must be a dict with reason, text, type and on")
        reason = spec.get("reason")
        if not isinstance(reason, str) or not re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", reason) \
                or len(reason) > MAX_EVENT_REASON:
            raise _fail(f"{where}.reason", reason, f"is not a valid event reason: one word of letters and digits "
                                                   f"(such as SucceedMaintenance), at most {MAX_EVENT_REASON}")
        if spec.get("text") is not None:
            text(spec["text"], f"{where}.text", MAX_EVENT_TEXT)
        if spec.get("type") is not None:
            one_of(spec["type"], f"{where}.type", ("Normal", "Warning"))
        if spec.get("on") is not None:
            one_of(spec["on"], f"{where}.on", ("maintenance", "node"))


MAX_LAST_ERROR = 4096
INT32_MAX = 2**31 - 1


def maintenance_status(status: Optional[Dict[str, Any]], option: str = "status") -> None:
    """The NodeMaintenance status fields a module may set (nmo_crd's status option)."""
    for key, value in (status or {}).items():
        if value is None:
            continue
        where = f"{option}.{key}"
        if key == "drainProgress":
            number(value, where, 0, 100, "percent", integer=True)
        elif key in ("totalpods", "evictionPods", "errorOnLeaseCount"):
            number(value, where, 0, INT32_MAX, integer=True)
        elif key == "lastError":
            text(value, where, MAX_LAST_ERROR)
        elif key == "pendingPods":
            for i, name in enumerate(value):
                dns_subdomain(name, f"{where}[{i}]", "pod name")
        elif key == "pendingPodsRefs":
            for i, ref in enumerate(value):
                if not isinstance(ref, dict) or set(ref) - {"namespace", "name"}:
                    raise _fail(f"{where}[{i}]", ref, "must be a dict with namespace and name")
                namespace(ref.get("namespace"), f"{where}[{i}].namespace")
                dns_subdomain(ref.get("name"), f"{where}[{i}].name", "pod name")


def taints(values: Any, option: str = "taints") -> None:
    """Taints as the API takes them: a key (qualified name), an optional value (label value), an effect."""
    if not isinstance(values, (list, tuple)):
        raise _fail(option, values, "must be a list of taints (key, value, effect)")
    for i, taint in enumerate(values):
        where = f"{option}[{i}]"
        if not isinstance(taint, dict):
            raise _fail(where, taint, "must be a dict with key, effect and an optional value")
        unknown = set(taint) - {"key", "value", "effect"}
        if unknown:
            raise _fail(where, taint, f"has unknown fields {', '.join(sorted(map(str, unknown)))}: a taint has key, "
                                      "value and effect")
        qualified_name(taint.get("key"), f"{where}.key", "taint key")
        if taint.get("value") is not None:
            label_value(taint["value"], f"{where}.value")
        one_of(taint.get("effect"), f"{where}.effect", TAINT_EFFECTS)


def problems(*checks: Any) -> None:
    """Run every check (zero-argument callables); one InputError listing every problem."""
    found = []
    for check in checks:
        try:
            check()
        except InputError as exc:
            found.append(exc.message)
    if found:
        raise InputError("; ".join(found))
