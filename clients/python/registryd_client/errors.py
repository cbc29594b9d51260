"""The exceptions this package raises.

Two families, both under :class:`RegistrydClientError`:

* :class:`RegistryError`: the daemon answered the request with an ``Error`` (PROTOCOL.md §5). It
  carries the code's name, the daemon's message and the structured details; one subclass per
  ``ErrorCode`` (e.g. :class:`SimilarFaceRegistered`, :class:`InvalidTemplate`) so callers can
  ``except`` the cases they handle.
* :class:`TransportError`: no answer came (the daemon is unreachable, closed the connection, did
  not answer in time, or sent something this client cannot make sense of).

Templates are biometric data. Nothing here ever holds or prints template values: the daemon's
messages never contain them (PROTOCOL.md), and the client's own messages name only operations,
request ids, sizes and socket paths.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple, Type, cast

from . import registry_pb2 as pb

__all__ = [
    "RegistrydClientError",
    "TransportError",
    "ConnectionFailed",
    "ConnectionClosed",
    "RequestTimeout",
    "ProtocolError",
    "ProtocolVersionMismatch",
    "Finding",
    "TemplateProblem",
    "RegistryError",
    "RETRYABLE_CODES",
    "RegistrationRefused",
    "SimilarFaceRegistered",
    "FaceMismatch",
    "IdentifierNotRegistered",
    "IncompatibleTemplates",
    "InvalidTemplate",
    "UnknownAlgorithm",
    "UnknownGallery",
    "QualityTooLow",
    "LivenessFailed",
    "PermissionDenied",
    "MalformedRequest",
    "FrameTooLarge",
    "UnsupportedVersion",
    "StorageFull",
    "ShuttingDown",
    "InternalError",
    "TooManyConnections",
    "FleetUnavailable",
]


class RegistrydClientError(Exception):
    """The base of every exception this package raises."""


# ---------------------------------------------------------------------------------------------
# No answer from the daemon


class TransportError(RegistrydClientError):
    """The daemon did not answer the request (as opposed to answering with an error)."""


class ConnectionFailed(TransportError):
    """No daemon accepted a connection on the socket. ``errno`` is the system's error number when
    there is one (``errno.ENOENT``: no socket; ``errno.ECONNREFUSED``: nothing listening;
    ``errno.EACCES``: no permission), None for a timeout."""

    def __init__(self, socket_path: str, reason: str, *, errno: Optional[int] = None) -> None:
        super().__init__(f"cannot reach registryd at {socket_path}: {reason}")
        self.socket_path = socket_path
        self.reason = reason
        self.errno = errno


class ConnectionClosed(TransportError):
    """The connection ended before the response arrived.

    When the daemon closed it, a request without a response was not carried out (PROTOCOL.md §3).
    When the client closed it (``Client.close()``, or a failed write), a write may or may not have
    been stored: check with ``get_templates`` or ``list_identifiers``.
    """


class RequestTimeout(TransportError, TimeoutError):
    """No response within the timeout.

    The request may still be carried out. Its response, when it comes, is discarded; requests sent
    after it on the same connection wait behind it (responses come in request order).
    """


class ProtocolError(TransportError):
    """The daemon sent something this client cannot accept (an undecodable frame, a response out of
    order, a result of another operation, an unknown result case). The connection is closed when
    the stream can no longer be trusted."""


class ProtocolVersionMismatch(ProtocolError):
    """The daemon's hello reported a protocol major version this client does not speak."""

    def __init__(
        self, expected_major: int, server_major: int, server_minor: int, server_version: str
    ) -> None:
        super().__init__(
            f"registryd speaks protocol {server_major}.{server_minor} "
            f"(server {server_version or 'unknown'}); "
            f"this client speaks major version {expected_major} only"
        )
        self.expected_major = expected_major
        self.server_major = server_major
        self.server_minor = server_minor
        self.server_version = server_version


# ---------------------------------------------------------------------------------------------
# Structured error details


@dataclass(frozen=True)
class Finding:
    """What the register checks found in one registry (``RegistrationFinding``).

    ``kind`` is ``"similar_face"`` (another identifier's template reached the identification
    threshold: ``identifier`` names the best-scoring one and ``score`` is its score) or
    ``"face_mismatch"`` (the identifier's own templates in that registry did not reach the
    authentication threshold: ``score`` is the best of them and ``identifier`` is None).
    """

    algorithm: int
    kind: str
    score: float
    identifier: Optional[str] = None

    @classmethod
    def from_proto(cls, finding: pb.RegistrationFinding) -> Finding:
        kind = finding.WhichOneof("kind")
        if kind == "similar_face":
            return cls(finding.algorithm, kind, finding.similar_face.score, finding.similar_face.identifier)
        if kind == "face_mismatch":
            return cls(finding.algorithm, kind, finding.face_mismatch.best_score)
        # A kind added by a later protocol version: keep the algorithm, say what is known.
        return cls(finding.algorithm, kind or "unknown", 0.0)


@dataclass(frozen=True)
class TemplateProblem:
    """What is wrong with a template (``INVALID_TEMPLATE``; PROTOCOL.md §5, "Template problems").

    ``kind`` is the ``TemplateProblem.Kind`` name without its prefix, e.g. ``"WRONG_DIMENSION"``.
    Which of the other fields mean something depends on the kind: ``expected``/``actual`` (wrong
    dimension, too few landmarks), ``index`` (non-finite value), ``norm`` (not normalised),
    ``landmark`` (unknown or duplicate landmark name); the others are 0 or empty.
    """

    algorithm: int
    kind: str
    expected: int = 0
    actual: int = 0
    index: int = 0
    norm: float = 0.0
    landmark: str = ""

    @classmethod
    def from_proto(cls, problem: pb.TemplateProblem) -> TemplateProblem:
        return cls(
            algorithm=problem.algorithm,
            kind=_enum_name(pb.TemplateProblem.Kind, problem.kind, "KIND_"),
            expected=problem.expected,
            actual=problem.actual,
            index=problem.index,
            norm=problem.norm,
            landmark=problem.landmark,
        )


def _enum_name(enum: Any, value: int, prefix: str) -> str:
    """The value's name without its prefix, or ``UNKNOWN_<value>`` for a value this client's schema
    does not have (a newer daemon)."""
    try:
        name: str = enum.Name(value)
    except ValueError:
        return f"UNKNOWN_{value}"
    return name[len(prefix) :] if name.startswith(prefix) else name


# ---------------------------------------------------------------------------------------------
# The daemon's errors

#: The error codes after which the same request, unchanged, may succeed later (PROTOCOL.md §5): the
#: request was not carried out (``SHUTTING_DOWN``, ``TOO_MANY_CONNECTIONS``, ``FLEET_UNAVAILABLE``) or
#: stored nothing and waits for space (``STORAGE_FULL``). :attr:`RegistryError.retryable` and a
#: ``Retry`` policy use it.
RETRYABLE_CODES = frozenset(
    {
        pb.ERROR_CODE_SHUTTING_DOWN,
        pb.ERROR_CODE_TOO_MANY_CONNECTIONS,
        pb.ERROR_CODE_STORAGE_FULL,
        pb.ERROR_CODE_FLEET_UNAVAILABLE,
    }
)


class RegistryError(RegistrydClientError):
    """The daemon refused or failed the request (``Response.error``).

    Attributes:
        code: the ``ErrorCode`` value (an int; see ``registry_pb2.ErrorCode``).
        code_name: its name without the ``ERROR_CODE_`` prefix, e.g. ``"SIMILAR_FACE_REGISTERED"``.
        message: the daemon's message, for people (it may change between versions; act on the code
            and the details).
        request_id: the id of the request this answers (0 for a connection-level error).
        decisive, findings: ``SIMILAR_FACE_REGISTERED`` and ``FACE_MISMATCH``: the finding that
            decided and every finding, in registry priority order (None and [] otherwise).
        template_problem: ``INVALID_TEMPLATE``: what is wrong with which template.
        quality_too_low: ``QUALITY_TOO_LOW``: the ``registry_pb2.QualityTooLow`` details.
        liveness: ``LIVENESS_FAILED``: the ``registry_pb2.LivenessVerdict``.
        error: the ``registry_pb2.Error`` message as received.
        retryable: whether the same request, unchanged, may succeed later (:data:`RETRYABLE_CODES`).

    A request that failed stored nothing. The connection stays usable except after
    ``FRAME_TOO_LARGE``, ``UNSUPPORTED_VERSION`` and ``TOO_MANY_CONNECTIONS``.
    """

    #: The ``ErrorCode`` this class stands for (None for the base class).
    CODE: Optional[int] = None

    def __init__(
        self, code: int, message: str, *, request_id: int = 0, error: Optional[pb.Error] = None
    ) -> None:
        self.code = code
        self.code_name = _enum_name(pb.ErrorCode, code, "ERROR_CODE_")
        self.message = message
        self.request_id = request_id
        self.error = error if error is not None else pb.Error(code=cast(Any, code), message=message)
        detail = self.error
        self.decisive: Optional[Finding] = (
            Finding.from_proto(detail.decisive) if detail.HasField("decisive") else None
        )
        self.findings: List[Finding] = [Finding.from_proto(f) for f in detail.findings]
        self.template_problem: Optional[TemplateProblem] = (
            TemplateProblem.from_proto(detail.template_problem)
            if detail.HasField("template_problem")
            else None
        )
        self.quality_too_low: Optional[pb.QualityTooLow] = (
            detail.quality_too_low if detail.HasField("quality_too_low") else None
        )
        self.liveness: Optional[pb.LivenessVerdict] = detail.liveness if detail.HasField("liveness") else None
        super().__init__(f"{self.code_name}: {message}")

    @property
    def retryable(self) -> bool:
        """Whether the same request, unchanged, may succeed later (PROTOCOL.md §5): ``SHUTTING_DOWN``
        (retry on a new connection once the daemon is back), ``TOO_MANY_CONNECTIONS`` (reconnect
        with back-off) and ``STORAGE_FULL`` (the write succeeds once space is freed). The request
        was not carried out, so sending it again cannot do it twice. Any other code gets the same
        answer for the same request (``INTERNAL``: an operator must look when it repeats)."""
        return self.code in RETRYABLE_CODES

    def __repr__(self) -> str:
        # Code, message and id only: the details have their own attributes.
        name = type(self).__name__
        return f"{name}(code_name={self.code_name!r}, message={self.message!r}, request_id={self.request_id})"

    def __reduce__(self) -> Tuple[Any, Tuple[bytes, int]]:
        # Picklable (e.g. across multiprocessing) despite the keyword-only constructor arguments.
        return (_rebuild_registry_error, (self.error.SerializeToString(), self.request_id))

    @staticmethod
    def from_proto(error: pb.Error, request_id: int = 0) -> RegistryError:
        """The exception for a received ``Error``: the subclass of its code, :class:`InternalError`
        for a code this client does not know (PROTOCOL.md §3: treat it as ``INTERNAL``)."""
        cls = _BY_CODE.get(error.code, InternalError)
        return cls(error.code, error.message, request_id=request_id, error=error)


def _rebuild_registry_error(serialized: bytes, request_id: int) -> RegistryError:
    error = pb.Error()
    error.ParseFromString(serialized)
    return RegistryError.from_proto(error, request_id)


class RegistrationRefused(RegistryError):
    """``register`` found a similar face or a mismatch; ``decisive`` and ``findings`` say which."""


class SimilarFaceRegistered(RegistrationRefused):
    """A registry holds a similar face of another identifier (``decisive.identifier``, ``.score``)."""

    CODE = pb.ERROR_CODE_SIMILAR_FACE_REGISTERED


class FaceMismatch(RegistrationRefused):
    """The identifier's templates do not match the face (``decisive.score`` is the best score)."""

    CODE = pb.ERROR_CODE_FACE_MISMATCH


class IdentifierNotRegistered(RegistryError):
    """authenticate: no registry of the gallery holds the identifier; get_templates: it has none."""

    CODE = pb.ERROR_CODE_IDENTIFIER_NOT_REGISTERED


class IncompatibleTemplates(RegistryError):
    """No registry can decide for this face (migration incomplete, or no template for it)."""

    CODE = pb.ERROR_CODE_INCOMPATIBLE_TEMPLATES


class InvalidTemplate(RegistryError):
    """A template failed validation; ``template_problem`` says which and why."""

    CODE = pb.ERROR_CODE_INVALID_TEMPLATE


class UnknownAlgorithm(RegistryError):
    """The algorithm is unknown to the daemon, or the gallery has no registry for it."""

    CODE = pb.ERROR_CODE_UNKNOWN_ALGORITHM


class UnknownGallery(RegistryError):
    """The named gallery does not exist."""

    CODE = pb.ERROR_CODE_UNKNOWN_GALLERY


class QualityTooLow(RegistryError):
    """The capture quality is below a registry's minimum; ``quality_too_low`` has the details."""

    CODE = pb.ERROR_CODE_QUALITY_TOO_LOW


class LivenessFailed(RegistryError):
    """The gallery requires a live face and the depth frames did not show one; see ``liveness``."""

    CODE = pb.ERROR_CODE_LIVENESS_FAILED


class PermissionDenied(RegistryError):
    """This process's user lacks the right the operation needs in the gallery."""

    CODE = pb.ERROR_CODE_PERMISSION_DENIED


class MalformedRequest(RegistryError):
    """The request is not valid (names, limits, a face with no templates, ...)."""

    CODE = pb.ERROR_CODE_MALFORMED_REQUEST


class FrameTooLarge(RegistryError):
    """The request exceeded the daemon's frame limit; the daemon closed the connection."""

    CODE = pb.ERROR_CODE_FRAME_TOO_LARGE


class UnsupportedVersion(RegistryError):
    """The daemon does not speak the hello's protocol major version; it closed the connection."""

    CODE = pb.ERROR_CODE_UNSUPPORTED_VERSION


class StorageFull(RegistryError):
    """The store is full (or the disk failed the write); nothing was stored."""

    CODE = pb.ERROR_CODE_STORAGE_FULL


class ShuttingDown(RegistryError):
    """The daemon is stopping; the request was not carried out. Retry after it restarts."""

    CODE = pb.ERROR_CODE_SHUTTING_DOWN


class InternalError(RegistryError):
    """An unexpected failure in the daemon (also any error code this client does not know)."""

    CODE = pb.ERROR_CODE_INTERNAL


class TooManyConnections(RegistryError):
    """The daemon serves its maximum number of connections; retry later, with back-off."""

    CODE = pb.ERROR_CODE_TOO_MANY_CONNECTIONS


class FleetUnavailable(RegistryError):
    """A fleet node cannot reach the fleet's database: the write was carried out nowhere; reads go
    on. Retry later (protocol 1.2)."""

    CODE = pb.ERROR_CODE_FLEET_UNAVAILABLE


_BY_CODE: Dict[int, Type[RegistryError]] = {
    cls.CODE: cls
    for cls in (
        SimilarFaceRegistered,
        FaceMismatch,
        IdentifierNotRegistered,
        IncompatibleTemplates,
        InvalidTemplate,
        UnknownAlgorithm,
        UnknownGallery,
        QualityTooLow,
        LivenessFailed,
        PermissionDenied,
        MalformedRequest,
        FrameTooLarge,
        UnsupportedVersion,
        StorageFull,
        ShuttingDown,
        InternalError,
        TooManyConnections,
        FleetUnavailable,
    )
    if cls.CODE is not None
}
