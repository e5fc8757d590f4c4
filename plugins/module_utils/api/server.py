"""Which Kubernetes the API server is, and whether this collection supports it.

Read once at the start of a run (``nmo_run``): one GET of ``/version``. Every API feature
the collection relies on is generally available from Kubernetes 1.29 (CRD validation
rules, used for the NodeMaintenance's immutable ``spec.nodeName``; API Priority and
Fairness, whose 429s the client retries) or much earlier (policy/v1 evictions 1.22,
watch bookmarks 1.17, coordination/v1 Leases 1.14); field selectors on custom resources
are only ever ``metadata.name``, which every version serves. CI runs the tests on 1.31
and 1.37 (docs/layout-and-development.md, "Supported versions"). A server older than 1.31 gets a warning, not a
refusal: nothing is known to break there, it is only untested. What would break
silently on a server without validation rules is checked where it matters
(``crd.rule_dropped``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional, Tuple

OLDEST = (1, 31)  # the oldest minor CI tests (hack/build-1.31, hack/test k8s-oldest)
NEWEST = (1, 37)  # the current one (hack/versions.env)
SUPPORTED = f"{OLDEST[0]}.{OLDEST[1]} to {NEWEST[0]}.{NEWEST[1]}"


@dataclass(frozen=True)
class ServerVersion:
    git_version: str  # as the server says it, e.g. v1.31.13 or v1.30.4-gke.1348000
    minor: Optional[Tuple[int, int]]  # None when the server's answer cannot be read

    @property
    def warning(self) -> Optional[str]:
        if self.minor is None:
            return (f"the API server's version ({self.git_version or 'no answer from /version'}) could not be read; "
                    f"this collection is tested on Kubernetes {SUPPORTED}")
        if self.minor < OLDEST:
            return (f"Kubernetes {self.git_version} is older than this collection is tested on ({SUPPORTED}); "
                    "it may work, but nothing older than "
                    f"{OLDEST[0]}.{OLDEST[1]} is tested")
        return None


def parse(answer: Any) -> ServerVersion:
    """``/version``'s answer: ``major`` and ``minor`` (a provider may add '+', as in '31+'),
    else the numbers of ``gitVersion``."""
    answer = answer if isinstance(answer, dict) else {}
    git = str(answer.get("gitVersion") or "")
    major = re.match(r"\d+", str(answer.get("major") or ""))
    minor = re.match(r"\d+", str(answer.get("minor") or ""))
    if major and minor:
        return ServerVersion(git, (int(major.group()), int(minor.group())))
    found = re.match(r"v?(\d+)\.(\d+)", git)
    return ServerVersion(git, (int(found.group(1)), int(found.group(2))) if found else None)


def read(client: Any) -> ServerVersion:
    """The server's version (one request)."""
    return parse(client.get("/version"))
