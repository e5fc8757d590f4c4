"""What a drain sees of the cluster while it waits (docs/design.md §4.7.3), from watches and
never by polling: the node's pods, started from the list's resourceVersion so that nothing is
missed, the Node and the NodeMaintenance. A pod is gone when it is deleted or replaced by one
of the same name and another UID; a deleted Node or NodeMaintenance stops the drain."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ..api import paths
from ..api.client import Client
from ..api.waiter import MultiWatcher, Watcher
from ..model.marks import not_ready
from ..stores import maintenance


class DrainWatch:
    def __init__(self, client: Client, node_name: str, listing: Dict[str, Any], node: Optional[Dict[str, Any]],
                 nm: Optional[Dict[str, Any]]) -> None:
        self.node = node  # as read before the drain
        self.pods = Watcher(client, paths.PODS, {"fieldSelector": f"spec.nodeName={node_name}"}, initial=listing)
        waited: List[Watcher] = [self.pods]
        # The Node is watched too: a node deleted mid-drain (its pods then go with the pod
        # garbage collector, tens of seconds later) stops the drain at once, saying so.
        self.node_watcher: Optional[Watcher] = None
        if node is not None and node.get("metadata", {}).get("resourceVersion"):
            self.node_watcher = Watcher(client, paths.NODES, {"fieldSelector": f"metadata.name={node_name}"},
                                        initial={"items": [node], "metadata": {
                                            "resourceVersion": node["metadata"]["resourceVersion"]}})
            waited.append(self.node_watcher)
        # The NodeMaintenance is watched too: when someone ends the maintenance (recover.yml,
        # kubectl delete nm) the drain stops instead of evicting from a node back in service,
        # also when the run that started it was killed and left it running in the background.
        self.maintenance_watcher: Optional[Watcher] = None
        if nm is not None:
            self.maintenance_watcher = Watcher(
                client, maintenance.API, {"fieldSelector": f"metadata.name={nm['metadata']['name']}"},
                initial={"items": [nm], "metadata": {"resourceVersion": nm["metadata"]["resourceVersion"]}})
            waited.append(self.maintenance_watcher)
        self.waitable = MultiWatcher(*waited)

    def maintenance_ended(self) -> bool:
        return self.maintenance_watcher is not None and not self.maintenance_watcher.objects

    def node_deleted(self) -> bool:
        return self.node_watcher is not None and not self.node_watcher.objects

    def maintenance(self) -> Optional[Dict[str, Any]]:
        """The NodeMaintenance as the watch last saw it; None when it is not watched or gone."""
        if self.maintenance_watcher is None:
            return None
        return next(iter(self.maintenance_watcher.objects.values()), None)

    def last_node(self) -> Optional[Dict[str, Any]]:
        """The Node as the watch last saw it (as read before the drain when not watched)."""
        if self.node_watcher is not None:
            return next(iter(self.node_watcher.objects.values()), self.node)
        return self.node

    def node_state(self) -> Optional[str]:
        """The node's ``not_ready`` as the Node watch last saw it (no request)."""
        node = self.last_node()
        return not_ready(node) if node else None
