"""Waiting, one mechanism for everything: list once, then one watch, with a deadline.

A ``Watcher`` keeps a live view of a collection (pods of a node, leases of a namespace,
etcd pods). A background thread reads the watch stream and queues the events; the
caller's loop applies them and re-evaluates its condition, and also gets a regular tick
for time-based work (retrying evictions, noticing that a lease expired), so nothing polls
the API server while nothing changes.
"""

from __future__ import annotations

import copy
import json
import queue
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple, TypeVar

from ..errors import ApiError, WaitTimeout, api_error
from .client import Client, iter_lines
from .retry import RetryPolicy, transient

T = TypeVar("T")
Event = Tuple[str, Dict[str, Any]]
WAKE = "WAKE"
REOPEN = RetryPolicy()  # the backoff between failed (re)opens of a watch
POLL = RetryPolicy(first=0.05, cap=1.0, jitter=0.0)  # poll_until's backoff: 0.05 s doubling to 1 s


def object_key(obj: Dict[str, Any]) -> str:
    meta = obj.get("metadata", {})
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def list_objects(client: Client, path: str, query: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """One list, each item with its kind and apiVersion; its resourceVersion can start a Watcher."""
    listing = client.get(path, query)
    kind = listing.get("kind", "").removesuffix("List")
    api_version = listing.get("apiVersion")
    for item in listing.get("items", []):
        item.setdefault("kind", kind)
        item.setdefault("apiVersion", api_version)
    return listing


class Listed(list):
    """The items of one list and the list's resourceVersion: a Watcher of the same collection
    starts from them (``initial=listed.listing()``) instead of listing again. A copy (``list(x)``)
    is a plain list: only the list as answered carries a version to watch from."""

    def __init__(self, items: Any = (), resource_version: str = "") -> None:
        super().__init__(items)
        self.resource_version = resource_version

    def listing(self) -> Optional[Dict[str, Any]]:
        # copies: the watch replaces what it reads, the caller may change its own
        return {"items": copy.deepcopy(list(self)), "metadata": {"resourceVersion": self.resource_version}} \
            if self.resource_version else None


def listed(client: Client, path: str, query: Optional[Dict[str, Any]] = None) -> Listed:
    """``list_objects``' items, with the version a watch can start from."""
    listing = list_objects(client, path, query)
    return Listed(listing.get("items", []), (listing.get("metadata") or {}).get("resourceVersion", ""))


def start_from(found: Optional[List[Dict[str, Any]]]) -> Optional[Dict[str, Any]]:
    """What a Watcher starts from: ``found`` when it is a list as answered, else None (it lists)."""
    return found.listing() if isinstance(found, Listed) else None


class Watcher:
    """A live, watch-fed view of the objects under ``path`` matching ``query``."""

    def __init__(self, client: Client, path: str, query: Optional[Dict[str, Any]] = None,
                 initial: Optional[Dict[str, Any]] = None) -> None:
        self.client = client
        self.path = path
        self.query = dict(query or {})
        self.objects: Dict[str, Dict[str, Any]] = {}
        self._events: queue.Queue[Event] = queue.Queue()
        self._stop = threading.Event()
        self._resp: Any = None
        self._thread: Optional[threading.Thread] = None
        self._notify: Optional[threading.Event] = None  # set by a MultiWatcher that waits on several
        self.resource_version = ""
        self.applied = 0  # the events applied to ``objects`` so far (a check can tell which watch moved)
        if initial is not None:
            self._load(initial)

    # -- life cycle -------------------------------------------------------------------------
    def _load(self, listing: Dict[str, Any]) -> None:
        self.objects = {object_key(o): o for o in listing.get("items", [])}
        self.resource_version = listing.get("metadata", {}).get("resourceVersion", "")

    def list(self) -> Dict[str, Any]:
        return list_objects(self.client, self.path, self.query)

    def start(self) -> Watcher:
        if not self.resource_version:
            self._load(self.list())
        self._thread = threading.Thread(target=self._run, name="nmo-watch", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        resp = self._resp
        if resp is not None:
            try:
                resp.shutdown() if hasattr(resp, "shutdown") else resp.close()
            except Exception:  # closing a stream that the server already ended
                pass

    def __enter__(self) -> Watcher:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- the reader thread ------------------------------------------------------------------
    def _run(self) -> None:
        """Read the watch; reopen it from the last resourceVersion when it ends or breaks.

        A transient failure (the API server restarting or throttling, a dropped connection,
        a stream that ends as soon as it opens) reopens after the client's backoff, which
        grows with each failure in a row, so a long outage costs a request every few
        seconds, not a storm. ``410 Gone`` (our resourceVersion was compacted) lists again.
        Anything else (403, say) is final and reaches the caller's next ``drain_events``.
        """
        rv: Optional[str] = self.resource_version
        failures = 0
        while not self._stop.is_set():
            opened, seen = time.monotonic(), 0
            try:
                if rv is None:
                    listing = self.list()
                    rv = listing["metadata"]["resourceVersion"]
                    self._put(("RESYNC", listing))
                query = dict(self.query, watch="true", resourceVersion=rv, allowWatchBookmarks="true",
                             timeoutSeconds=240)
                self._resp = self.client.stream(self.path, query, read_timeout=300)
                for line in iter_lines(self._resp):
                    event = json.loads(line)
                    etype, obj = event.get("type"), event.get("object", {})
                    if etype == "ERROR":
                        raise api_error(obj.get("code", 500), obj.get("reason", ""), obj.get("message", ""),
                                        "WATCH", self.path, obj)
                    rv = obj.get("metadata", {}).get("resourceVersion", rv)
                    seen += 1
                    failures = 0
                    if etype != "BOOKMARK":
                        self._put((etype, obj))
                # The server ended the stream (timeoutSeconds): reopen at once, unless it
                # ended as soon as it opened, which is a server going away.
                quick = not seen and time.monotonic() - opened < 1.0
                failures = failures + 1 if quick else 0
            except Exception as exc:  # the stream broke, or the server refused to open it
                if self._stop.is_set():
                    return
                if isinstance(exc, ApiError) and exc.status == 410:
                    rv = None  # too old to resume from: list again, at once
                    continue
                outages = getattr(self.client, "outages", None)  # the client's, shared with its requests
                if outages is not None:
                    outages.note(exc, time.monotonic())
                starting = outages is not None and outages.recent(time.monotonic())
                if isinstance(exc, ApiError) and not transient(exc, starting):
                    self._put(("FAILED", {"error": exc}))
                    return
                failures += 1
            finally:
                resp, self._resp = self._resp, None
                if resp is not None:
                    try:
                        resp.release_conn()
                    except Exception:
                        pass
            if failures:
                self._stop.wait(REOPEN.delay(failures))

    def _put(self, event: Event) -> None:
        self._events.put(event)
        if self._notify is not None:
            self._notify.set()

    # -- the caller's side ------------------------------------------------------------------
    def wake(self) -> None:
        """Make a pending ``drain_events`` return now (work finished in another thread)."""
        self._put((WAKE, {}))

    def _apply(self, event: Event) -> None:
        etype, obj = event
        if etype == WAKE:
            return
        self.applied += 1
        if etype == "FAILED":
            raise obj["error"]
        if etype == "RESYNC":
            self._load(obj)
            return
        key = object_key(obj)
        if etype == "DELETED":
            self.objects.pop(key, None)
        else:
            self.objects[key] = obj

    def drain_events(self, timeout: float) -> List[Event]:
        """Apply the events that arrive within ``timeout`` seconds (at least the first one)."""
        events: List[Event] = []
        try:
            events.append(self._events.get(timeout=max(timeout, 0)))
            while True:
                events.append(self._events.get_nowait())
        except queue.Empty:
            pass
        for event in events:
            self._apply(event)
        return events


class MultiWatcher:
    """Several watchers waited on as one (the leases and the etcd pods, say).

    ``changes`` counts the batches that brought events, so a check can skip its work
    when nothing changed since it last ran.
    """

    def __init__(self, *watchers: Watcher) -> None:
        self.watchers = list(watchers)
        self.changes = 0
        self._notify = threading.Event()
        for watcher in self.watchers:
            watcher._notify = self._notify

    def start(self) -> MultiWatcher:
        started = []
        try:
            for watcher in self.watchers:
                started.append(watcher.start())
        except Exception:
            for watcher in started:
                watcher.close()
            raise
        return self

    def close(self) -> None:
        for watcher in self.watchers:
            watcher.close()

    def add(self, watcher: Watcher) -> Watcher:
        """Start one more watcher and wait on it too from now on (the drain's KubeVirt hook
        watches migrations only once a VM needs one)."""
        watcher._notify = self._notify
        watcher.start()
        self.watchers.append(watcher)
        return watcher

    def __enter__(self) -> MultiWatcher:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def drain_events(self, timeout: float) -> List[Event]:
        """Apply the events of every watcher that arrive within ``timeout`` seconds."""
        self._notify.wait(max(timeout, 0))
        self._notify.clear()
        events: List[Event] = []
        for watcher in self.watchers:
            events += watcher.drain_events(0)
        if events:
            self.changes += 1
        return events


def wait_until(watcher: Watcher | MultiWatcher, check: Callable[[], Optional[T]], timeout: Optional[float],
               describe: Callable[[], str], tick: Optional[Callable[[], None]] = None,
               tick_every: float = 1.0, clock: Callable[[], float] = time.monotonic) -> T:
    """Re-evaluate ``check`` after every batch of events until it returns a value.

    ``tick`` runs at least every ``tick_every`` seconds for work that depends on time
    rather than on events. ``timeout`` None waits forever. On timeout, ``describe()``
    says what was still awaited.
    """
    deadline = None if timeout is None else clock() + timeout
    next_tick = clock() + tick_every
    while True:
        result = check()
        if result is not None:
            return result
        now = clock()
        if deadline is not None and now >= deadline:
            raise WaitTimeout(f"timed out after {timeout:g} s: {describe()}")
        if tick is not None and now >= next_tick:
            tick()
            next_tick = clock() + tick_every
            continue
        wait = next_tick - now if tick is not None else tick_every
        if deadline is not None:
            wait = min(wait, deadline - now)
        watcher.drain_events(max(wait, 0.01))


def poll_until(check: Callable[[], Optional[T]], timeout: float, describe: Callable[[], str],
               policy: RetryPolicy = POLL,
               clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> T:
    """``check`` again after a growing backoff until it returns a value: for the few
    conditions no watch can show (a resource the API server does not serve yet cannot be
    watched either). Bounded by ``timeout``; on timeout ``describe()`` says what was awaited."""
    deadline = clock() + timeout
    attempt = 0
    while True:
        result = check()
        if result is not None:
            return result
        attempt += 1
        now = clock()
        if now >= deadline:
            raise WaitTimeout(f"timed out after {timeout:g} s: {describe()}")
        sleep(min(policy.delay(attempt), deadline - now))
