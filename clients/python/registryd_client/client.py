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
import itertools
import os
import socket
import struct
import threading
import time
from typing import Any, Deque, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union, cast

from google.protobuf.message import DecodeError, Message

from . import operations as ops
from . import registry_pb2 as pb
from ._version import __version__
from .errors import (
    ConnectionClosed,
    ConnectionFailed,
    ProtocolError,
    ProtocolVersionMismatch,
    RegistrydClientError,
    RegistryError,
    RequestTimeout,
)
from .faces import FaceLike, Template
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

#: A daemon started from the repository (``tools/registryd``) listens here, relative to its
#: working directory; registryctl uses the same default.
DEFAULT_SOCKET_PATH = "./run/registryd.sock"
#: The system service's socket (systemd/registryd.socket).
SYSTEM_SOCKET_PATH = "/run/registryd/registryd.sock"
#: Names the socket when no path is given (as for registryctl).
SOCKET_ENVIRONMENT_VARIABLE = "REGISTRYD_SOCKET"
#: Seconds to connect, to write a request and to wait for its response.
DEFAULT_TIMEOUT = 30.0
#: The largest response accepted. Responses can be much larger than the daemon's 4 MiB request limit
#: (export pages, get_templates with data); this matches the Swift client.
DEFAULT_MAX_RESPONSE_BYTES = 256 << 20

_HEADER = struct.Struct(">I")
_MAX_ID = 2**64 - 1


def resolve_socket_path(
    socket_path: Union[str, "os.PathLike[str]", None] = None, environ: Optional[Mapping[str, str]] = None
) -> str:
    """The socket to connect to, as registryctl chooses it: ``socket_path`` when given, else
    ``$REGISTRYD_SOCKET`` when set and not empty, else ``./run/registryd.sock`` (relative to the
    working directory), except that the system service's ``/run/registryd/registryd.sock`` is used
    when only that one exists."""
    if socket_path is not None:
        return os.fspath(socket_path)
    environment = os.environ if environ is None else environ
    from_environment = environment.get(SOCKET_ENVIRONMENT_VARIABLE, "")
    if from_environment:
        return from_environment
    if not os.path.exists(DEFAULT_SOCKET_PATH) and os.path.exists(SYSTEM_SOCKET_PATH):
        return SYSTEM_SOCKET_PATH
    return DEFAULT_SOCKET_PATH


# Each Request.operation case is answered by the Response.result case of the same name (and, except
# for hello, the same field number), or by an error.
_OPERATION_BY_MESSAGE: Dict[str, str] = {
    field.message_type.full_name: field.name
    for field in pb.Request.DESCRIPTOR.oneofs_by_name["operation"].fields
    if field.message_type is not None
}


# The errors after which the daemon closes the connection (PROTOCOL.md §5).
_CLOSING_CODES = frozenset(
    {pb.ERROR_CODE_FRAME_TOO_LARGE, pb.ERROR_CODE_UNSUPPORTED_VERSION, pb.ERROR_CODE_TOO_MANY_CONNECTIONS}
)


def _as_request(operation: Message) -> Tuple[pb.Request, str]:
    """A fresh Request (the caller's message is left alone) carrying ``operation``, and the case's
    name. ``operation`` is an operation message (``pb.IdentifyRequest()``, ...) or a whole Request
    with its operation set (its id is replaced)."""
    if isinstance(operation, pb.Request):
        name = operation.WhichOneof("operation")
        if name is None:
            raise ValueError("the Request has no operation set")
        request = pb.Request()
        request.CopyFrom(operation)
        return request, name
    name = (
        _OPERATION_BY_MESSAGE.get(operation.DESCRIPTOR.full_name) if isinstance(operation, Message) else None
    )
    if name is None:
        raise TypeError(f"{type(operation).__name__} is not a registryd request operation")
    # The constructor sets the oneof case even for an empty message (ListGalleriesRequest()), which
    # a CopyFrom into the field would not; `import` is a keyword, hence the dict.
    return pb.Request(**cast(Dict[str, Any], {name: operation})), name


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


class _NotSent(Exception):
    """Raised by :meth:`_Connection.submit` when the request provably never reached the daemon: the
    connection had ended (or been retired) before it was written, or the write failed before a byte
    of it went out. ``error`` is what the caller is told if the request is not sent elsewhere."""

    def __init__(self, error: RegistrydClientError, *, retired: bool = False) -> None:
        super().__init__(str(error))
        self.error = error
        self.retired = retired


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
            raise ConnectionFailed(path, error.strerror or str(error), errno=error.errno) from None
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
        """Writes the request; its future completes with the response. Raises :class:`_NotSent`
        when the request provably never reached the daemon."""
        body = request.SerializeToString()
        frame = _HEADER.pack(len(body)) + body
        future = RequestFuture(request.id, operation)
        with self._write_lock:
            with self._state_lock:
                if self._closed_reason is not None:
                    if self._refusal is not None:
                        raise _NotSent(RegistryError.from_proto(self._refusal))
                    raise _NotSent(
                        ConnectionClosed(f"the connection to registryd is closed: {self._closed_reason}")
                    )
                if self._retired:
                    raise _NotSent(
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
            raise _NotSent(outcome)
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
            self._complete(
                future,
                error=ConnectionClosed(
                    f"the connection to registryd closed before request {future.request_id} "
                    f"({future.operation}) was answered: {reason}"
                ),
            )

    # -- the reader thread -------------------------------------------------------------------

    def _read_loop(self) -> None:
        reason = "registryd closed the connection"
        protocol_error: Optional[ProtocolError] = None
        try:
            while True:
                header = self._receive_exactly(_HEADER.size, at_frame_start=True)
                if header is None:
                    break
                (length,) = _HEADER.unpack(header)
                if length > self._max_response_bytes:
                    raise ProtocolError(
                        f"registryd sent a {length}-byte response, above the client's limit of "
                        f"{self._max_response_bytes} bytes (max_response_bytes)"
                    )
                body = self._receive_exactly(length, at_frame_start=False) if length else b""
                if body is None:
                    break
                response = pb.Response()
                try:
                    response.ParseFromString(body)
                except DecodeError:
                    raise ProtocolError("registryd sent a frame that does not decode as a Response") from None
                self._deliver(response)
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
        case = response.WhichOneof("result")
        with self._state_lock:
            oldest = self._pending[0] if self._pending else None
            if oldest is None:
                # Only a refusal of the connection itself may come before any request.
                if not (response.id == 0 and case == "error" and response.error.code in _CLOSING_CODES):
                    raise ProtocolError(
                        f"registryd sent a response (id {response.id}) with no request waiting"
                    )
                self._refusal = response.error
            elif response.id not in (0, oldest.request_id):
                # Id 0 answers what the daemon could not attribute to a request (a connection-level
                # error such as FRAME_TOO_LARGE or TOO_MANY_CONNECTIONS): it belongs to the oldest.
                raise ProtocolError(
                    f"registryd answered request {response.id} while request {oldest.request_id} "
                    "was the oldest unanswered"
                )
            else:
                self._pending.popleft()
                if case == "error" and response.error.code == pb.ERROR_CODE_SHUTTING_DOWN:
                    # Set before the caller hears of it: its retry goes to a new connection.
                    self._retired = True
        if oldest is None:
            self._shut(f"registryd refused the connection: {pb.ErrorCode.Name(response.error.code)}")
            return
        if case == "error":
            self._complete(oldest, error=RegistryError.from_proto(response.error, oldest.request_id))
            if response.error.code in _CLOSING_CODES:
                # The daemon closes the connection after these and answers nothing sent after them:
                # fail those now, and let the next call open a new connection rather than race the EOF.
                self._shut(f"registryd closed the connection after {pb.ErrorCode.Name(response.error.code)}")
        elif case is None:
            self._complete(
                oldest,
                error=ProtocolError(f"registryd answered request {oldest.request_id} with no known result"),
            )
        elif case != oldest.operation:
            self._complete(
                oldest,
                error=ProtocolError(
                    f"registryd answered request {oldest.request_id} ({oldest.operation}) "
                    f"with a {case} result"
                ),
            )
        else:
            self._complete(oldest, result=getattr(response, case))

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


class Client:
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
        if timeout is not None and timeout <= 0:
            raise ValueError("timeout must be positive, or None to wait forever")
        self.socket_path = resolve_socket_path(socket_path)
        self.client_name = (
            client_name if client_name is not None else f"registryd-client-python/{__version__}"
        )
        self.timeout = timeout
        self.max_response_bytes = max_response_bytes
        #: The retry policy (None: no retry).
        self.retry = retry
        self._send_hello = hello
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._connection: Optional[_Connection] = None
        # Connections replaced while their reader still ran (e.g. retired after SHUTTING_DOWN with
        # requests pending): closed once it ends, or by close().
        self._draining: List[_Connection] = []
        self._closed = False
        #: The daemon's hello answer on the current connection (None before it, or without hello).
        self.server: Optional[pb.HelloResult] = None
        #: How many connections this client has opened (1 unless the daemon closed one).
        self.connections_opened = 0
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
                request, name = _as_request(ops.hello(self.client_name))
                request.id = self._next_id()
                hello = cast(pb.HelloResult, connection.submit(request, name).result(self.timeout))
            except _NotSent as not_sent:
                connection.close()
                raise not_sent.error from None
            except BaseException:
                connection.close()
                raise
            if hello.protocol_major != ops.PROTOCOL_MAJOR:
                connection.close("protocol version mismatch")
                raise ProtocolVersionMismatch(
                    ops.PROTOCOL_MAJOR, hello.protocol_major, hello.protocol_minor, hello.server_version
                )
            self.server = hello
        self._connection = connection
        return connection

    def _next_id(self) -> int:
        # Never 0: the daemon uses 0 for what it cannot attribute to a request.
        return next(self._ids) % _MAX_ID + 1

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
        request, name = _as_request(operation)
        return self._submit(request, name)

    def _submit(self, request: pb.Request, name: str) -> RequestFuture:
        opened_before = self.connections_opened
        resends = 0
        while True:
            with self._lock:
                if self._closed:
                    raise ConnectionClosed("the client is closed")
                connection = self._ensure_connection()
                request.id = self._next_id()
            try:
                return connection.submit(request, name)
            except _NotSent as not_sent:
                # The request never reached the daemon. If the connection was open before this call
                # (the daemon closed it while idle, and the reader had not seen it yet) or was
                # retired, it goes to a new one; a new connection failing the same way is reported.
                if resends == 2 or (connection.number > opened_before and not not_sent.retired):
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
        request, name = _as_request(operation)
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
        retry = self.retry
        if retry is None or attempt >= retry.attempts or self._closed or not retry.retryable(error, sent):
            return False
        wait = retry.backoff.compute(attempt)
        if deadline is not None and time.monotonic() + wait > deadline:
            return False
        retry.sleep(wait)
        return True

    # -- operations ----------------------------------------------------------------------------

    def register(
        self, identifier: str, face: FaceLike, *, gallery: str = "", force: bool = False
    ) -> pb.RegisterResult:
        """Stores the face's templates under ``identifier``. Raises :class:`SimilarFaceRegistered`
        or :class:`FaceMismatch` (with ``decisive`` and ``findings``) when the checks refuse it."""
        return cast(
            pb.RegisterResult, self.send(ops.register(identifier, face, gallery=gallery, force=force))
        )

    def identify(
        self, face: FaceLike, *, gallery: str = "", safe: bool = True, auto_enrol: bool = True, limit: int = 0
    ) -> pb.IdentifyResult:
        """The identifiers matching the face, best first (``matches``; empty when none)."""
        return cast(
            pb.IdentifyResult,
            self.send(ops.identify(face, gallery=gallery, safe=safe, auto_enrol=auto_enrol, limit=limit)),
        )

    def authenticate(
        self, identifier: str, face: FaceLike, *, gallery: str = "", auto_enrol: bool = True
    ) -> pb.AuthenticateResult:
        """Whether the face is ``identifier`` (``authenticated``, ``score``). Raises
        :class:`IdentifierNotRegistered` when the gallery does not hold the identifier."""
        return cast(
            pb.AuthenticateResult,
            self.send(ops.authenticate(identifier, face, gallery=gallery, auto_enrol=auto_enrol)),
        )

    def list_galleries(self) -> pb.ListGalleriesResult:
        return cast(pb.ListGalleriesResult, self.send(ops.list_galleries()))

    def list_algorithms(self) -> pb.ListAlgorithmsResult:
        return cast(pb.ListAlgorithmsResult, self.send(ops.list_algorithms()))

    def list_identifiers(
        self, *, gallery: str = "", after: str = "", limit: int = 0
    ) -> pb.ListIdentifiersResult:
        return cast(
            pb.ListIdentifiersResult,
            self.send(ops.list_identifiers(gallery=gallery, after=after, limit=limit)),
        )

    def get_templates(
        self, identifier: str, *, gallery: str = "", include_data: bool = False
    ) -> pb.GetTemplatesResult:
        return cast(
            pb.GetTemplatesResult,
            self.send(ops.get_templates(identifier, gallery=gallery, include_data=include_data)),
        )

    def delete_template(self, template_id: int, *, gallery: str = "") -> pb.DeleteTemplateResult:
        return cast(pb.DeleteTemplateResult, self.send(ops.delete_template(template_id, gallery=gallery)))

    def delete_identifier(self, identifier: str, *, gallery: str = "") -> pb.DeleteIdentifierResult:
        """Erases the identifier's templates in every registry (``templates_deleted``; 0 is no error)."""
        return cast(pb.DeleteIdentifierResult, self.send(ops.delete_identifier(identifier, gallery=gallery)))

    def delete_gallery(self, gallery: str) -> pb.DeleteGalleryResult:
        return cast(pb.DeleteGalleryResult, self.send(ops.delete_gallery(gallery)))

    def define_gallery(
        self,
        gallery: str,
        registries: Iterable[ops.RegistrySpecLike],
        *,
        liveness: Optional[pb.LivenessPolicy] = None,
        liveness_k: Optional[float] = None,
    ) -> pb.Gallery:
        """Creates or reconfigures a gallery; returns it as now defined. ``registries`` in priority
        order: algorithm ids or :func:`operations.registry_spec` results."""
        return cast(
            pb.Gallery,
            self.send(ops.define_gallery(gallery, registries, liveness=liveness, liveness_k=liveness_k)),
        )

    def migration_status(self, *, gallery: str = "") -> pb.MigrationStatusResult:
        return cast(pb.MigrationStatusResult, self.send(ops.migration_status(gallery=gallery)))

    def stats(self) -> pb.StatsResult:
        return cast(pb.StatsResult, self.send(ops.stats()))

    def export(self, *, gallery: str = "", after_template_id: int = 0, limit: int = 0) -> pb.ExportResult:
        return cast(
            pb.ExportResult,
            self.send(ops.export(gallery=gallery, after_template_id=after_template_id, limit=limit)),
        )

    def import_templates(
        self, items: Sequence[Tuple[str, Union[Template, pb.Template]]], *, gallery: str = ""
    ) -> pb.ImportResult:
        return cast(pb.ImportResult, self.send(ops.import_templates(items, gallery=gallery)))

    def backup(self, directory: str) -> pb.BackupResult:
        return cast(pb.BackupResult, self.send(ops.backup(directory)))

    def verify(self) -> pb.VerifyResult:
        return cast(pb.VerifyResult, self.send(ops.verify()))
