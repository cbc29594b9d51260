"""Builders of request operations: one function per ``Request.operation`` case (each client has a
method of the same name for each), returning the operation message (``registry_pb2.IdentifyRequest`` etc.).

:class:`~registryd_client.Client`'s methods send exactly these. Use them directly to pipeline::

    from registryd_client import operations as ops
    futures = [client.submit(ops.identify(face)) for face in faces]   # all in flight at once
    results = [future.result() for future in futures]

An empty ``gallery`` means ``default`` (PROTOCOL.md §3, "Defaults of absent fields").
"""

from __future__ import annotations

import os
from typing import Iterable, Mapping, Optional, Sequence, Tuple, Union

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
    "ENROLMENT_POSES",
    "enrol_liveness_profile",
    "get_liveness_profile",
    "delete_liveness_profile",
    "audit",
    "set_encryption_key",
]

#: The protocol version this client speaks (PROTOCOL.md: 1.1 added TOO_MANY_CONNECTIONS, 1.2 FLEET_UNAVAILABLE).
PROTOCOL_MAJOR = 1
PROTOCOL_MINOR = 2

#: The poses ``enrol_liveness_profile`` needs, each with at least 5 depth frames (PROTOCOL.md §4).
ENROLMENT_POSES = ("center", "left", "right", "up", "down", "closer", "further")

RegistrySpecLike = Union[int, pb.DefineGalleryRequest.RegistrySpec]
ThresholdsLike = Union[pb.Thresholds, Tuple[float, float, float]]
ImportItemLike = Union[Tuple[str, Union[Template, pb.Template]], pb.ImportRequest.Item]
ProfileEntryLike = Union[pb.LivenessProfileEntry, Tuple[str, pb.LivenessProfile]]
PosesLike = Union[Mapping[str, Sequence[pb.DepthFrame]], Iterable[Tuple[str, Sequence[pb.DepthFrame]]]]


def hello(
    client_name: str, *, protocol_major: int = PROTOCOL_MAJOR, protocol_minor: int = PROTOCOL_MINOR
) -> pb.Hello:
    """The version handshake; the client sends it first on every connection it opens."""
    return pb.Hello(protocol_major=protocol_major, protocol_minor=protocol_minor, client_name=client_name)


def register(
    identifier: str, face: FaceLike, *, gallery: str = "", force: bool = False
) -> pb.RegisterRequest:
    """Store the face's templates under ``identifier``, after the similar-face and mismatch checks
    (``force`` stores despite their findings, which the result then lists). Refused with
    :class:`SimilarFaceRegistered` or :class:`FaceMismatch` (``decisive``, ``findings``)."""
    return pb.RegisterRequest(gallery=gallery, identifier=identifier, face=to_face_proto(face), force=force)


def identify(
    face: FaceLike, *, gallery: str = "", safe: bool = True, auto_enrol: bool = True, limit: int = 0
) -> pb.IdentifyRequest:
    """Who is this face: the matching identifiers, best first (``matches``; empty when none;
    ``limit`` 0: all). ``safe`` searches only a registry holding every identifier; ``auto_enrol``
    adds the face's other templates to a confident match."""
    # safe and auto_enrol are proto3 `optional`: set them explicitly either way, so False is sent.
    return pb.IdentifyRequest(
        gallery=gallery, face=to_face_proto(face), safe=safe, auto_enrol=auto_enrol, limit=limit
    )


def authenticate(
    identifier: str, face: FaceLike, *, gallery: str = "", auto_enrol: bool = True
) -> pb.AuthenticateRequest:
    """Is this face ``identifier`` (``authenticated``, ``score``): a non-match is a result
    (``authenticated`` False), not an error. Refused with :class:`IdentifierNotRegistered` when the
    gallery does not hold the identifier."""
    return pb.AuthenticateRequest(
        gallery=gallery, identifier=identifier, face=to_face_proto(face), auto_enrol=auto_enrol
    )


def list_galleries() -> pb.ListGalleriesRequest:
    """Every gallery with its registries in priority order, thresholds, policies and counts."""
    return pb.ListGalleriesRequest()


def list_algorithms() -> pb.ListAlgorithmsRequest:
    """Every algorithm the daemon knows, built-in and configured."""
    return pb.ListAlgorithmsRequest()


def list_identifiers(*, gallery: str = "", after: str = "", limit: int = 0) -> pb.ListIdentifiersRequest:
    """One page of a gallery's identifiers in byte order (``limit`` 0: 100); pass the result's
    ``next`` (absent on the last page) as ``after`` for the next page, or use ``iter_identifiers``."""
    return pb.ListIdentifiersRequest(gallery=gallery, after=after, limit=limit)


def get_templates(
    identifier: str, *, gallery: str = "", include_data: bool = False
) -> pb.GetTemplatesRequest:
    """The identifier's templates in registration order: metadata, and the template data with
    ``include_data`` (biometric data: do not log it). :class:`IdentifierNotRegistered` when it has
    none."""
    return pb.GetTemplatesRequest(gallery=gallery, identifier=identifier, include_data=include_data)


def delete_template(template_id: int, *, gallery: str = "") -> pb.DeleteTemplateRequest:
    """Delete one template by id (``deleted`` False when the gallery has no such template)."""
    return pb.DeleteTemplateRequest(gallery=gallery, template_id=template_id)


def delete_identifier(identifier: str, *, gallery: str = "") -> pb.DeleteIdentifierRequest:
    """Erase the identifier's templates in every registry and its liveness profile
    (``templates_deleted``; 0 is no error)."""
    return pb.DeleteIdentifierRequest(gallery=gallery, identifier=identifier)


def delete_gallery(gallery: str) -> pb.DeleteGalleryRequest:
    """Delete a gallery and everything in it (``templates_deleted``); ``default`` cannot be deleted."""
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
    """Create or reconfigure a gallery; the result is the ``Gallery`` as now defined. ``registries``
    in priority order: algorithm version ids (the algorithm's default thresholds) or
    :func:`registry_spec` results."""
    specs = [registry_spec(registry) if isinstance(registry, int) else registry for registry in registries]
    request = pb.DefineGalleryRequest(gallery=gallery, registries=specs)
    if liveness is not None:
        request.liveness.CopyFrom(liveness)
    if liveness_k is not None:
        request.liveness_k = liveness_k
    return request


def migration_status(*, gallery: str = "") -> pb.MigrationStatusRequest:
    """Per registry of the gallery: the identifiers it holds out of the gallery's total."""
    return pb.MigrationStatusRequest(gallery=gallery)


def stats() -> pb.StatsRequest:
    """The daemon's version, uptime, connections, counters and metrics (Prometheus text)."""
    return pb.StatsRequest()


def export(
    *,
    gallery: str = "",
    after_template_id: int = 0,
    limit: int = 0,
    liveness_profiles: bool = False,
    after_identifier: str = "",
) -> pb.ExportRequest:
    """One page of a gallery's templates with data, in registration order (``limit`` 0: 1,000); the
    result's ``next_after_template_id`` is 0 on the last page. With ``liveness_profiles``, a page of
    its liveness profiles after ``after_identifier`` instead (``next_after_identifier`` absent on the
    last). The pages hold biometric data: do not log them. ``iter_export`` and
    ``iter_liveness_profiles`` follow the pages."""
    return pb.ExportRequest(
        gallery=gallery,
        after_template_id=after_template_id,
        limit=limit,
        liveness_profiles=liveness_profiles,
        after_identifier=after_identifier,
    )


def import_templates(
    items: Iterable[ImportItemLike],
    *,
    gallery: str = "",
    skip_existing: bool = False,
    liveness_profiles: Iterable[ProfileEntryLike] = (),
) -> pb.ImportRequest:
    """Store templates without the register checks, all or none (``template_ids`` in item order).
    ``items``: ``(identifier, template)`` pairs, or ``registry_pb2.ImportRequest.Item`` messages,
    which may carry what an export recorded (time, source, quality). ``skip_existing`` stores once
    what the identifier already holds; ``liveness_profiles`` (``LivenessProfileEntry`` messages or
    ``(identifier, profile)`` pairs) are set after the items."""
    return pb.ImportRequest(
        gallery=gallery,
        items=[
            item
            if isinstance(item, pb.ImportRequest.Item)
            else pb.ImportRequest.Item(identifier=item[0], template=to_template_proto(item[1]))
            for item in items
        ],
        skip_existing=skip_existing,
        liveness_profiles=[
            entry
            if isinstance(entry, pb.LivenessProfileEntry)
            else pb.LivenessProfileEntry(identifier=entry[0], profile=entry[1])
            for entry in liveness_profiles
        ],
    )


def backup(directory: str = "") -> pb.BackupRequest:
    """A compacting hot copy of the store, with ``manifest.json`` beside it, in a new directory the
    daemon names (the copy's UTC start time, ``20261126T234000Z``) inside its backup root, or inside
    ``directory`` when the daemon's configuration allows that one (``backup.allowedDirectories``: an
    absolute path on the daemon's side; any other is refused with PERMISSION_DENIED). Empty: the
    root. The result's ``directory`` is the directory written, ``bytes`` the copy's size."""
    return pb.BackupRequest(directory=directory)


def verify() -> pb.VerifyRequest:
    """Check the store against itself and the in-memory index; ``problems`` is empty when all is well."""
    return pb.VerifyRequest()


def enrol_liveness_profile(
    identifier: str, poses: PosesLike, *, gallery: str = "", k: Optional[float] = None
) -> pb.EnrolLivenessProfileRequest:
    """Learn the identifier's personalised liveness thresholds (``profile``) from depth frames:
    ``poses`` maps each of :data:`ENROLMENT_POSES` to at least 5 ``registry_pb2.DepthFrame``
    (a mapping or ``(pose, frames)`` pairs). ``k``: the width of the ranges in standard deviations
    (default: the gallery's ``liveness_k``). Re-enrolling replaces the profile; the identifier must
    be registered in the gallery."""
    pairs = poses.items() if isinstance(poses, Mapping) else poses
    request = pb.EnrolLivenessProfileRequest(
        gallery=gallery,
        identifier=identifier,
        poses=[pb.EnrolLivenessProfileRequest.Pose(pose=pose, frames=list(frames)) for pose, frames in pairs],
    )
    if k is not None:
        request.k = k
    return request


def get_liveness_profile(identifier: str, *, gallery: str = "") -> pb.GetLivenessProfileRequest:
    """The identifier's liveness profile: the result's ``profile`` is absent when it has none
    (``result.HasField("profile")``)."""
    return pb.GetLivenessProfileRequest(gallery=gallery, identifier=identifier)


def delete_liveness_profile(identifier: str, *, gallery: str = "") -> pb.DeleteLivenessProfileRequest:
    """Erase the identifier's liveness profile (its templates stay); ``deleted`` says whether there
    was one."""
    return pb.DeleteLivenessProfileRequest(gallery=gallery, identifier=identifier)


def audit(
    *, identifier: str = "", since_micros: int = 0, until_micros: int = 0, outcome: str = "", limit: int = 0
) -> pb.AuditQueryRequest:
    """The newest audit-trail ``entries`` matching the filters, oldest first: concerning
    ``identifier``, with time in [``since_micros``, ``until_micros``) (µs since 1970; 0: no bound),
    with ``outcome`` ``ok``, ``match``, ``no-match`` or ``refused``; ``limit`` 0: 100. Needs the
    admin right."""
    return pb.AuditQueryRequest(
        identifier=identifier,
        since_micros=since_micros,
        until_micros=until_micros,
        outcome=outcome,
        limit=limit,
    )


def set_encryption_key(key_file: Union[str, "os.PathLike[str]"]) -> pb.SetEncryptionKeyRequest:
    """Encrypt every template at rest with the key in ``key_file`` (a path the daemon reads: 32 bytes
    or 64 hex characters), or re-encrypt with a new key; ``templates`` counts them. The daemon needs
    that key at its next start (``--key-file``). Needs the admin right."""
    return pb.SetEncryptionKeyRequest(key_file=os.fspath(key_file))
