"""The connection to registryd: framing, hello, request ids, pipelining (PROTOCOL.md §2-§3).

One :class:`Client` holds one Unix-socket connection and reuses it for every call. A reader thread
per connection takes the responses as they come and completes the oldest waiting request with each
(the daemon answers in request order on a connection), so any number of requests can be in flight:
from several threads calling the blocking methods at once, or from one thread with
:meth:`Client.submit`. Reading while writing is what the daemon's back-pressure needs (§3): a
client that wrote many requests without reading could block both sides.
"""

from __future__ import annotations

import collections
import concurrent.futures
import os
import socket
import threading
import time
from typing import Any, Deque, Iterable, Iterator, List, Optional, Sequence, Union

from google.protobuf.message import Message

from . import registry_pb2 as pb
from ._methods import Operations, Pages
from ._protocol import (
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_SOCKET_PATH,
    DEFAULT_TIMEOUT,
    HEADER,
    SOCKET_ENVIRONMENT_VARIABLE,
    SYSTEM_SOCKET_PATH,
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
    resolve_socket_path,
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

__all__ = [
    "Client",
    "RequestFuture",
    "resolve_socket_path",
    "DEFAULT_SOCKET_PATH",
    "SYSTEM_SOCKET_PATH",
    "SOCKET_ENVIRONMENT_VARIABLE",
    "DEFAULT_TIMEOUT",
]


class RequestFuture(concurrent.futures.Future):  # type: ignore[type-arg]
    """The pending answer to one submitted request: ``result()`` returns the result message (e.g.
    ``registry_pb2.IdentifyResult``) or raises :class:`RegistryError` / :class:`TransportError`.

    ``result(timeout)`` raises :class:`RequestTimeout` when the timeout passes. Cancelling the
    future only discards its response: the request was sent and will be carried out. Done-callbacks
    run on the connection's reader thread: they must not wait for another response of the client.
    """

    def __init__(self, request_id: int, operation: str) -> None:
        super().__init__()
        #: The id this request was sent with (the daemon echoes it).
        self.request_id = request_id
        #: The operation's case name, e.g. ``"identify"``.
        self.operation = operation

    def result(self, timeout: Optional[float] = None) -> Any:
        try:
            return super().result(timeout)
        except concurrent.futures.TimeoutError as error:
            if isinstance(error, RegistrydClientError):  # a RequestTimeout the request itself failed with
                raise
            raise RequestTimeout(
                f"registryd did not answer request {self.request_id} ({self.operation}) within {timeout} s"
            ) from None

    def __repr__(self) -> str:
        state = "done" if self.done() else "pending"
        return f"<RequestFuture id={self.request_id} {self.operation} {state}>"


class _Connection:
    """One socket to the daemon, its reader thread, and the requests waiting for responses on it,
    oldest first."""

    def __init__(self, path: str, timeout: Optional[float], max_response_bytes: int, number: int = 1) -> None:
        self.path = path
        #: The client's count of connections when this one opened (1 for the first).
        self.number = number
        self._max_response_bytes = max_response_bytes
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            # In timeout mode the timeout bounds connect and each sendall; the reader thread treats
            # its own recv timeouts as "nothing yet" (see _receive_exactly).
            sock.settimeout(timeout)
            sock.connect(path)
        except socket.timeout:
            sock.close()
            raise ConnectionFailed(path, "timed out") from None
        except OSError as error:
            sock.close()
            raise connection_failed(path, error) from None
        self._sock = sock
        # _write_lock keeps the order of `_pending` the order of the frames on the wire;
        # _state_lock guards `_pending` and `_closed_reason` between writers and the reader.
        self._write_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._pending: Deque[RequestFuture] = collections.deque()
        self._closed_reason: Optional[str] = None
        # The daemon answered SHUTTING_DOWN here: it reads no more requests on this connection. The
        # requests pending get their answers; new ones go to a new connection.
        self._retired = False
        # A connection-level error that came before any request (TOO_MANY_CONNECTIONS is sent as
        # soon as the daemon accepts): raised by the submit that finds the connection closed.
        self._refusal: Optional[pb.Error] = None
        self._reader = threading.Thread(target=self._read_loop, name=f"registryd-client {path}", daemon=True)
        self._reader.start()

    @property
    def is_open(self) -> bool:
        """Whether a new request may be written here."""
        return self._closed_reason is None and not self._retired

    @property
    def reader_alive(self) -> bool:
        return self._reader.is_alive()

    def submit(self, request: pb.Request, operation: str) -> RequestFuture:
        """Writes the request; its future completes with the response. Raises :class:`NotSent`
        when the request provably never reached the daemon."""
        frame = encode_frame(request)
        future = RequestFuture(request.id, operation)
        with self._write_lock:
            with self._state_lock:
                if self._closed_reason is not None:
                    if self._refusal is not None:
                        raise NotSent(refusal_error(self._refusal))
                    raise NotSent(
                        ConnectionClosed(f"the connection to registryd is closed: {self._closed_reason}")
                    )
                if self._retired:
                    raise NotSent(
                        ConnectionClosed(
                            "registryd answered SHUTTING_DOWN on this connection "
                            "and reads no more requests on it"
                        ),
                        retired=True,
                    )
                self._pending.append(future)
            written = 0
            try:
                # The frame in one go: the daemon wants a frame whole within its frame deadline. The
                # first send says whether any of it went out.
                written = self._sock.send(frame)
                if written < len(frame):
                    self._sock.sendall(memoryview(frame)[written:])
                return future
            except socket.timeout:
                # Part of the frame may be out: the stream cannot carry another request.
                self._shut("writing a request timed out")
                raise RequestTimeout(
                    f"could not write request {request.id} ({operation}) to registryd in time"
                ) from None
            except OSError as error:
                # The daemon closed the connection, but what it sent first may still be unread: a
                # refusal such as TOO_MANY_CONNECTIONS, or responses to earlier requests. Stop
                # writing and let the reader deliver those; it fails the rest (this one included)
                # with ConnectionClosed when it reaches the end of the stream.
                reason = f"writing failed: {error.strerror or error}"
                self._stop_writing(reason)
                if written > 0:
                    return future  # part of it went out: it is never sent again
        # Nothing went out. Unless the reader delivers an answer meant for this request (a refusal of
        # the connection, id 0), it never reached the daemon.
        try:
            outcome = future.exception(timeout=1.0)
        except concurrent.futures.TimeoutError:
            self._shut(reason)
            outcome = future.exception(timeout=0)
        if isinstance(outcome, ConnectionClosed):
            raise NotSent(outcome)
        return future

    def close(self, reason: str = "closed by the client") -> None:
        self._shut(reason)
        if threading.current_thread() is not self._reader:
            self._reader.join()
        with self._write_lock:  # no writer is inside sendall on the descriptor being closed
            self._sock.close()

    def _stop_writing(self, reason: str) -> None:
        with self._state_lock:
            if self._closed_reason is None:
                self._closed_reason = reason
        try:
            self._sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def _shut(self, reason: str, oldest_error: Optional[BaseException] = None) -> None:
        """Marks the connection closed, wakes the reader (EOF) and fails every waiting request: the
        oldest with ``oldest_error`` when given (what went wrong with its response), the others
        with :class:`ConnectionClosed`."""
        with self._state_lock:
            if self._closed_reason is None:
                self._closed_reason = reason
            waiting = list(self._pending)
            self._pending.clear()
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # already shut or closed
        if oldest_error is not None and waiting:
            self._complete(waiting.pop(0), error=oldest_error)
        for future in waiting:
            self._complete(future, error=closed_before_answer(future.request_id, future.operation, reason))

    # -- the reader thread -------------------------------------------------------------------

    def _read_loop(self) -> None:
        reason = "registryd closed the connection"
        protocol_error: Optional[ProtocolError] = None
        try:
            while True:
                header = self._receive_exactly(HEADER.size, at_frame_start=True)
                if header is None:
                    break
                length = frame_length(header, self._max_response_bytes)
                body = self._receive_exactly(length, at_frame_start=False) if length else b""
                if body is None:
                    break
                self._deliver(decode_response(body))
        except ProtocolError as error:
            reason, protocol_error = str(error), error
        except ConnectionClosed as error:
            reason = str(error)
        except OSError as error:
            if self._closed_reason is None:
                reason = f"reading failed: {error.strerror or error}"
        except BaseException as error:  # a bug here must not leave callers waiting forever
            reason = f"the client's reader failed: {type(error).__name__}"
        self._shut(self._closed_reason or reason, protocol_error)

    def _receive_exactly(self, size: int, at_frame_start: bool) -> Optional[bytes]:
        """``size`` bytes, or None at EOF between frames or once the connection is closing."""
        buffer = bytearray(size)
        view = memoryview(buffer)
        received = 0
        while received < size:
            try:
                count = self._sock.recv_into(view[received:])
            except socket.timeout:
                if self._closed_reason is not None:
                    return None
                continue  # idle: waiting for responses is not bounded here (see RequestFuture.result)
            if count == 0:
                if at_frame_start and received == 0:
                    return None
                raise ConnectionClosed("registryd closed the connection in the middle of a response")
            received += count
        return bytes(buffer)

    def _deliver(self, response: pb.Response) -> None:
        with self._state_lock:
            oldest = self._pending[0] if self._pending else None
            check_order(response, oldest.request_id if oldest else None)
            if oldest is None:
                self._refusal = response.error
            else:
                self._pending.popleft()
                if retires(response):
                    # Set before the caller hears of it: its retry goes to a new connection.
                    self._retired = True
        if oldest is None:
            self._shut(f"registryd refused the connection: {pb.ErrorCode.Name(response.error.code)}")
            return
        result, error = outcome(response, oldest.request_id, oldest.operation)
        self._complete(oldest, result, error)
        closing = closing_reason(response)
        if closing is not None:
            # The daemon answers nothing sent after it: fail those now, and let the next call open
            # a new connection rather than race the EOF.
            self._shut(closing)

    @staticmethod
    def _complete(future: RequestFuture, result: Any = None, error: Optional[BaseException] = None) -> None:
        # False when the caller cancelled it: the response is dropped.
        if not future.set_running_or_notify_cancel():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)


_USE_CLIENT_TIMEOUT: Any = object()


class Client(Operations, Settings):
    """A connection to registryd with one blocking method per operation.

    ::

        with Client() as client:                       # $REGISTRYD_SOCKET, else ./run/registryd.sock
            client.register("alice", Face.vector(24, values))
            result = client.identify(Face.vector(24, other_values))

    Args:
        socket_path: the daemon's socket; None: see :func:`resolve_socket_path`.
        client_name: sent in the hello, for the daemon's log (e.g. ``"door-kiosk/2.1"``).
        timeout: seconds to connect, to write a request and to wait for each response; None waits
            forever. A timed-out request may still be carried out.
        hello: send the hello first on each connection and check the daemon's protocol major version
            (:class:`ProtocolVersionMismatch` otherwise). Without it the daemon assumes 1.x.
        connect: connect now (errors surface here); otherwise on the first call.
        max_response_bytes: the largest response frame accepted.
        retry: a :class:`Retry` policy for the blocking calls and for connecting (e.g.
            ``Retry(attempts=5, backoff=ExponentialBackoff(0.1, 2.0))``); None (the default): a call
            fails at its first error.

    The client is thread-safe: calls from several threads are pipelined on the one connection.
    :meth:`submit` sends without waiting, for pipelining from one thread. When the daemon closes a
    connection (its idle timeout, 300 s by default; a restart; an error that closes it) the next
    call opens a new one. A request goes to a new connection only when it provably never reached the
    daemon (the connection had ended before it was written, or the write failed before a byte went
    out); a request written when its connection ends fails with :class:`ConnectionClosed` and is not
    sent again. Every method raises :class:`RegistryError` (a subclass per error code) when the daemon
    refuses the request and :class:`TransportError` when it does not answer.
    """

    def __init__(
        self,
        socket_path: Union[str, "os.PathLike[str]", None] = None,
        *,
        client_name: Optional[str] = None,
        timeout: Optional[float] = DEFAULT_TIMEOUT,
        hello: bool = True,
        connect: bool = True,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        retry: Optional[Retry] = None,
    ) -> None:
        self._configure(
            socket_path,
            client_name=client_name if client_name is not None else f"registryd-client-python/{__version__}",
            timeout=timeout,
            hello=hello,
            max_response_bytes=max_response_bytes,
            retry=retry,
        )
        self._lock = threading.Lock()
        self._connection: Optional[_Connection] = None
        # Connections replaced while their reader still ran (e.g. retired after SHUTTING_DOWN with
        # requests pending): closed once it ends, or by close().
        self._draining: List[_Connection] = []
        if connect:
            self.connect()

    # -- connection ----------------------------------------------------------------------------

    def connect(self) -> None:
        """Opens the connection (and says hello) unless one is open. Also reopens a closed client.
        With a retry policy, connecting is retried as the policy says (e.g. while the daemon
        restarts)."""
        attempt = 1
        while True:
            try:
                with self._lock:
                    self._closed = False
                    self._ensure_connection()
                return
            except RegistrydClientError as error:
                if not self._again(attempt, error, sent=False, deadline=None):
                    raise
            attempt += 1

    def close(self) -> None:
        """Closes the connection; requests still waiting fail with :class:`ConnectionClosed`. Further
        calls raise :class:`ConnectionClosed` until :meth:`connect`."""
        with self._lock:
            self._closed = True
            connection, self._connection = self._connection, None
            draining, self._draining = self._draining, []
        for old in draining:
            old.close()
        if connection is not None:
            connection.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = (
            "closed"
            if self._closed
            else ("open" if self._connection and self._connection.is_open else "idle")
        )
        return f"<registryd_client.Client {self.socket_path!r} {state}>"

    def _ensure_connection(self) -> _Connection:
        # Called with self._lock held: one thread opens, the others wait for it and share it.
        connection = self._connection
        if connection is not None and connection.is_open:
            return connection
        if connection is not None:
            # The daemon closed it (idle timeout, restart) or retired it. A reader still running
            # delivers what is still owed to requests pending there; the others are reaped.
            self._connection = None
            self._draining.append(connection)
        for old in [old for old in self._draining if not old.reader_alive]:
            self._draining.remove(old)
            old.close()
        connection = _Connection(
            self.socket_path, self.timeout, self.max_response_bytes, number=self.connections_opened + 1
        )
        self.connections_opened += 1
        self.server = None
        if self._send_hello:
            try:
                request, name = hello_request(self.client_name)
                request.id = self._ids.next()
                self.server = check_hello(connection.submit(request, name).result(self.timeout))
            except NotSent as not_sent:
                connection.close()
                raise not_sent.error from None
            except BaseException as error:
                connection.close(str(error))
                raise
        self._connection = connection
        return connection

    # -- generic -------------------------------------------------------------------------------

    def submit(self, operation: Message) -> RequestFuture:
        """Sends one request without waiting for its response.

        ``operation`` is an operation message (see :mod:`registryd_client.operations`, or any
        ``registry_pb2`` request message such as ``AuditQueryRequest``) or a whole ``Request``; the
        client assigns the id. Raises :class:`ConnectionFailed` when no connection can be opened,
        :class:`ConnectionClosed` after :meth:`close`, and :class:`RequestTimeout` when the frame
        cannot be written in time; when the daemon has closed the connection, the future fails. The
        retry policy does not apply here: see :meth:`send`.
        """
        request, name = as_request(operation)
        return self._submit(request, name)

    def _submit(self, request: pb.Request, name: str) -> RequestFuture:
        opened_before = self.connections_opened
        resends = 0
        while True:
            with self._lock:
                if self._closed:
                    raise ConnectionClosed("the client is closed")
                connection = self._ensure_connection()
                request.id = self._ids.next()
            try:
                return connection.submit(request, name)
            except NotSent as not_sent:
                if not send_elsewhere(not_sent, connection.number, opened_before, resends):
                    raise not_sent.error from None
            resends += 1

    def submit_all(self, operations: Iterable[Message]) -> Sequence[RequestFuture]:
        """Submits each operation in turn (all in flight at once); the futures in the same order."""
        return [self.submit(operation) for operation in operations]

    def send(self, operation: Message, *, timeout: Optional[float] = _USE_CLIENT_TIMEOUT) -> Any:
        """Sends one request and returns its result message (e.g. ``registry_pb2.AuditQueryResult``
        for an ``AuditQueryRequest``). ``timeout`` overrides the client's for this call.

        With a retry policy, a retryable failure is tried again (with a new request id) until the
        policy's attempts are spent; ``timeout`` then bounds the call as a whole: each attempt waits
        for what is left of it, no wait between attempts runs past it, and the last attempt's error
        is raised."""
        call_timeout: Optional[float] = self.timeout if timeout is _USE_CLIENT_TIMEOUT else timeout
        if self.retry is None:
            return self.submit(operation).result(call_timeout)
        request, name = as_request(operation)
        deadline = None if call_timeout is None else time.monotonic() + call_timeout
        attempt = 1
        while True:
            sent = False
            try:
                future = self._submit(request, name)
                sent = True
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                return future.result(remaining)
            except RegistrydClientError as error:
                if not self._again(attempt, error, sent=sent, deadline=deadline):
                    raise
            attempt += 1

    def _again(
        self, attempt: int, error: RegistrydClientError, *, sent: bool, deadline: Optional[float]
    ) -> bool:
        """Whether the policy tries the failed ``attempt`` (1 for the first) again; if so, after its
        wait. ``sent``: whether the request may have reached the daemon."""
        wait = retry_wait(
            self.retry, attempt, error, sent=sent, closed=self._closed, now=time.monotonic(), deadline=deadline
        )
        if wait is None:
            return False
        assert self.retry is not None
        self.retry.sleep(wait)
        return True

    def hello(self, client_name: Optional[str] = None) -> pb.HelloResult:
        """Exchanges protocol versions on the current connection (a new client does it on every
        connection it opens unless ``hello=False``; if sent, it must be the connection's first
        request) and returns the daemon's ``HelloResult``, also kept as :attr:`server`. A daemon of
        another protocol major version: :class:`ProtocolVersionMismatch`, and the connection is
        closed."""
        request, name = hello_request(self.client_name if client_name is None else client_name)
        future = self._submit(request, name)
        try:
            self.server = check_hello(future.result(self.timeout))
        except ProtocolVersionMismatch:
            with self._lock:
                connection = self._connection
            if connection is not None:
                connection.close("protocol version mismatch")
            raise
        return self.server

    # -- page iterators ----------------------------------------------------------------------------

    def _walk(self, pages: Pages[Any]) -> Iterator[Any]:
        # Client.iter_identifiers, iter_export, iter_liveness_profiles (see _methods.Paged).
        request: Optional[Message] = pages.first
        while request is not None:
            result = self.send(request)
            yield from pages.items(result)
            request = pages.following(request, result)
