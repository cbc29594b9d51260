"""Pools of connections to one daemon: :class:`ClientPool` (blocking) and :class:`AsyncClientPool`.

One connection already carries any number of requests at once, but the daemon answers a
connection's requests in the order they came (PROTOCOL.md §3): a slow identification holds up the
authentications behind it on the same connection, and one connection has the daemon's limit of
requests in flight. A pool keeps several clients, each with its own connection, and gives each call
to the one with the fewest requests in flight (ties taken in turn). Each client reconnects, retries
and refuses to send a request twice exactly as a lone client does (the pool adds no resending of its
own): a request that may have reached the daemon when its connection ended fails with
:class:`ConnectionClosed`, and the retry policy decides, as for one client.
"""

from __future__ import annotations

import os
import threading
from typing import Any, AsyncIterator, Iterator, List, Optional, Sequence, Union

from google.protobuf.message import Message

from . import aio
from ._methods import Operations, Pages
from ._protocol import DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_TIMEOUT
from .client import Client, RequestFuture
from .retry import Retry

__all__ = ["ClientPool", "AsyncClientPool", "DEFAULT_POOL_SIZE"]

#: Connections a pool opens when not told: as many as a busy app's threads usually need.
DEFAULT_POOL_SIZE = 4

_USE_CLIENT_TIMEOUT: Any = object()


class _Turns:
    """Which member takes the next call: the fewest requests in flight, ties in turn."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"a pool needs at least one connection (size {size})")
        self.busy = [0] * size
        self._next = 0

    def take(self) -> int:
        size = len(self.busy)
        order = [(self._next + offset) % size for offset in range(size)]
        chosen = min(order, key=lambda index: self.busy[index])
        self.busy[chosen] += 1
        self._next = (chosen + 1) % size
        return chosen

    def give(self, index: int) -> None:
        self.busy[index] -= 1


class ClientPool(Operations):
    """``size`` blocking :class:`Client` connections to one daemon, with the same methods::

        with ClientPool(size=8) as pool:               # from any number of threads
            result = pool.identify(Face.vector(24, values))

    The arguments are :class:`Client`'s (each member gets them), plus ``size``. ``connect=True``
    opens every connection now (with a retry policy, each is retried as it says). Thread-safe.
    """

    def __init__(
        self,
        socket_path: Union[str, "os.PathLike[str]", None] = None,
        *,
        size: int = DEFAULT_POOL_SIZE,
        client_name: Optional[str] = None,
        timeout: Optional[float] = DEFAULT_TIMEOUT,
        hello: bool = True,
        connect: bool = True,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        retry: Optional[Retry] = None,
    ) -> None:
        self._turns = _Turns(size)
        self._lock = threading.Lock()
        options = dict(client_name=client_name, timeout=timeout, hello=hello, max_response_bytes=max_response_bytes, retry=retry)
        self._clients: List[Client] = [Client(socket_path, connect=False, **options) for _ in range(size)]
        if connect:
            self.connect()

    @property
    def clients(self) -> Sequence[Client]:
        """The members, one connection each."""
        return tuple(self._clients)

    @property
    def socket_path(self) -> str:
        return self._clients[0].socket_path

    def in_flight(self) -> List[int]:
        """Requests each member has in flight now (through the pool)."""
        with self._lock:
            return list(self._turns.busy)

    def connect(self) -> None:
        """Opens every member's connection (see :meth:`Client.connect`)."""
        for client in self._clients:
            client.connect()

    def close(self) -> None:
        """Closes every connection; requests still waiting fail with :class:`ConnectionClosed`."""
        for client in self._clients:
            client.close()

    def __enter__(self) -> ClientPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<registryd_client.ClientPool {self.socket_path!r} size={len(self._clients)}>"

    def _take(self) -> int:
        with self._lock:
            return self._turns.take()

    def _give(self, index: int) -> None:
        with self._lock:
            self._turns.give(index)

    def send(self, operation: Message, *, timeout: Optional[float] = _USE_CLIENT_TIMEOUT) -> Any:
        """:meth:`Client.send` on the member with the fewest requests in flight."""
        index = self._take()
        try:
            client = self._clients[index]
            if timeout is _USE_CLIENT_TIMEOUT:
                return client.send(operation)
            return client.send(operation, timeout=timeout)
        finally:
            self._give(index)

    def submit(self, operation: Message) -> RequestFuture:
        """:meth:`Client.submit` on the member with the fewest requests in flight; it counts as in
        flight there until its future is done."""
        index = self._take()
        try:
            future = self._clients[index].submit(operation)
        except BaseException:
            self._give(index)
            raise
        future.add_done_callback(lambda _: self._give(index))
        return future

    def _walk(self, pages: Pages[Any]) -> Iterator[Any]:
        # One member walks the pages: it counts as busy until the walk ends.
        index = self._take()
        try:
            yield from self._clients[index]._walk(pages)
        finally:
            self._give(index)


class AsyncClientPool(Operations):
    """``size`` :class:`registryd_client.aio.Client` connections to one daemon, with the same
    coroutine methods::

        async with AsyncClientPool(size=8) as pool:
            results = await asyncio.gather(*(pool.identify(face) for face in faces))

    The arguments are the asyncio client's (each member gets them), plus ``size``; the connections
    open in ``async with`` (or :meth:`connect`), else at each member's first call.
    """

    def __init__(
        self,
        socket_path: Union[str, "os.PathLike[str]", None] = None,
        *,
        size: int = DEFAULT_POOL_SIZE,
        client_name: Optional[str] = None,
        timeout: Optional[float] = DEFAULT_TIMEOUT,
        hello: bool = True,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        retry: Optional[Retry] = None,
    ) -> None:
        # One event loop runs the pool: the counts need no lock.
        self._turns = _Turns(size)
        options = dict(client_name=client_name, timeout=timeout, hello=hello, max_response_bytes=max_response_bytes, retry=retry)
        self._clients: List[aio.Client] = [aio.Client(socket_path, **options) for _ in range(size)]

    @property
    def clients(self) -> Sequence[aio.Client]:
        return tuple(self._clients)

    @property
    def socket_path(self) -> str:
        return self._clients[0].socket_path

    def in_flight(self) -> List[int]:
        return list(self._turns.busy)

    async def connect(self) -> None:
        for client in self._clients:
            await client.connect()

    async def close(self) -> None:
        for client in self._clients:
            await client.close()

    async def __aenter__(self) -> AsyncClientPool:
        await self.connect()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<registryd_client.AsyncClientPool {self.socket_path!r} size={len(self._clients)}>"

    async def send(self, operation: Message, *, timeout: Optional[float] = _USE_CLIENT_TIMEOUT) -> Any:
        index = self._turns.take()
        try:
            client = self._clients[index]
            if timeout is _USE_CLIENT_TIMEOUT:
                return await client.send(operation)
            return await client.send(operation, timeout=timeout)
        finally:
            self._turns.give(index)

    async def submit(self, operation: Message) -> aio.RequestFuture:
        index = self._turns.take()
        try:
            future = await self._clients[index].submit(operation)
        except BaseException:
            self._turns.give(index)
            raise
        future.add_done_callback(lambda _: self._turns.give(index))
        return future

    async def _walk(self, pages: Pages[Any]) -> AsyncIterator[Any]:
        index = self._turns.take()
        try:
            async for item in self._clients[index]._walk(pages):
                yield item
        finally:
            self._turns.give(index)
