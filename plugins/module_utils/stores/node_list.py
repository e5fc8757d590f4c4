"""Every node of the cluster (or those a label selector picks), as one paginated list:
``limit``/``continue``, one page held at a time, each node handed on as it is read."""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, Optional, TypeVar

from ..api import paths
from ..api.client import Client
from ..model import validation

PAGE = 500
T = TypeVar("T")


def each_node(client: Client, selector: Optional[str] = None, page: int = PAGE,
              make: Optional[Callable[[Dict[str, Any]], T]] = None) -> Iterator[Any]:
    """The nodes, page by page; with ``make``, what it makes of each (the page is then dropped)."""
    if selector:
        validation.label_selector(selector, "label_selector")
    query: Dict[str, Any] = {"limit": page}
    if selector:
        query["labelSelector"] = selector
    token = None
    while True:
        listing = client.get(paths.NODES, {**query, "continue": token} if token else query)
        for node in listing.get("items") or []:
            yield make(node) if make else node
        token = (listing.get("metadata") or {}).get("continue")
        if not token:
            return
