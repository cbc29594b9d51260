"""The retry policy: which failures a call may try again, how often, and after which waits.

::

    from registryd_client import Client, ExponentialBackoff, Retry

    client = Client(retry=Retry(attempts=5, backoff=ExponentialBackoff(base=0.1, cap=2.0)))

A policy retries only what is safe to send again and may succeed (PROTOCOL.md §3 and §5):

* the daemon's retryable refusals, :attr:`RegistryError.retryable`: ``SHUTTING_DOWN`` (on a new
  connection, once the daemon is back), ``TOO_MANY_CONNECTIONS`` (on a new connection),
  ``STORAGE_FULL`` and ``FLEET_UNAVAILABLE``; the request was not carried out;
* failing to reach the daemon while it restarts: :class:`ConnectionFailed` with ``ENOENT`` (no
  socket), ``ECONNREFUSED`` (nothing listening) or ``EAGAIN`` (its listen queue is full), and a new
  connection that closed before the request could be written on it (e.g. during its hello); the
  request never reached the daemon.

Never a request that was written and lost its connection before the response (the daemon may have
carried it out), another code (the same request gets the same answer), a timeout, a permission
error or a protocol error.
"""

from __future__ import annotations

import errno
import random
import time
from typing import Callable, Optional

from .errors import ConnectionClosed, ConnectionFailed, RegistrydClientError, RegistryError

__all__ = ["Backoff", "ExponentialBackoff", "Retry"]

# Dial failures of a daemon that is restarting: no socket yet, nothing listening, a full listen queue.
_TRANSIENT_CONNECT_ERRORS = frozenset({errno.ENOENT, errno.ECONNREFUSED, errno.EAGAIN})


class Backoff:
    """How long to wait before a retry. Subclass it (or pass any object with this ``compute``) for
    another schedule."""

    def compute(self, failures: int) -> float:
        """Seconds to wait after the ``failures``-th failed attempt (1 for the first)."""
        raise NotImplementedError


class ExponentialBackoff(Backoff):
    """Waits ``base`` · 2^(failures - 1) seconds, at most ``cap``; with ``jitter`` (the default), a
    random share between half and all of that, so that clients refused together do not come back
    together.

    Args:
        base: the wait after the first failure, in seconds (before jitter).
        cap: the longest wait, in seconds.
        jitter: take a random share of each wait (between half and all of it).
        rng: the random source of the jitter (tests); a new ``random.Random()`` by default.
    """

    def __init__(
        self,
        base: float = 0.05,
        cap: float = 2.0,
        *,
        jitter: bool = True,
        rng: Optional[random.Random] = None,
    ) -> None:
        if base <= 0 or cap <= 0:
            raise ValueError("base and cap must be positive")
        self.base = base
        self.cap = max(cap, base)
        self.jitter = jitter
        self._rng = rng if rng is not None else random.Random()

    def ceiling(self, failures: int) -> float:
        """The wait after the ``failures``-th failure before jitter: base · 2^(failures - 1), at most cap."""
        exponent = min(max(failures, 1) - 1, 64)  # 2**64 · base is beyond any cap
        return min(self.cap, self.base * 2.0**exponent)

    def compute(self, failures: int) -> float:
        ceiling = self.ceiling(failures)
        return self._rng.uniform(ceiling / 2, ceiling) if self.jitter else ceiling

    def __repr__(self) -> str:
        return f"ExponentialBackoff(base={self.base}, cap={self.cap}, jitter={self.jitter})"


class Retry:
    """A retry policy for a :class:`Client` (``Client(retry=Retry(...))``); off when not given.

    Args:
        attempts: how many times a call is tried in all, the first time included: 3 means at most
            two retries. 1: no retry.
        backoff: the waits between attempts; ``ExponentialBackoff()`` (0.05 s doubling up to 2 s,
            with jitter) by default.
        sleep: waits the given seconds (tests may pass their own); ``time.sleep`` by default.

    It applies to the blocking calls (:meth:`Client.send` and the methods built on it) and to
    connecting (:meth:`Client.connect`, also at construction); :meth:`Client.submit` is never
    retried. The client's ``timeout`` bounds a call with its retries: each attempt waits at most what
    is left of it, no wait runs past it, and the call then raises the last attempt's error.
    """

    def __init__(
        self,
        attempts: int = 3,
        backoff: Optional[Backoff] = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if attempts < 1:
            raise ValueError("attempts must be at least 1 (the first try)")
        self.attempts = attempts
        self.backoff: Backoff = backoff if backoff is not None else ExponentialBackoff()
        self.sleep = sleep

    def __repr__(self) -> str:
        return f"Retry(attempts={self.attempts}, backoff={self.backoff!r})"

    @staticmethod
    def retryable(error: BaseException, sent: bool) -> bool:
        """Whether a call that failed with ``error`` may be tried again. ``sent``: whether the
        request may have reached the daemon (it was written, even in part)."""
        if isinstance(error, RegistryError):
            return error.retryable
        if sent or not isinstance(error, RegistrydClientError):
            return False
        if isinstance(error, ConnectionFailed):
            return error.errno in _TRANSIENT_CONNECT_ERRORS
        return isinstance(error, ConnectionClosed)
