"""The operation methods and page iterators, defined once for both clients.

:class:`Operations` holds one :class:`Operation` per ``Request.operation`` case (the hello aside,
which each client handles itself): ``identify = Operation(ops.identify, pb.IdentifyResult)`` makes
``client.identify(face, ...)`` send ``ops.identify(face, ...)`` through the client's ``send`` and
return its result. The blocking :class:`registryd_client.Client` returns the result message; on the
asyncio :class:`registryd_client.aio.Client`, whose ``send`` is a coroutine function, the same method
returns an awaitable of it. Type checkers see both: the descriptor's ``__get__`` is overloaded on the
client's type, and the builder's parameters are the method's (``ParamSpec``). Likewise
:class:`Paged` makes the page iterators, walked by each client's ``_walk`` (a generator, an
asynchronous generator).
"""

from __future__ import annotations

import inspect
import types
from typing import (
    TYPE_CHECKING,
    Any,
    AsyncIterator,
    Awaitable,
    Callable,
    Generic,
    Iterable,
    Iterator,
    Optional,
    Type,
    TypeVar,
    overload,
)

from google.protobuf.message import Message

from . import operations as ops
from . import registry_pb2 as pb
from .errors import ProtocolError

if TYPE_CHECKING:
    from typing_extensions import ParamSpec

    from .aio import Client as AsyncClient
    from .client import Client as BlockingClient

    P = ParamSpec("P")
else:
    P = TypeVar("P")  # subscripting Generic needs a type variable at run time; only checkers read P

R = TypeVar("R")
T = TypeVar("T")

__all__ = ["Operation", "Operations", "Paged", "Pages"]


def _signature(builder: Callable[..., Any], returns: str) -> inspect.Signature:
    """The builder's parameters after a ``self``, returning ``returns``: what ``help()`` and IDEs show."""
    signature = inspect.signature(builder)
    self_parameter = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
    return signature.replace(parameters=[self_parameter, *signature.parameters.values()], return_annotation=returns)


class Operation(Generic[P, R]):
    """A client method sending the request ``builder`` makes and returning the ``result`` message."""

    def __init__(self, builder: Callable[P, Message], result: Type[R]) -> None:
        self.builder = builder
        self.result = result
        name = builder.__name__
        result_name = f"registry_pb2.{result.__name__}"

        def method(client: Any, *args: Any, **kwargs: Any) -> Any:
            return client.send(builder(*args, **kwargs))

        method.__name__ = method.__qualname__ = name
        method.__doc__ = (
            f"{inspect.getdoc(builder) or ''}\n\n"
            f"Returns the ``{result_name}`` (an awaitable of it on the asyncio client). Raises the "
            ":class:`RegistryError` subclass of the daemon's error code, :class:`TransportError` when "
            f"no answer comes. The request is :func:`registryd_client.operations.{name}`'s."
        )
        setattr(method, "__signature__", _signature(builder, result_name))
        self._method = method

    @overload
    def __get__(self, instance: None, owner: Any) -> Callable[..., Any]: ...

    @overload
    def __get__(self, instance: BlockingClient, owner: Any) -> Callable[P, R]: ...

    @overload
    def __get__(self, instance: AsyncClient, owner: Any) -> Callable[P, Awaitable[R]]: ...

    def __get__(self, instance: Any, owner: Any) -> Any:
        if instance is None:
            return self._method
        return types.MethodType(self._method, instance)


class Pages(Generic[T]):
    """How to walk one kind of paged result: the first request, the items of a result, and the
    request for the page after a result (None after the last page)."""

    def __init__(
        self,
        first: Message,
        items: Callable[[Any], Iterable[T]],
        following: Callable[[Any, Any], Optional[Message]],
    ) -> None:
        self.first = first
        self.items = items
        self.following = following


def _not_advancing(operation: str, cursor: object) -> ProtocolError:
    # A daemon that handed back the cursor it was given (or an earlier one) would be walked forever.
    return ProtocolError(f"registryd's {operation} page after {cursor!r} does not move forward")


def identifier_pages(*, gallery: str = "", after: str = "", page_size: int = 0) -> Pages[str]:
    def following(request: pb.ListIdentifiersRequest, result: pb.ListIdentifiersResult) -> Optional[Message]:
        if not result.HasField("next"):
            return None
        # Pages come in byte order of the identifiers' UTF-8.
        if result.next.encode() <= request.after.encode():
            raise _not_advancing("list_identifiers", request.after)
        return ops.list_identifiers(gallery=gallery, after=result.next, limit=page_size)

    return Pages(
        ops.list_identifiers(gallery=gallery, after=after, limit=page_size),
        lambda result: result.identifiers,
        following,
    )


def template_pages(*, gallery: str = "", after_template_id: int = 0, page_size: int = 0) -> Pages[pb.StoredTemplate]:
    def following(request: pb.ExportRequest, result: pb.ExportResult) -> Optional[Message]:
        if result.next_after_template_id == 0:
            return None
        if result.next_after_template_id <= request.after_template_id:
            raise _not_advancing("export", request.after_template_id)
        return ops.export(gallery=gallery, after_template_id=result.next_after_template_id, limit=page_size)

    return Pages(
        ops.export(gallery=gallery, after_template_id=after_template_id, limit=page_size),
        lambda result: result.templates,
        following,
    )


def liveness_profile_pages(
    *, gallery: str = "", after_identifier: str = "", page_size: int = 0
) -> Pages[pb.LivenessProfileEntry]:
    def following(request: pb.ExportRequest, result: pb.ExportResult) -> Optional[Message]:
        if not result.HasField("next_after_identifier"):
            return None
        if result.next_after_identifier.encode() <= request.after_identifier.encode():
            raise _not_advancing("export", request.after_identifier)
        return ops.export(
            gallery=gallery,
            liveness_profiles=True,
            after_identifier=result.next_after_identifier,
            limit=page_size,
        )

    return Pages(
        ops.export(gallery=gallery, liveness_profiles=True, after_identifier=after_identifier, limit=page_size),
        lambda result: result.liveness_profiles,
        following,
    )


class Paged(Generic[P, T]):
    """A client method iterating over the items of every page from the first ``pages`` makes: a
    generator on the blocking client, an asynchronous generator on the asyncio client. Each page is
    one request through the client's ``send`` (so the retry policy applies to each); a page is
    asked for when the items of the one before it have been taken."""

    def __init__(self, pages: Callable[P, Pages[T]], doc: str) -> None:
        def method(client: Any, *args: Any, **kwargs: Any) -> Any:
            return client._walk(pages(*args, **kwargs))

        method.__name__ = method.__qualname__ = pages.__name__
        method.__doc__ = doc
        setattr(method, "__signature__", _signature(pages, "Iterator"))
        self._method = method

    @overload
    def __get__(self, instance: None, owner: Any) -> Callable[..., Any]: ...

    @overload
    def __get__(self, instance: BlockingClient, owner: Any) -> Callable[P, Iterator[T]]: ...

    @overload
    def __get__(self, instance: AsyncClient, owner: Any) -> Callable[P, AsyncIterator[T]]: ...

    def __get__(self, instance: Any, owner: Any) -> Any:
        if instance is None:
            return self._method
        return types.MethodType(self._method, instance)


class Operations:
    """The operation methods and page iterators of both clients (see the module's docstring)."""

    register = Operation(ops.register, pb.RegisterResult)
    identify = Operation(ops.identify, pb.IdentifyResult)
    authenticate = Operation(ops.authenticate, pb.AuthenticateResult)
    list_galleries = Operation(ops.list_galleries, pb.ListGalleriesResult)
    list_algorithms = Operation(ops.list_algorithms, pb.ListAlgorithmsResult)
    list_identifiers = Operation(ops.list_identifiers, pb.ListIdentifiersResult)
    get_templates = Operation(ops.get_templates, pb.GetTemplatesResult)
    delete_template = Operation(ops.delete_template, pb.DeleteTemplateResult)
    delete_identifier = Operation(ops.delete_identifier, pb.DeleteIdentifierResult)
    delete_gallery = Operation(ops.delete_gallery, pb.DeleteGalleryResult)
    define_gallery = Operation(ops.define_gallery, pb.Gallery)
    migration_status = Operation(ops.migration_status, pb.MigrationStatusResult)
    stats = Operation(ops.stats, pb.StatsResult)
    export = Operation(ops.export, pb.ExportResult)
    import_templates = Operation(ops.import_templates, pb.ImportResult)
    backup = Operation(ops.backup, pb.BackupResult)
    verify = Operation(ops.verify, pb.VerifyResult)
    enrol_liveness_profile = Operation(ops.enrol_liveness_profile, pb.LivenessProfileResult)
    get_liveness_profile = Operation(ops.get_liveness_profile, pb.LivenessProfileResult)
    delete_liveness_profile = Operation(ops.delete_liveness_profile, pb.DeleteLivenessProfileResult)
    audit = Operation(ops.audit, pb.AuditQueryResult)
    set_encryption_key = Operation(ops.set_encryption_key, pb.SetEncryptionKeyResult)

    iter_identifiers = Paged(
        identifier_pages,
        """Every identifier of the gallery in byte order, after ``after`` (exclusive; empty: from
        the start), following ``list_identifiers``' pages of ``page_size`` (0: the daemon's 100).""",
    )
    iter_export = Paged(
        template_pages,
        """Every template of the gallery with its data (``registry_pb2.StoredTemplate``), in
        registration order after ``after_template_id`` (0: from the start), following ``export``'s
        pages of ``page_size`` (0: the daemon's 1,000). Biometric data: do not log it.""",
    )
    iter_liveness_profiles = Paged(
        liveness_profile_pages,
        """Every liveness profile of the gallery (``registry_pb2.LivenessProfileEntry``), in
        identifier order after ``after_identifier``, following ``export``'s profile pages of
        ``page_size`` (0: the daemon's 1,000).""",
    )
