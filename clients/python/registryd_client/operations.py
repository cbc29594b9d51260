"""Builders of request operations: one function per ``Request.operation`` case the client has a
method for, returning the operation message (``registry_pb2.IdentifyRequest`` etc.).

:class:`~registryd_client.Client`'s methods send exactly these. Use them directly to pipeline::

    from registryd_client import operations as ops
    futures = [client.submit(ops.identify(face)) for face in faces]   # all in flight at once
    results = [future.result() for future in futures]

An empty ``gallery`` means ``default`` (PROTOCOL.md §3, "Defaults of absent fields").
"""

from __future__ import annotations

from typing import Iterable, Optional, Sequence, Tuple, Union

from . import registry_pb2 as pb
from .faces import FaceLike, Template, to_face_proto, to_template_proto

__all__ = [
    "PROTOCOL_MAJOR",
    "PROTOCOL_MINOR",
    "hello",
    "register",
    "identify",
    "authenticate",
    "list_galleries",
    "list_algorithms",
    "list_identifiers",
    "get_templates",
    "delete_template",
    "delete_identifier",
    "delete_gallery",
    "registry_spec",
    "define_gallery",
    "migration_status",
    "stats",
    "export",
    "import_templates",
    "backup",
    "verify",
]

#: The protocol version this client speaks (PROTOCOL.md: 1.1 added TOO_MANY_CONNECTIONS).
PROTOCOL_MAJOR = 1
PROTOCOL_MINOR = 1

RegistrySpecLike = Union[int, pb.DefineGalleryRequest.RegistrySpec]
ThresholdsLike = Union[pb.Thresholds, Tuple[float, float, float]]


def hello(
    client_name: str, *, protocol_major: int = PROTOCOL_MAJOR, protocol_minor: int = PROTOCOL_MINOR
) -> pb.Hello:
    """The version handshake; the client sends it first on every connection it opens."""
    return pb.Hello(protocol_major=protocol_major, protocol_minor=protocol_minor, client_name=client_name)


def register(
    identifier: str, face: FaceLike, *, gallery: str = "", force: bool = False
) -> pb.RegisterRequest:
    """Store the face's templates under ``identifier``, after the similar-face and mismatch checks
    (``force`` stores despite their findings)."""
    return pb.RegisterRequest(gallery=gallery, identifier=identifier, face=to_face_proto(face), force=force)


def identify(
    face: FaceLike, *, gallery: str = "", safe: bool = True, auto_enrol: bool = True, limit: int = 0
) -> pb.IdentifyRequest:
    """Who is this face: matching identifiers, best first (``limit`` 0: all)."""
    # safe and auto_enrol are proto3 `optional`: set them explicitly either way, so False is sent.
    return pb.IdentifyRequest(
        gallery=gallery, face=to_face_proto(face), safe=safe, auto_enrol=auto_enrol, limit=limit
    )


def authenticate(
    identifier: str, face: FaceLike, *, gallery: str = "", auto_enrol: bool = True
) -> pb.AuthenticateRequest:
    """Is this face ``identifier``: a non-match is a result (``authenticated`` False), not an error."""
    return pb.AuthenticateRequest(
        gallery=gallery, identifier=identifier, face=to_face_proto(face), auto_enrol=auto_enrol
    )


def list_galleries() -> pb.ListGalleriesRequest:
    return pb.ListGalleriesRequest()


def list_algorithms() -> pb.ListAlgorithmsRequest:
    return pb.ListAlgorithmsRequest()


def list_identifiers(*, gallery: str = "", after: str = "", limit: int = 0) -> pb.ListIdentifiersRequest:
    """One page of identifiers in byte order; pass the result's ``next`` as ``after`` for the next."""
    return pb.ListIdentifiersRequest(gallery=gallery, after=after, limit=limit)


def get_templates(
    identifier: str, *, gallery: str = "", include_data: bool = False
) -> pb.GetTemplatesRequest:
    return pb.GetTemplatesRequest(gallery=gallery, identifier=identifier, include_data=include_data)


def delete_template(template_id: int, *, gallery: str = "") -> pb.DeleteTemplateRequest:
    return pb.DeleteTemplateRequest(gallery=gallery, template_id=template_id)


def delete_identifier(identifier: str, *, gallery: str = "") -> pb.DeleteIdentifierRequest:
    return pb.DeleteIdentifierRequest(gallery=gallery, identifier=identifier)


def delete_gallery(gallery: str) -> pb.DeleteGalleryRequest:
    return pb.DeleteGalleryRequest(gallery=gallery)


def registry_spec(
    algorithm: int,
    *,
    thresholds: Optional[ThresholdsLike] = None,
    minimum_quality: Optional[float] = None,
    minimum_auto_enrolment_quality: Optional[float] = None,
) -> pb.DefineGalleryRequest.RegistrySpec:
    """One registry of a gallery definition. ``thresholds`` is ``(authentication, identification,
    auto_enrolment)`` or a ``registry_pb2.Thresholds`` with all three set; None: the algorithm's
    defaults."""
    spec = pb.DefineGalleryRequest.RegistrySpec(algorithm=algorithm)
    if thresholds is not None:
        if isinstance(thresholds, pb.Thresholds):
            spec.thresholds.CopyFrom(thresholds)
        else:
            authentication, identification, auto_enrolment = thresholds
            spec.thresholds.CopyFrom(
                pb.Thresholds(
                    authentication=authentication,
                    identification=identification,
                    auto_enrolment=auto_enrolment,
                )
            )
    if minimum_quality is not None:
        spec.minimum_quality = minimum_quality
    if minimum_auto_enrolment_quality is not None:
        spec.minimum_auto_enrolment_quality = minimum_auto_enrolment_quality
    return spec


def define_gallery(
    gallery: str,
    registries: Iterable[RegistrySpecLike],
    *,
    liveness: Optional[pb.LivenessPolicy] = None,
    liveness_k: Optional[float] = None,
) -> pb.DefineGalleryRequest:
    """Create or reconfigure a gallery. ``registries`` in priority order: algorithm version ids (the
    algorithm's default thresholds) or :func:`registry_spec` results."""
    specs = [registry_spec(registry) if isinstance(registry, int) else registry for registry in registries]
    request = pb.DefineGalleryRequest(gallery=gallery, registries=specs)
    if liveness is not None:
        request.liveness.CopyFrom(liveness)
    if liveness_k is not None:
        request.liveness_k = liveness_k
    return request


def migration_status(*, gallery: str = "") -> pb.MigrationStatusRequest:
    return pb.MigrationStatusRequest(gallery=gallery)


def stats() -> pb.StatsRequest:
    return pb.StatsRequest()


def export(*, gallery: str = "", after_template_id: int = 0, limit: int = 0) -> pb.ExportRequest:
    """One page of templates with data; the result's ``next_after_template_id`` is 0 on the last."""
    return pb.ExportRequest(gallery=gallery, after_template_id=after_template_id, limit=limit)


def import_templates(
    items: Sequence[Tuple[str, Union[Template, pb.Template]]], *, gallery: str = ""
) -> pb.ImportRequest:
    """Store ``(identifier, template)`` pairs without the register checks, all or none."""
    return pb.ImportRequest(
        gallery=gallery,
        items=[
            pb.ImportRequest.Item(identifier=identifier, template=to_template_proto(t))
            for identifier, t in items
        ],
    )


def backup(directory: str) -> pb.BackupRequest:
    """A compacting hot copy of the store into ``directory`` (a new path on the daemon's side)."""
    return pb.BackupRequest(directory=directory)


def verify() -> pb.VerifyRequest:
    return pb.VerifyRequest()
