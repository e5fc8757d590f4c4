"""Which API failures pass by themselves, and how long to wait before asking again.

An API server restarts (a few seconds of refused connections, then 503s and
``429 storage is (re)initializing`` while its caches fill), API Priority and Fairness
rejects requests of a busy flow with ``429 Too many requests`` and ``Retry-After``, etcd
times out under load. None of these says anything about the request, so every request is
asked again, after a capped exponential backoff with jitter (or the server's
``Retry-After``), until it gets a real answer or its time budget is spent. The budget is
the caller's (a drain gives its own timeout) with a default that outlasts an API server
restart.

What is final is never retried: a server certificate that does not verify
(``TlsVerifyError``: the same certificate would be refused again), 4xx answers about the request itself, a
PodDisruptionBudget's refusal of an eviction (``DisruptionBudgetRefusal``: the drain
decides when to ask again), and a 500 that is not a known passing failure (the eviction
API's "more than one PodDisruptionBudget" is one such real error). One exception: an API
server that has just started answers before its authorizer has read the RBAC objects,
so a user who is not a cluster admin gets 403 (or 401) for a moment. Shortly after the
client found the server unreachable (``Outages``), a 401/403 is asked again too.

Pure except for ``call``, which takes its clock and sleep as arguments for the unit tests.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Callable, Optional, TypeVar

from ..errors import ApiError, DisruptionBudgetRefusal, EvacuationStarted, TlsVerifyError

T = TypeVar("T")

DEFAULT_BUDGET = 60.0  # seconds: an API server restart takes 10-20 s
STARTING_WINDOW = 30.0  # seconds after the server was unreachable in which a 401/403 may be its start-up
UNREACHABLE = (0, 502, 503, 504)  # no answer, or the server (or its proxy) says it is not serving

# A 500 is retried only when its message shows a passing cause (etcd, a timeout, a
# connection); any other 500 is an answer about the request and fails at once.
TRANSIENT_500 = ("etcdserver", "timeout", "timed out", "deadline exceeded", "connection refused",
                 "connection reset", "unavailable", "leader changed", "try again", "initializing",
                 "eof", "too many requests")


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff: ``first`` seconds, doubling, at most ``cap``; jitter keeps many
    threads (the drain's evictions) from asking again in step. A ``Retry-After`` is a
    floor, spread up to ``jitter`` above it. Nothing is retried past ``budget`` seconds
    after the first attempt."""

    budget: float = DEFAULT_BUDGET
    first: float = 0.2
    cap: float = 4.0
    jitter: float = 0.5  # a backoff is scaled by [1 - jitter, 1], a Retry-After by [1, 1 + jitter]

    def delay(self, attempt: int, retry_after: Optional[float] = None,
              rand: Callable[[], float] = random.random) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1 for the first)."""
        backoff = min(self.cap, self.first * 2 ** (attempt - 1))
        if retry_after is None:
            return backoff * (1 - self.jitter * rand())
        # The server says when it has room again: not before, and spread out after it, or
        # every throttled thread would come back in the same instant and be throttled
        # again. A bogus huge value cannot stall a task: the budget bounds it (``call``).
        return max(backoff, retry_after) * (1 + self.jitter * rand())


class Outages:
    """When the client last found the API server unreachable; shared by its threads."""

    def __init__(self, window: float = STARTING_WINDOW) -> None:
        self.window = window
        self.last: Optional[float] = None

    def note(self, error: BaseException, now: float) -> None:
        if isinstance(error, TlsVerifyError):
            return  # the server answered, with a certificate we refuse: it is not starting
        if not isinstance(error, ApiError) or error.status in UNREACHABLE:
            self.last = now

    def recent(self, now: float) -> bool:
        """The server was unreachable a moment ago: it may still be starting."""
        return self.last is not None and now - self.last < self.window


def transient(error: BaseException, starting: bool = False) -> bool:
    """True when asking again later can get another answer. ``starting``: the server was
    unreachable a moment ago, so a 401/403 may be its authorizer not ready yet."""
    if not isinstance(error, ApiError) or isinstance(error, TlsVerifyError):
        return False  # a certificate that does not verify will not verify next time either
    if error.status in (401, 403):
        return starting
    if isinstance(error, (DisruptionBudgetRefusal, EvacuationStarted)):
        return False  # a budget's answer, or an owner evacuating the pod: the drain decides when to ask again
    status = error.status
    if status == 0:  # connection refused or reset, a timeout: no answer at all
        return True
    if status == 429 or status in (502, 503, 504):
        return True
    if status == 500:
        text = (error.server_message or error.message).lower()
        return error.retry_after is not None or any(marker in text for marker in TRANSIENT_500)
    return False


def call(attempt: Callable[[], T], policy: RetryPolicy, deadline: Optional[float] = None,
         clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
         rand: Callable[[], float] = random.random, outages: Optional[Outages] = None) -> T:
    """``attempt()`` until it answers or fails for good, within ``policy.budget`` seconds and
    before ``deadline`` (a ``clock()`` time) when one is given. The last error is raised,
    carrying how many attempts were made (``error.attempts``): a create that meets
    AlreadyExists after a lost answer can tell it was probably its own."""
    end = clock() + policy.budget
    if deadline is not None:
        end = min(end, deadline)
    tries = 0
    while True:
        tries += 1
        try:
            return attempt()
        except ApiError as error:
            error.attempts = tries
            now = clock()
            if outages is not None:
                outages.note(error, now)
            if not transient(error, outages is not None and outages.recent(now)):
                raise
            wait = policy.delay(tries, error.retry_after, rand)
            if clock() + wait > end:
                raise
            sleep(wait)
