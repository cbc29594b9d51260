"""A Python client for registryd, the face template registry daemon.

::

    from registryd_client import Client, Face, SimilarFaceRegistered

    with Client() as client:                  # $REGISTRYD_SOCKET, else ./run/registryd.sock
        client.register("alice", Face.vector(algorithm=24, values=alice_values))
        best = client.identify(Face.vector(algorithm=24, values=capture)).matches

``registryd_client.aio.Client`` is the asyncio client, with the same methods as coroutines.

The wire protocol is described in the repository's PROTOCOL.md; ``registryd_client.registry_pb2``
holds its generated messages (``proto/registry.proto``), which the methods take and return.
"""

from ._version import __version__
from . import operations
from . import registry_pb2
from .client import (
    DEFAULT_SOCKET_PATH,
    DEFAULT_TIMEOUT,
    SOCKET_ENVIRONMENT_VARIABLE,
    SYSTEM_SOCKET_PATH,
    Client,
    RequestFuture,
    resolve_socket_path,
)
from .errors import (
    RETRYABLE_CODES,
    ConnectionClosed,
    ConnectionFailed,
    FaceMismatch,
    Finding,
    FrameTooLarge,
    IdentifierNotRegistered,
    IncompatibleTemplates,
    InternalError,
    InvalidTemplate,
    LivenessFailed,
    MalformedRequest,
    PermissionDenied,
    ProtocolError,
    ProtocolVersionMismatch,
    QualityTooLow,
    RegistrationRefused,
    RegistrydClientError,
    RegistryError,
    RequestTimeout,
    ShuttingDown,
    SimilarFaceRegistered,
    StorageFull,
    TemplateProblem,
    TooManyConnections,
    FleetUnavailable,
    TransportError,
    UnknownAlgorithm,
    UnknownGallery,
    UnsupportedVersion,
)
from .faces import Face, Landmark, Template, normalised
from .pool import DEFAULT_POOL_SIZE, AsyncClientPool, ClientPool
from .retry import Backoff, ExponentialBackoff, Retry
from .operations import PROTOCOL_MAJOR, PROTOCOL_MINOR

__all__ = [
    "__version__",
    "operations",
    "registry_pb2",
    "Client",
    "ClientPool",
    "AsyncClientPool",
    "DEFAULT_POOL_SIZE",
    "RequestFuture",
    "resolve_socket_path",
    "Retry",
    "Backoff",
    "ExponentialBackoff",
    "DEFAULT_SOCKET_PATH",
    "DEFAULT_TIMEOUT",
    "SOCKET_ENVIRONMENT_VARIABLE",
    "SYSTEM_SOCKET_PATH",
    "PROTOCOL_MAJOR",
    "PROTOCOL_MINOR",
    "Face",
    "Landmark",
    "Template",
    "normalised",
    "Finding",
    "TemplateProblem",
    "RegistrydClientError",
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
    "TransportError",
    "ConnectionFailed",
    "ConnectionClosed",
    "RequestTimeout",
    "ProtocolError",
    "ProtocolVersionMismatch",
]
