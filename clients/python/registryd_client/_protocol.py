"""What the blocking client (:mod:`registryd_client.client`) and the asyncio client
(:mod:`registryd_client.aio`) share below their I/O: the socket convention, framing (PROTOCOL.md §2),
request ids, turning a request message into a ``Request``, matching a response to the oldest waiting
request and turning it into a result or an exception, the hello's version check, the rule for sending
a request on a new connection, and the retry policy's decision. Nothing here reads or writes a socket.
"""

from __future__ import annotations

import itertools
import os
import struct
from typing import Any, Dict, Mapping, Optional, Tuple, Union, cast

from google.protobuf.message import DecodeError, Message

from . import operations as ops
from . import registry_pb2 as pb
from .errors import (
    ConnectionClosed,
    ConnectionFailed,
    ProtocolError,
    ProtocolVersionMismatch,
    RegistrydClientError,
    RegistryError,
)
from .retry import Retry

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

HEADER = struct.Struct(">I")
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


def connection_failed(path: str, error: OSError) -> ConnectionFailed:
    return ConnectionFailed(path, error.strerror or str(error), errno=error.errno)


class Settings:
    """What both clients are made with, and their state that does not depend on their I/O."""

    def _configure(
        self,
        socket_path: Union[str, "os.PathLike[str]", None],
        *,
        client_name: str,
        timeout: Optional[float],
        hello: bool,
        max_response_bytes: int,
        retry: Optional[Retry],
    ) -> None:
        if timeout is not None and timeout <= 0:
            raise ValueError("timeout must be positive, or None to wait forever")
        self.socket_path = resolve_socket_path(socket_path)
        self.client_name = client_name
        self.timeout = timeout
        self.max_response_bytes = max_response_bytes
        #: The retry policy (None: no retry).
        self.retry = retry
        self._send_hello = hello
        self._ids = RequestIds()
        self._closed = False
        #: The daemon's hello answer on the current connection (None before it, or without hello):
        #: ``server_version``, ``protocol_major``, ``protocol_minor``.
        self.server: Optional[pb.HelloResult] = None
        #: How many connections this client has opened (1 unless the daemon closed one).
        self.connections_opened = 0


# -- requests ------------------------------------------------------------------------------------

# Each Request.operation case is answered by the Response.result case of the same name (and, except
# for hello, the same field number), or by an error.
_OPERATION_BY_MESSAGE: Dict[str, str] = {
    field.message_type.full_name: field.name
    for field in pb.Request.DESCRIPTOR.oneofs_by_name["operation"].fields
    if field.message_type is not None
}


def as_request(operation: Message) -> Tuple[pb.Request, str]:
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


def encode_frame(request: pb.Request) -> bytes:
    """The request as one frame: its length, big-endian, then its bytes (PROTOCOL.md §2)."""
    body = request.SerializeToString()
    return HEADER.pack(len(body)) + body


class RequestIds:
    """Request ids in sending order: 1, 2, ..., never 0 (the daemon uses 0 for what it cannot
    attribute to a request)."""

    def __init__(self) -> None:
        self._counter = itertools.count()

    def next(self) -> int:
        return next(self._counter) % _MAX_ID + 1


# -- responses -----------------------------------------------------------------------------------

# The errors after which the daemon closes the connection (PROTOCOL.md §5).
CLOSING_CODES = frozenset(
    {pb.ERROR_CODE_FRAME_TOO_LARGE, pb.ERROR_CODE_UNSUPPORTED_VERSION, pb.ERROR_CODE_TOO_MANY_CONNECTIONS}
)


def frame_length(header: bytes, max_response_bytes: int) -> int:
    """The length a response frame's header announces; :class:`ProtocolError` above the limit."""
    (length,) = HEADER.unpack(header)
    if length > max_response_bytes:
        raise ProtocolError(
            f"registryd sent a {length}-byte response, above the client's limit of "
            f"{max_response_bytes} bytes (max_response_bytes)"
        )
    return cast(int, length)


def decode_response(body: bytes) -> pb.Response:
    response = pb.Response()
    try:
        response.ParseFromString(body)
    except DecodeError:
        raise ProtocolError("registryd sent a frame that does not decode as a Response") from None
    return response


def check_order(response: pb.Response, oldest_id: Optional[int]) -> None:
    """Raises :class:`ProtocolError` unless ``response`` may answer the oldest waiting request (its
    id, or None when no request waits). With none waiting, only a refusal of the connection itself
    (id 0, a closing code: TOO_MANY_CONNECTIONS is sent as soon as the daemon accepts) may come."""
    if oldest_id is None:
        if not (is_error(response) and response.id == 0 and response.error.code in CLOSING_CODES):
            raise ProtocolError(f"registryd sent a response (id {response.id}) with no request waiting")
    elif response.id not in (0, oldest_id):
        # Id 0 answers what the daemon could not attribute to a request (a connection-level error
        # such as FRAME_TOO_LARGE or TOO_MANY_CONNECTIONS): it belongs to the oldest.
        raise ProtocolError(
            f"registryd answered request {response.id} while request {oldest_id} was the oldest unanswered"
        )


def is_error(response: pb.Response) -> bool:
    return bool(response.WhichOneof("result") == "error")


def retires(response: pb.Response) -> bool:
    """After SHUTTING_DOWN the daemon reads no more requests on the connection: the requests pending
    there get their answers, new ones go to a new connection."""
    return is_error(response) and bool(response.error.code == pb.ERROR_CODE_SHUTTING_DOWN)


def closing_reason(response: pb.Response) -> Optional[str]:
    """Why the connection is over after this response (the daemon closes it after these codes and
    answers nothing sent after them), or None."""
    if is_error(response) and response.error.code in CLOSING_CODES:
        return f"registryd closed the connection after {pb.ErrorCode.Name(response.error.code)}"
    return None


def outcome(response: pb.Response, request_id: int, operation: str) -> Tuple[Any, Optional[RegistrydClientError]]:
    """The result message (``getattr(response, operation)``) and None, or None and the exception
    the request fails with: the :class:`RegistryError` subclass of the daemon's code, or a
    :class:`ProtocolError` for a result of another operation or none this client knows."""
    case = response.WhichOneof("result")
    if case == "error":
        return None, RegistryError.from_proto(response.error, request_id)
    if case is None:
        return None, ProtocolError(f"registryd answered request {request_id} with no known result")
    if case != operation:
        return None, ProtocolError(
            f"registryd answered request {request_id} ({operation}) with a {case} result"
        )
    return getattr(response, case), None


def refusal_error(refusal: pb.Error) -> RegistryError:
    """A refusal of the connection received before any request (e.g. TOO_MANY_CONNECTIONS)."""
    return RegistryError.from_proto(refusal)


def closed_before_answer(request_id: int, operation: str, reason: str) -> ConnectionClosed:
    return ConnectionClosed(
        f"the connection to registryd closed before request {request_id} ({operation}) was answered: {reason}"
    )


# -- the hello -----------------------------------------------------------------------------------


def hello_request(client_name: str) -> Tuple[pb.Request, str]:
    return as_request(ops.hello(client_name))


def check_hello(hello: pb.HelloResult) -> pb.HelloResult:
    """The daemon's hello answer, when it speaks this client's protocol major version;
    :class:`ProtocolVersionMismatch` otherwise (the caller closes the connection)."""
    if hello.protocol_major != ops.PROTOCOL_MAJOR:
        raise ProtocolVersionMismatch(
            ops.PROTOCOL_MAJOR, hello.protocol_major, hello.protocol_minor, hello.server_version
        )
    return hello


# -- sending again ---------------------------------------------------------------------------------


class NotSent(Exception):
    """The request provably never reached the daemon: its connection had ended (or been retired)
    before it was written, or the write failed before a byte of it went out. ``error`` is what the
    caller is told if the request is not sent elsewhere."""

    def __init__(self, error: RegistrydClientError, *, retired: bool = False) -> None:
        super().__init__(str(error))
        self.error = error
        self.retired = retired


def send_elsewhere(not_sent: NotSent, connection_number: int, opened_before: int, resends: int) -> bool:
    """Whether a request that never reached the daemon goes to a new connection: when the connection
    it was meant for was open before this call (the daemon closed it while idle, and the reader had
    not seen it yet) or was retired after SHUTTING_DOWN; not when a connection opened for this very
    call failed the same way (that is reported), and at most twice."""
    return resends < 2 and (connection_number <= opened_before or not_sent.retired)


def retry_wait(
    retry: Optional[Retry],
    attempt: int,
    error: RegistrydClientError,
    *,
    sent: bool,
    closed: bool,
    now: float,
    deadline: Optional[float],
) -> Optional[float]:
    """The seconds to wait before trying the failed ``attempt`` (1 for the first) again, or None
    when the policy does not try it again: no policy, its attempts spent, the client closed, an
    error that is not safe or useful to retry (``sent``: the request may have reached the daemon,
    see :meth:`Retry.retryable`), or a wait that would end past the call's ``deadline``."""
    if retry is None or attempt >= retry.attempts or closed or not retry.retryable(error, sent):
        return None
    wait = retry.backoff.compute(attempt)
    if deadline is not None and now + wait > deadline:
        return None
    return wait
