"""Kubernetes resource quantities (``500m``, ``1.5``, ``128Mi``, ``1G``, ``2e3``) as numbers.

CPU is counted in millicores and everything else in its base unit, both rounded up as the
scheduler does, so sums stay exact integers.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from typing import Any, Dict, Optional

from ..errors import InputError

_SUFFIXES = {
    "": Decimal(1), "m": Decimal("0.001"), "u": Decimal("0.000001"), "n": Decimal("0.000000001"),
    "k": Decimal(10) ** 3, "M": Decimal(10) ** 6, "G": Decimal(10) ** 9, "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15, "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10, "Mi": Decimal(2) ** 20, "Gi": Decimal(2) ** 30, "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50, "Ei": Decimal(2) ** 60,
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)(?:([eE][+-]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$")

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"


def parse(value: Any) -> Decimal:
    """A quantity in its base unit; InputError names the value when it is not one."""
    if isinstance(value, (int, float)):
        return Decimal(str(value))
    m = _QUANTITY.match(str(value).strip())
    if not m:
        raise InputError(f"not a Kubernetes quantity: {value!r}")
    try:
        number = Decimal(m.group(1))
    except InvalidOperation:
        raise InputError(f"not a Kubernetes quantity: {value!r}") from None
    if m.group(2):
        return number * (Decimal(10) ** int(m.group(2)[1:]))
    return number * _SUFFIXES[m.group(3) or ""]


def amount(resource: str, value: Any) -> int:
    """Millicores for cpu, the base unit (bytes, count) otherwise; rounded up."""
    number = parse(value)
    if resource == CPU:
        number *= 1000
    return int(math.ceil(number))


def amounts(resources: Optional[Dict[str, Any]]) -> Dict[str, int]:
    return {name: amount(name, value) for name, value in (resources or {}).items()}


def show(resource: str, value: int) -> str:
    """For messages: ``1500m`` -> ``1.5``, bytes -> ``Mi``/``Gi``."""
    if resource == CPU:
        return f"{value / 1000:g}" if value % 1000 == 0 or value >= 10000 else f"{value}m"
    if resource == MEMORY:
        for unit, size in (("Gi", 2 ** 30), ("Mi", 2 ** 20), ("Ki", 2 ** 10)):
            if value >= size:
                return f"{value / size:.4g}{unit}"
    return str(value)
