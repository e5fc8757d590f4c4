"""Label selectors as ``kubectl drain --pod-selector`` takes them (``app=web,tier!=db,
env in (a,b),!legacy``): parsed into requirements that match a pod's labels. A leaf of the
model: the pod filters match with it and validation checks a selector option with it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from ..errors import InputError


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str  # =, !=, in, notin, exists, !exists
    values: Tuple[str, ...] = ()

    def matches(self, labels: Dict[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "exists":
            return present
        if self.operator == "!exists":
            return not present
        if self.operator in ("=", "in"):
            return present and labels[self.key] in self.values
        return not present or labels[self.key] not in self.values  # != and notin


_SET = re.compile(r"^([A-Za-z0-9_./-]+)\s+(in|notin)\s+\(([^()]*)\)$")
_EQ = re.compile(r"^([A-Za-z0-9_./-]+)\s*(==|=|!=)\s*([A-Za-z0-9_.-]*)$")
_EXISTS = re.compile(r"^(!?)\s*([A-Za-z0-9_./-]+)$")


def _split_terms(text: str) -> List[str]:
    terms, depth, current = [], 0, ""
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += ch
    terms.append(current)
    return [t.strip() for t in terms if t.strip()]


def parse_selector(text: Optional[str], option: str = "label selector") -> List[Requirement]:
    """``app=web,tier!=db,env in (a,b),!legacy`` -> requirements; InputError when malformed,
    its message naming ``option`` (the caller's: the drain's own selector, a rule's, a budget's)."""
    reqs = []
    for term in _split_terms(text or ""):
        m = _SET.match(term)
        if m:
            values = tuple(v.strip() for v in m.group(3).split(",") if v.strip())
            reqs.append(Requirement(m.group(1), m.group(2), values))
            continue
        m = _EQ.match(term)
        if m:
            reqs.append(Requirement(m.group(1), "!=" if m.group(2) == "!=" else "=", (m.group(3),)))
            continue
        m = _EXISTS.match(term)
        if m:
            reqs.append(Requirement(m.group(2), "!exists" if m.group(1) else "exists"))
            continue
        raise InputError(f"{option}: cannot parse {term!r}; use label selector syntax such as "
                         "'app=web', 'tier!=db', 'env in (a,b)', 'critical' or '!critical'")
    return reqs
