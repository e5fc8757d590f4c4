"""Which API failures pass by themselves, and how long to wait before asking again.

An API server restarts (a few seconds of refused connections, then 503s and
``429 storage is (re)initializing`` while its caches fill), API Priority and Fairness
rejects requests of a busy flow with ``429 Too many requests`` and ``Retry-After``, etcd
times out under load. None of these says anything about the request, so every request is
asked again, after a capped exponential backoff with jitter (or the server's
``Retry-After``), until it gets a real answer or its time budget is spent. The budget is
the caller's (a drain gives its own timeout) with a default that outlasts an API server
restart.

What is final is never retried: 4xx answers about the request itself, a
PodDisruptionBudget's refusal of an eviction (``DisruptionBudgetRefusal``: the drain
decides when to ask again), and a 500 that is not a known passing failure (the eviction
API's "more than one PodDisruptionBudget" is one such real error).

Pure except for ``call``, which takes its clock and sleep as arguments for the unit tests.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Callable, Optional, TypeVar

from .errors import ApiError, DisruptionBudgetRefusal

T = TypeVar("T")

DEFAULT_BUDGET = 60.0  # seconds: an API server restart takes 10-20 s

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


def transient(error: BaseException) -> bool:
    """True when asking again later can get another answer."""
    if not isinstance(error, ApiError):
        return False
    if isinstance(error, DisruptionBudgetRefusal):
        return False  # a PodDisruptionBudget's answer: the drain decides when to ask again
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
         rand: Callable[[], float] = random.random) -> T:
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
            if not transient(error):
                raise
            wait = policy.delay(tries, error.retry_after, rand)
            if clock() + wait > end:
                raise
            sleep(wait)
