"""After the drain, before the work: wait until no volume holds the node (docs/design.md §4.7.8).

One read of the Node and one list of the VolumeAttachments say whether anything is still
attached; a node without volumes costs those two requests and nothing more. Otherwise one
watch on the Node and one on the VolumeAttachments (the waiter reopens them across an API
server restart) until ``model.volumes.still_attached`` is empty, or the timeout fails the
node naming what is still attached. The volumes of pods that stay on the node (the drain's
``skipped_pods``: DaemonSet pods, pods a rule skips) are not waited for. While it waits, the
NodeMaintenance's ``lastError`` names the volumes (the drain's progress line prints it) and
a ``Drain`` event says so once.
"""

from __future__ import annotations

import time
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

from ..api import paths
from ..api.client import Client
from ..api.waiter import MultiWatcher, Watcher, list_objects, wait_until
from ..errors import ApiError, NmoError, WaitTimeout
from ..model import volumes
from ..stores import maintenance
from ..stores.events import DRAIN, DRAIN_ERROR, EventRecorder
from . import run

VOLUME_ATTACHMENTS = paths.custom("storage.k8s.io", "v1", "volumeattachments")
TICK = 1.0
STATUS_INTERVAL = 1.0


class VolumesAttached(NmoError):
    """The node still had volumes attached when the wait ended."""


def claim_path(namespace: str, name: str) -> str:
    return f"{paths.CORE}/namespaces/{paths.segment(namespace)}/persistentvolumeclaims/{paths.segment(name)}"


def pv_path(name: str) -> str:
    return f"{paths.CORE}/persistentvolumes/{paths.segment(name)}"


def kept_volumes(client: Client, node: str, skipped: Optional[Iterable[Dict[str, Any]]],
                 pods: Optional[List[Dict[str, Any]]] = None) -> Tuple[Set[str], Set[str]]:
    """(PV names, attached names) of the volumes of the pods that stay on the node.

    Read only when something is attached and some pod stays: the node's pods (unless
    given), then each of their claims and its PersistentVolume. ``skipped`` None (operator
    mode: NMO drained, and says nothing of what it left): every pod on the node now stays."""
    if skipped is None:
        mine = list_objects(client, paths.PODS, {"fieldSelector": f"spec.nodeName={node}"}).get("items", [])
    else:
        staying = {(p.get("namespace"), p.get("name")) for p in skipped}
        if not staying:
            return set(), set()
        if pods is None:
            pods = list_objects(client, paths.PODS, {"fieldSelector": f"spec.nodeName={node}"}).get("items", [])
        mine = [p for p in pods if (p["metadata"].get("namespace"), p["metadata"].get("name")) in staying]
    pv_names: Set[str] = set()
    unique: Set[str] = set()
    for namespace, claim in volumes.claims_of(mine):
        pvc = client.get_or_none(claim_path(namespace, claim)) or {}
        pv_name = pvc.get("spec", {}).get("volumeName")
        if not pv_name:
            continue
        pv_names.add(pv_name)
        unique |= volumes.unique_names(client.get_or_none(pv_path(pv_name)) or {})
    return pv_names, unique


def wait_detached(client: Client, node: str, timeout: float, skipped: Optional[Iterable[Dict[str, Any]]],
                  nm_name: Optional[str] = None, pods: Optional[List[Dict[str, Any]]] = None,
                  guard: Optional[run.Guard] = None, node_seen: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Wait until no volume holds ``node``; the result's ``volumes`` part. In a dry run, what
    would be waited for (no wait, nothing written). ``node_seen``: the Node as the drain's
    watch last saw it. A volume only leaves a drained node, so an older view shows at least
    what holds it now: when it shows nothing (and the VolumeAttachments, listed now, none),
    the node is not read again; otherwise it is listed, and the wait starts from that list."""
    started = time.monotonic()
    guard = guard or run.NoGuard()
    node_query = {"fieldSelector": f"metadata.name={node}"}
    attachments = list_objects(client, VOLUME_ATTACHMENTS)
    nodes: Dict[str, Any] = {}
    current = node_seen
    if current is None or volumes.still_attached(node, current, attachments.get("items", [])):
        nodes = list_objects(client, paths.NODES, node_query)
        current = (nodes.get("items") or [{}])[0]
    kept: Tuple[Set[str], Set[str]] = (set(), set())
    held = volumes.still_attached(node, current, attachments.get("items", []))
    if held:
        kept = kept_volumes(client, node, skipped, pods)
        held = volumes.still_attached(node, current, attachments.get("items", []), *kept)
    result: Dict[str, Any] = {"waited": False, "attached": held, "ignored": sorted(kept[0] | kept[1]),
                              "timeout": timeout}
    if not held or client.dry_run:
        if client.dry_run and held:
            result["would_wait_for"] = held
        return result
    nm = maintenance.get(client, nm_name) if nm_name else None
    recorder = EventRecorder(client)
    if nm is not None:
        recorder.record(nm, DRAIN, volumes.message(node, held)[:1000])
    state: Dict[str, Any] = {"held": held, "written": None, "at": 0.0, "nm": nm}

    def note(text: str, force: bool = False) -> None:
        """The volumes still attached, in the NodeMaintenance's lastError (at most once a second)."""
        if state["nm"] is None or state["written"] == text:
            return
        now = time.monotonic()
        if not force and now - state["at"] < STATUS_INTERVAL:
            return
        try:
            state["nm"], _changed = maintenance.update_status(client, state["nm"], {"lastError": text})
            state["written"], state["at"] = text, now
        except ApiError:  # progress must not stop the wait; the next tick writes again
            pass

    node_watch = Watcher(client, paths.NODES, node_query, initial=nodes)
    va_watch = Watcher(client, VOLUME_ATTACHMENTS, initial=attachments)
    note(volumes.message(node, held), force=True)
    with MultiWatcher(node_watch, va_watch) as watcher:
        def check() -> Optional[bool]:
            now_node = next(iter(node_watch.objects.values()), None)
            if now_node is None:
                return True  # the node is gone: nothing can stay attached to it
            state["held"] = volumes.still_attached(node, now_node, va_watch.objects.values(), *kept)
            return True if not state["held"] else None

        try:
            wait_until(watcher, check, timeout, lambda: volumes.message(node, state["held"]),
                       tick=lambda: (guard.check(), note(volumes.message(node, state["held"]))), tick_every=TICK)
        except WaitTimeout:
            error = (f"volumes still attached to node {node} after {timeout:g} s "
                     f"(volume_detach_timeout): {', '.join(state['held'])}")
            note(error, force=True)
            if state["nm"] is not None:
                recorder.record(state["nm"], DRAIN_ERROR, error[:1000])
            raise VolumesAttached(error, volumes={**result, "attached": state["held"], "waited": True,
                                                  "elapsed": round(time.monotonic() - started, 3)}) from None
    guard.check(force=True)  # the run may have died during the wait's last stretch: then write nothing
    note("", force=True)
    if state["nm"] is not None:
        recorder.record(state["nm"], DRAIN, f"No volume attached to node {node} any more "
                                            f"(waited {time.monotonic() - started:.0f} s)")
    return {**result, "attached": [], "waited": True, "was_attached": held,
            "elapsed": round(time.monotonic() - started, 3)}
