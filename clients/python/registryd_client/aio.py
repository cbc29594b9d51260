"""An asyncio client for registryd: the blocking :class:`registryd_client.Client`'s methods as
coroutines, on one event loop.

::

    from registryd_client import Face
    from registryd_client.aio import Client

    async with Client(client_name="door-kiosk/2.1") as client:   # hello sent, protocol major checked
        results = await asyncio.gather(*(client.identify(face) for face in faces))  # pipelined

The same behaviour as the blocking client, from the same code where it is not I/O
(``registryd_client._protocol``, ``registryd_client._methods``): the socket convention
(:func:`registryd_client.resolve_socket_path`), the hello and its protocol-major check, the
exceptions of :mod:`registryd_client.errors`, one connection reused and replaced when the daemon
closed it, a request sent on a new connection only when it provably never reached the daemon, the
opt-in :class:`registryd_client.Retry` policy (its waits are ``asyncio.sleep``), timeouts and the
largest response accepted.

One reader task per connection takes the responses as they come and completes the oldest waiting
request with each (the daemon answers in request order on a connection, and echoes the id, which is
checked), so any number of calls may be in flight on the one connection: ``asyncio.gather`` of many
calls, or :meth:`Client.submit`. A client belongs to the event loop it first connected in; it is not
thread-safe (use the blocking client from threads).
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import os
import time
from typing import Any, AsyncIterator, Deque, List, Optional, Union

from google.protobuf.message import Message

from . import registry_pb2 as pb
from ._methods import Operations, Pages
from ._protocol import (
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_TIMEOUT,
    HEADER,
    NotSent,
    Settings,
    as_request,
    check_hello,
    check_order,
    closed_before_answer,
    closing_reason,
    connection_failed,
    decode_response,
    encode_frame,
    frame_length,
    hello_request,
    outcome,
    refusal_error,
    retires,
    retry_wait,
    send_elsewhere,
)
from ._version import __version__
from .errors import (
    ConnectionClosed,
    ConnectionFailed,
    ProtocolError,
    ProtocolVersionMismatch,
    RegistrydClientError,
    RequestTimeout,
)
from .retry import Retry

__all__ = ["Client", "RequestFuture"]


class RequestFuture(asyncio.Future):  # type: ignore[type-arg]
    """The pending answer to one submitted request (:meth:`Client.submit`): awaiting it gives the
    result message or raises :class:`RegistryError` / :class:`TransportError`. Cancelling it only
    discards its response: the request was sent and will be carried out."""

    def __init__(self, request_id: int, operation: str) -> None:
        super().__init__()
        #: The id this request was sent with (the daemon echoes it).
        self.request_id = request_id
        #: The operation's case name, e.g. ``"identify"``.
        self.operation = operation

    def __repr__(self) -> str:
        state = "done" if self.done() else "pending"
        return f"<RequestFuture id={self.request_id} {self.operation} {state}>"


async def _answer(future: RequestFuture, timeout: Optional[float]) -> Any:
    """The future's result within ``timeout`` seconds, else :class:`RequestTimeout` (the future is
    cancelled: its response, when it comes, is discarded)."""
    try:
        return await asyncio.wait_for(future, timeout)
    except RegistrydClientError:
        raise  # the request's own failure (RequestTimeout is a TimeoutError too)
    except asyncio.TimeoutError:
        raise RequestTimeout(
            f"registryd did not answer request {future.request_id} ({future.operation}) within {timeout} s"
        ) from None


class _Connection:
    """One stream to the daemon, its reader task, and the requests waiting for responses on it,
    oldest first."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        max_response_bytes: int,
        number: int,
    ) -> None:
        #: The client's count of connections when this one opened (1 for the first).
        self.number = number
        self._reader = reader
        self._writer = writer
        self._max_response_bytes = max_response_bytes
        self._pending: Deque[RequestFuture] = collections.deque()
        self._closed_reason: Optional[str] = None
        # The daemon answered SHUTTING_DOWN here: it reads no more requests on this connection. The
        # requests pending get their answers; new ones go to a new connection.
        self._retired = False
        # A connection-level error that came before any request (TOO_MANY_CONNECTIONS is sent as
        # soon as the daemon accepts): raised by the submit that finds the connection closed.
        self._refusal: Optional[pb.Error] = None
        # Writers take turns to wait for the transport's buffer to drain (Python 3.9's drain() does
        # not allow two waiters).
        self._write_lock = asyncio.Lock()
        self._reader_task = asyncio.get_running_loop().create_task(self._read_loop())

    @classmethod
    async def open(cls, path: str, timeout: Optional[float], max_response_bytes: int, number: int) -> _Connection:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_unix_connection(path), timeout)
        except asyncio.TimeoutError:
            raise ConnectionFailed(path, "timed out") from None
        except OSError as error:
            raise connection_failed(path, error) from None
        return cls(reader, writer, max_response_bytes, number)

    @property
    def is_open(self) -> bool:
        """Whether a new request may be written here."""
        return self._closed_reason is None and not self._retired

    @property
    def reader_alive(self) -> bool:
        return not self._reader_task.done()

    async def submit(self, request: pb.Request, operation: str, timeout: Optional[float]) -> RequestFuture:
        """Writes the request; the future completes with the response. Raises :class:`NotSent` when
        the request provably never reached the daemon, :class:`RequestTimeout` when it could not be
        written within ``timeout`` (the connection is then closed)."""
        frame = encode_frame(request)
        future = RequestFuture(request.id, operation)
        written = False
        try:
            await asyncio.wait_for(self._write(frame, future), timeout)
            written = True
        except asyncio.TimeoutError:
            if future in self._pending:
                # Its frame is in the transport's buffer: never waited for now, and the daemon does
                # not read; the connection is given up.
                future.cancel()
                self._shut("writing a request timed out")
            raise RequestTimeout(
                f"could not write request {request.id} ({operation}) to registryd in time"
            ) from None
        finally:
            if not written and not future.done():
                # Nobody will wait for it (never sent, or the caller gave up while it was written):
                # a response that still comes is dropped.
                future.cancel()
        return future

    async def _write(self, frame: bytes, future: RequestFuture) -> None:
        async with self._write_lock:
            transport = self._writer.transport
            if self._closed_reason is not None or transport.is_closing():
                if self._refusal is not None:
                    raise NotSent(refusal_error(self._refusal))
                reason = self._closed_reason or "registryd closed the connection"
                raise NotSent(ConnectionClosed(f"the connection to registryd is closed: {reason}"))
            if self._retired:
                raise NotSent(
                    ConnectionClosed(
                        "registryd answered SHUTTING_DOWN on this connection and reads no more requests on it"
                    ),
                    retired=True,
                )
            # The frame in one go, appended to `_pending` in the same step: the order of `_pending`
            # is the order of the frames on the wire.
            self._pending.append(future)
            self._writer.write(frame)
            if transport.is_closing():
                # The transport's buffer was empty, so it tried to send the frame at once, and the
                # send failed (the daemon had closed the connection, and the reader had not seen it
                # yet): a failed send() writes nothing, so not a byte of it went out. (Had part of it
                # gone out, the rest would wait in the buffer and the transport would stay open.)
                self._pending.remove(future)
                reason = "writing failed: registryd had closed the connection"
                self._closed_reason = self._closed_reason or reason
                raise NotSent(ConnectionClosed(f"the connection to registryd is closed: {reason}"))
            try:
                await self._writer.drain()
            except OSError:
                # The connection ended with the frame written, in part or whole: the reader fails it
                # with ConnectionClosed at the end of the stream; it is never sent again.
                pass

    async def close(self, reason: str = "closed by the client") -> None:
        self._shut(reason)
        if self._reader_task is not asyncio.current_task():
            self._reader_task.cancel()
            try:
                await self._reader_task
            except asyncio.CancelledError:
                pass
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except OSError:
            pass

    def _shut(self, reason: str, oldest_error: Optional[BaseException] = None) -> None:
        """Marks the connection closed, drops the transport (the reader reaches the end of the
        stream) and fails every waiting request: the oldest with ``oldest_error`` when given (what
        went wrong with its response), the others with :class:`ConnectionClosed`."""
        if self._closed_reason is None:
            self._closed_reason = reason
        waiting = list(self._pending)
        self._pending.clear()
        self._writer.transport.abort()
        if oldest_error is not None and waiting:
            self._complete(waiting.pop(0), error=oldest_error)
        for future in waiting:
            self._complete(future, error=closed_before_answer(future.request_id, future.operation, reason))

    # -- the reader task -----------------------------------------------------------------------

    async def _read_loop(self) -> None:
        reason = "registryd closed the connection"
        protocol_error: Optional[ProtocolError] = None
        try:
            while True:
                header = await self._receive_exactly(HEADER.size, at_frame_start=True)
                if header is None:
                    break
                length = frame_length(header, self._max_response_bytes)
                body = await self._receive_exactly(length, at_frame_start=False) if length else b""
                self._deliver(decode_response(body or b""))
        except ProtocolError as error:
            reason, protocol_error = str(error), error
        except ConnectionClosed as error:
            reason = str(error)
        except OSError as error:
            reason = f"reading failed: {error.strerror or error}"
        except asyncio.CancelledError:
            self._shut(self._closed_reason or "closed by the client")
            raise
        except Exception as error:  # a bug here must not leave callers waiting forever
            reason = f"the client's reader failed: {type(error).__name__}"
        self._shut(self._closed_reason or reason, protocol_error)

    async def _receive_exactly(self, size: int, at_frame_start: bool) -> Optional[bytes]:
        """``size`` bytes, or None at the end of the stream between frames."""
        try:
            return await self._reader.readexactly(size)
        except asyncio.IncompleteReadError as error:
            if at_frame_start and not error.partial:
                return None
            raise ConnectionClosed("registryd closed the connection in the middle of a response") from None

    def _deliver(self, response: pb.Response) -> None:
        oldest = self._pending[0] if self._pending else None
        check_order(response, oldest.request_id if oldest else None)
        if oldest is None:
            self._refusal = response.error
            self._shut(f"registryd refused the connection: {pb.ErrorCode.Name(response.error.code)}")
            return
        self._pending.popleft()
        if retires(response):
            self._retired = True  # before the caller hears of it: its retry goes to a new connection
        result, error = outcome(response, oldest.request_id, oldest.operation)
        self._complete(oldest, result, error)
        closing = closing_reason(response)
        if closing is not None:
            self._shut(closing)

    @staticmethod
    def _complete(future: RequestFuture, result: Any = None, error: Optional[BaseException] = None) -> None:
        if future.done():  # cancelled by its caller (a timeout): the response is dropped
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)


_USE_CLIENT_TIMEOUT: Any = object()


class Client(Operations, Settings):
    """A connection to registryd with one coroutine method per operation.

    ::

        async with Client() as client:                # $REGISTRYD_SOCKET, else ./run/registryd.sock
            await client.register("alice", Face.vector(24, values))
            result = await client.identify(Face.vector(24, other_values))

    Args:
        socket_path: the daemon's socket; None: see :func:`registryd_client.resolve_socket_path`.
        client_name: sent in the hello, for the daemon's log (e.g. ``"door-kiosk/2.1"``).
        timeout: seconds to connect, to write a request and to wait for each response; None waits
            forever. A timed-out request may still be carried out.
        hello: send the hello first on each connection and check the daemon's protocol major version
            (:class:`ProtocolVersionMismatch` otherwise). Without it the daemon assumes 1.x.
        max_response_bytes: the largest response frame accepted.
        retry: a :class:`registryd_client.Retry` policy for the calls and for connecting; None (the
            default): a call fails at its first error. Its waits are ``asyncio.sleep``; a ``sleep``
            given to the policy replaces it (awaited when it returns an awaitable).

    The connection opens in ``async with`` (or :meth:`connect`), else at the first call. Every
    method raises :class:`RegistryError` (a subclass per error code) when the daemon refuses the
    request and :class:`TransportError` when it does not answer, as the blocking client's do.
    """

    def __init__(
        self,
        socket_path: Union[str, "os.PathLike[str]", None] = None,
        *,
        client_name: Optional[str] = None,
        timeout: Optional[float] = DEFAULT_TIMEOUT,
        hello: bool = True,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        retry: Optional[Retry] = None,
    ) -> None:
        self._configure(
            socket_path,
            client_name=(
                client_name if client_name is not None else f"registryd-client-python-asyncio/{__version__}"
            ),
            timeout=timeout,
            hello=hello,
            max_response_bytes=max_response_bytes,
            retry=retry,
        )
        # Created in the event loop (an asyncio.Lock made outside one binds another loop on 3.9).
        self._connect_lock: Optional[asyncio.Lock] = None
        self._connection: Optional[_Connection] = None
        # Connections replaced while their reader still ran (retired after SHUTTING_DOWN with
        # requests pending): closed once it ends, or by close().
        self._draining: List[_Connection] = []

    # -- connection ----------------------------------------------------------------------------

    async def connect(self) -> None:
        """Opens the connection (and says hello) unless one is open. Also reopens a closed client.
        With a retry policy, connecting is retried as the policy says (e.g. while the daemon
        restarts)."""
        self._closed = False
        attempt = 1
        while True:
            try:
                await self._ensure_connection()
                return
            except RegistrydClientError as error:
                await self._again(attempt, error, sent=False, deadline=None)
            attempt += 1

    async def close(self) -> None:
        """Closes the connection; requests still waiting fail with :class:`ConnectionClosed`
        ("closed by the client"). Further calls raise :class:`ConnectionClosed` until
        :meth:`connect`."""
        self._closed = True
        connection, self._connection = self._connection, None
        draining, self._draining = self._draining, []
        for old in [*draining, *([connection] if connection is not None else [])]:
            await old.close()

    async def __aenter__(self) -> Client:
        await self.connect()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("open" if self._connection and self._connection.is_open else "idle")
        return f"<registryd_client.aio.Client {self.socket_path!r} {state}>"

    async def _ensure_connection(self) -> _Connection:
        connection = self._connection
        if connection is not None and connection.is_open:
            return connection
        if self._connect_lock is None:
            self._connect_lock = asyncio.Lock()
        async with self._connect_lock:  # one task opens, the others wait for it and share it
            connection = self._connection
            if connection is not None and connection.is_open:
                return connection
            if self._closed:
                raise ConnectionClosed("the client is closed")
            if connection is not None:
                # The daemon closed it (idle timeout, restart) or retired it. A reader still running
                # delivers what is still owed to requests pending there; the others are reaped.
                self._connection = None
                self._draining.append(connection)
            for old in [old for old in self._draining if not old.reader_alive]:
                self._draining.remove(old)
                await old.close()
            connection = await _Connection.open(
                self.socket_path, self.timeout, self.max_response_bytes, self.connections_opened + 1
            )
            self.connections_opened += 1
            self.server = None
            if self._send_hello:
                try:
                    request, name = hello_request(self.client_name)
                    request.id = self._ids.next()
                    future = await connection.submit(request, name, self.timeout)
                    self.server = check_hello(await _answer(future, self.timeout))
                except NotSent as not_sent:
                    await connection.close(str(not_sent.error))
                    raise not_sent.error from None
                except BaseException as error:
                    await connection.close(str(error) or type(error).__name__)
                    raise
            if self._closed:  # close() ran meanwhile
                await connection.close()
                raise ConnectionClosed("the client is closed")
            self._connection = connection
            return connection

    # -- generic -------------------------------------------------------------------------------

    async def submit(self, operation: Message) -> RequestFuture:
        """Sends one request and returns once it is written, without waiting for its response:
        await the returned future for the result. ``operation`` as for :meth:`send`. The retry
        policy does not apply here."""
        request, name = as_request(operation)
        return await self._submit(request, name)

    async def _submit(self, request: pb.Request, name: str) -> RequestFuture:
        opened_before = self.connections_opened
        resends = 0
        while True:
            if self._closed:
                raise ConnectionClosed("the client is closed")
            connection = await self._ensure_connection()
            request.id = self._ids.next()
            try:
                return await connection.submit(request, name, self.timeout)
            except NotSent as not_sent:
                if not send_elsewhere(not_sent, connection.number, opened_before, resends):
                    raise not_sent.error from None
            resends += 1

    async def send(self, operation: Message, *, timeout: Optional[float] = _USE_CLIENT_TIMEOUT) -> Any:
        """Sends one request and returns its result message (e.g. ``registry_pb2.AuditQueryResult``
        for an ``AuditQueryRequest``). ``operation`` is an operation message (see
        :mod:`registryd_client.operations`) or a whole ``Request``; the client assigns the id.
        ``timeout`` overrides the client's for this call.

        With a retry policy, a retryable failure is tried again (with a new request id) until the
        policy's attempts are spent; ``timeout`` then bounds the call as a whole. A request that was
        written and lost its connection is never sent again."""
        call_timeout: Optional[float] = self.timeout if timeout is _USE_CLIENT_TIMEOUT else timeout
        request, name = as_request(operation)
        deadline = None if call_timeout is None else time.monotonic() + call_timeout
        attempt = 1
        while True:
            sent = False
            try:
                future = await self._submit(request, name)
                sent = True
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                return await _answer(future, remaining)
            except RegistrydClientError as error:
                await self._again(attempt, error, sent=sent, deadline=deadline)
            attempt += 1

    async def _again(
        self, attempt: int, error: RegistrydClientError, *, sent: bool, deadline: Optional[float]
    ) -> None:
        """Returns after the policy's wait when it tries the failed ``attempt`` again; raises
        ``error`` when it does not."""
        wait = retry_wait(
            self.retry, attempt, error, sent=sent, closed=self._closed, now=time.monotonic(), deadline=deadline
        )
        if wait is None:
            raise error
        assert self.retry is not None
        if self.retry.sleep is time.sleep:
            await asyncio.sleep(wait)
        else:
            waited = self.retry.sleep(wait)
            if inspect.isawaitable(waited):
                await waited

    async def hello(self, client_name: Optional[str] = None) -> pb.HelloResult:
        """Exchanges protocol versions on the current connection (done on every connection unless
        ``hello=False``; if sent, it must be the connection's first request) and returns the daemon's
        ``HelloResult``, also kept as :attr:`server`. Another protocol major version:
        :class:`ProtocolVersionMismatch`, and the connection is closed."""
        request, name = hello_request(self.client_name if client_name is None else client_name)
        future = await self._submit(request, name)
        try:
            self.server = check_hello(await _answer(future, self.timeout))
        except ProtocolVersionMismatch:
            connection = self._connection
            if connection is not None:
                await connection.close("protocol version mismatch")
            raise
        return self.server

    # -- page iterators ----------------------------------------------------------------------------

    async def _walk(self, pages: Pages[Any]) -> AsyncIterator[Any]:
        # Client.iter_identifiers, iter_export, iter_liveness_profiles (see _methods.Paged).
        request: Optional[Message] = pages.first
        while request is not None:
            result = await self.send(request)
            for item in pages.items(result):
                yield item
            request = pages.following(request, result)
