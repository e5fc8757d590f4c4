"""The maintenance window's end as the role and nmo_plan take it, and how an input check names
a value it refuses (``kind``, ``shown``: module_utils/role_inputs.py's messages too).

Here, in the model, rather than in role_inputs.py: nmo_plan, which runs for every node, needs
only the window, and role_inputs.py imports the drain's options to check them (the cost of an
import a module does not need is paid by every task of it, tests/unit/test_import_cost.py).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Dict, Optional

from ..errors import InputError

WINDOW_END = "node_maintenance_window_end"
# ISO 8601 as the role documents it: a date, 'T', a time to the second (fractions allowed),
# and a zone, Z or an offset (+01:00, +0100)
_WINDOW = re.compile(r"^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})(\.\d{1,6})?(Z|[+-]\d{2}:?\d{2})?$")


def kind(value: Any) -> str:
    """What an operator calls the type of a value given in YAML or JSON."""
    for cls, name in ((bool, "a boolean"), (str, "a string"), (dict, "a dict"), (list, "a list"), (tuple, "a list"),
                      (int, "a number"), (float, "a number")):
        if isinstance(value, cls):
            return name
    return "null" if value is None else type(value).__name__


def shown(value: Any, option: Optional[Dict[str, Any]] = None) -> str:
    if (option or {}).get("no_log"):
        return "hidden: no_log"  # a webhook URL, a password: never in a message
    text = repr(value)
    return text if len(text) <= 60 else text[:50] + "...'"


def window_end(value: Any, option: str = WINDOW_END) -> Optional[datetime]:
    """The window's end as an aware datetime; None when unset (''). InputError naming the
    option when it is not ISO 8601 with a zone: a time without one would be read in the
    controller's zone, which the operator who wrote it may not share."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InputError(f"{option}: {kind(value)} was given ({shown(value)}), a date and time is "
                         "needed, as 2026-11-29T18:00:00+01:00")
    match = _WINDOW.match(value.strip())
    if not match:
        raise InputError(f"{option}: {shown(value)} is not a date and time in ISO 8601: give it as "
                         "2026-11-29T18:00:00+01:00 (or ...Z for UTC)")
    day, clock, fraction, zone = match.groups()
    if zone is None:
        raise InputError(f"{option}: {shown(value)} has no time zone: add Z (UTC) or the offset of "
                         f"the window's zone, as {day}T{clock}+01:00")
    if zone != "Z" and ":" not in zone:
        zone = zone[:3] + ":" + zone[3:]
    try:
        return datetime.fromisoformat(f"{day}T{clock}{fraction or ''}{'+00:00' if zone == 'Z' else zone}")
    except ValueError as exc:
        raise InputError(f"{option}: {shown(value)} is not a valid date and time ({exc})") from None
