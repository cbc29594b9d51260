from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
ERROR_CODE_FACE_MISMATCH: ErrorCode
ERROR_CODE_FLEET_UNAVAILABLE: ErrorCode
ERROR_CODE_FRAME_TOO_LARGE: ErrorCode
ERROR_CODE_IDENTIFIER_NOT_REGISTERED: ErrorCode
ERROR_CODE_INCOMPATIBLE_TEMPLATES: ErrorCode
ERROR_CODE_INTERNAL: ErrorCode
ERROR_CODE_INVALID_TEMPLATE: ErrorCode
ERROR_CODE_LIVENESS_FAILED: ErrorCode
ERROR_CODE_MALFORMED_REQUEST: ErrorCode
ERROR_CODE_PERMISSION_DENIED: ErrorCode
ERROR_CODE_QUALITY_TOO_LOW: ErrorCode
ERROR_CODE_SHUTTING_DOWN: ErrorCode
ERROR_CODE_SIMILAR_FACE_REGISTERED: ErrorCode
ERROR_CODE_STORAGE_FULL: ErrorCode
ERROR_CODE_TOO_MANY_CONNECTIONS: ErrorCode
ERROR_CODE_UNKNOWN_ALGORITHM: ErrorCode
ERROR_CODE_UNKNOWN_GALLERY: ErrorCode
ERROR_CODE_UNSPECIFIED: ErrorCode
ERROR_CODE_UNSUPPORTED_VERSION: ErrorCode
TEMPLATE_SOURCE_AUTO_ENROLLED: TemplateSource
TEMPLATE_SOURCE_FORCED: TemplateSource
TEMPLATE_SOURCE_IMPORTED: TemplateSource
TEMPLATE_SOURCE_REGISTERED: TemplateSource
TEMPLATE_SOURCE_UNSPECIFIED: TemplateSource

class Algorithm(_message.Message):
    __slots__ = ["default_threshold", "dimension", "kind", "name", "score_function", "version"]
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = []
    DEFAULT_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    DIMENSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    KIND_LANDMARKS: Algorithm.Kind
    KIND_UNSPECIFIED: Algorithm.Kind
    KIND_VECTOR: Algorithm.Kind
    NAME_FIELD_NUMBER: _ClassVar[int]
    SCORE_FUNCTION_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    default_threshold: float
    dimension: int
    kind: Algorithm.Kind
    name: str
    score_function: str
    version: int
    def __init__(self, version: _Optional[int] = ..., name: _Optional[str] = ..., kind: _Optional[_Union[Algorithm.Kind, str]] = ..., dimension: _Optional[int] = ..., score_function: _Optional[str] = ..., default_threshold: _Optional[float] = ...) -> None: ...

class AuditEntry(_message.Message):
    __slots__ = ["count", "error_code", "gallery", "identifiers", "operation", "outcome", "pid", "score", "time_micros", "uid"]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    GALLERY_FIELD_NUMBER: _ClassVar[int]
    IDENTIFIERS_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    TIME_MICROS_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    count: int
    error_code: str
    gallery: str
    identifiers: _containers.RepeatedScalarFieldContainer[str]
    operation: str
    outcome: str
    pid: int
    score: float
    time_micros: int
    uid: int
    def __init__(self, time_micros: _Optional[int] = ..., uid: _Optional[int] = ..., pid: _Optional[int] = ..., operation: _Optional[str] = ..., gallery: _Optional[str] = ..., identifiers: _Optional[_Iterable[str]] = ..., outcome: _Optional[str] = ..., score: _Optional[float] = ..., error_code: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class AuditQueryRequest(_message.Message):
    __slots__ = ["identifier", "limit", "outcome", "since_micros", "until_micros"]
    IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    SINCE_MICROS_FIELD_NUMBER: _ClassVar[int]
    UNTIL_MICROS_FIELD_NUMBER: _ClassVar[int]
    identifier: str
    limit: int
    outcome: str
    since_micros: int
    until_micros: int
    def __init__(self, identifier: _Optional[str] = ..., since_micros: _Optional[int] = ..., until_micros: _Optional[int] = ..., outcome: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class AuditQueryResult(_message.Message):
    __slots__ = ["entries"]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[AuditEntry]
    def __init__(self, entries: _Optional[_Iterable[_Union[AuditEntry, _Mapping]]] = ...) -> None: ...

class AuthenticateRequest(_message.Message):
    __slots__ = ["auto_enrol", "face", "gallery", "identifier"]
    AUTO_ENROL_FIELD_NUMBER: _ClassVar[int]
    FACE_FIELD_NUMBER: _ClassVar[int]
    GALLERY_FIELD_NUMBER: _ClassVar[int]
    IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    auto_enrol: bool
    face: Face
    gallery: str
    identifier: str
    def __init__(self, gallery: _Optional[str] = ..., identifier: _Optional[str] = ..., face: _Optional[_Union[Face, _Mapping]] = ..., auto_enrol: bool = ...) -> None: ...

class AuthenticateResult(_message.Message):
    __slots__ = ["algorithm", "authenticated", "auto_enrolment", "liveness", "score", "template_id"]
    ALGORITHM_FIELD_NUMBER: _ClassVar[int]
    AUTHENTICATED_FIELD_NUMBER: _ClassVar[int]
    AUTO_ENROLMENT_FIELD_NUMBER: _ClassVar[int]
    LIVENESS_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_ID_FIELD_NUMBER: _ClassVar[int]
    algorithm: int
    authenticated: bool
    auto_enrolment: _containers.RepeatedCompositeFieldContainer[AutoEnrolmentOutcome]
    liveness: LivenessVerdict
    score: float
    template_id: int
    def __init__(self, authenticated: bool = ..., score: _Optional[float] = ..., template_id: _Optional[int] = ..., algorithm: _Optional[int] = ..., auto_enrolment: _Optional[_Iterable[_Union[AutoEnrolmentOutcome, _Mapping]]] = ..., liveness: _Optional[_Union[LivenessVerdict, _Mapping]] = ...) -> None: ...

class AutoEnrolmentOutcome(_message.Message):
    __slots__ = ["algorithm", "finding", "message", "score", "status", "template_id", "threshold"]
    class Status(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = []
    ALGORITHM_FIELD_NUMBER: _ClassVar[int]
    FINDING_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    STATUS_ALREADY_REGISTERED: AutoEnrolmentOutcome.Status
    STATUS_ENROLLED: AutoEnrolmentOutcome.Status
    STATUS_FAILED: AutoEnrolmentOutcome.Status
    STATUS_FIELD_NUMBER: _ClassVar[int]
    STATUS_LIVENESS_REQUIRED: AutoEnrolmentOutcome.Status
    STATUS_NO_TEMPLATE: AutoEnrolmentOutcome.Status
    STATUS_QUALITY_TOO_LOW: AutoEnrolmentOutcome.Status
    STATUS_REFUSED: AutoEnrolmentOutcome.Status
    STATUS_SCORE_BELOW_THRESHOLD: AutoEnrolmentOutcome.Status
    STATUS_UNSPECIFIED: AutoEnrolmentOutcome.Status
    TEMPLATE_ID_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    algorithm: int
    finding: RegistrationFinding
    message: str
    score: float
    status: AutoEnrolmentOutcome.Status
    template_id: int
    threshold: float
    def __init__(self, algorithm: _Optional[int] = ..., status: _Optional[_Union[AutoEnrolmentOutcome.Status, str]] = ..., template_id: _Optional[int] = ..., score: _Optional[float] = ..., threshold: _Optional[float] = ..., finding: _Optional[_Union[RegistrationFinding, _Mapping]] = ..., message: _Optional[str] = ...) -> None: ...

class BackupRequest(_message.Message):
    __slots__ = ["directory"]
    DIRECTORY_FIELD_NUMBER: _ClassVar[int]
    directory: str
    def __init__(self, directory: _Optional[str] = ...) -> None: ...

class BackupResult(_message.Message):
    __slots__ = ["bytes", "directory"]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    DIRECTORY_FIELD_NUMBER: _ClassVar[int]
    bytes: int
    directory: str
    def __init__(self, bytes: _Optional[int] = ..., directory: _Optional[str] = ...) -> None: ...

class CaptureMetadata(_message.Message):
    __slots__ = ["brightness_mean", "brightness_std_dev", "detector_confidence", "face_box", "face_pixel_size", "image_height", "image_width", "pitch", "roll", "sharpness", "yaw"]
    BRIGHTNESS_MEAN_FIELD_NUMBER: _ClassVar[int]
    BRIGHTNESS_STD_DEV_FIELD_NUMBER: _ClassVar[int]
    DETECTOR_CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    FACE_BOX_FIELD_NUMBER: _ClassVar[int]
    FACE_PIXEL_SIZE_FIELD_NUMBER: _ClassVar[int]
    IMAGE_HEIGHT_FIELD_NUMBER: _ClassVar[int]
    IMAGE_WIDTH_FIELD_NUMBER: _ClassVar[int]
    PITCH_FIELD_NUMBER: _ClassVar[int]
    ROLL_FIELD_NUMBER: _ClassVar[int]
    SHARPNESS_FIELD_NUMBER: _ClassVar[int]
    YAW_FIELD_NUMBER: _ClassVar[int]
    brightness_mean: float
    brightness_std_dev: float
    detector_confidence: float
    face_box: FaceBox
    face_pixel_size: float
    image_height: int
    image_width: int
    pitch: float
    roll: float
    sharpness: float
    yaw: float
    def __init__(self, detector_confidence: _Optional[float] = ..., face_box: _Optional[_Union[FaceBox, _Mapping]] = ..., image_width: _Optional[int] = ..., image_height: _Optional[int] = ..., yaw: _Optional[float] = ..., pitch: _Optional[float] = ..., roll: _Optional[float] = ..., face_pixel_size: _Optional[float] = ..., sharpness: _Optional[float] = ..., brightness_mean: _Optional[float] = ..., brightness_std_dev: _Optional[float] = ...) -> None: ...

class DefineGalleryRequest(_message.Message):
    __slots__ = ["gallery", "liveness", "liveness_k", "registries"]
    class RegistrySpec(_message.Message):
        __slots__ = ["algorithm", "minimum_auto_enrolment_quality", "minimum_quality", "thresholds"]
        ALGORITHM_FIELD_NUMBER: _ClassVar[int]
        MINIMUM_AUTO_ENROLMENT_QUALITY_FIELD_NUMBER: _ClassVar[int]
        MINIMUM_QUALITY_FIELD_NUMBER: _ClassVar[int]
        THRESHOLDS_FIELD_NUMBER: _ClassVar[int]
        algorithm: int
        minimum_auto_enrolment_quality: float
        minimum_quality: float
        thresholds: Thresholds
        def __init__(self, algorithm: _Optional[int] = ..., thresholds: _Optional[_Union[Thresholds, _Mapping]] = ..., minimum_quality: _Optional[float] = ..., minimum_auto_enrolment_quality: _Optional[float] = ...) -> None: ...
    GALLERY_FIELD_NUMBER: _ClassVar[int]
    LIVENESS_FIELD_NUMBER: _ClassVar[int]
    LIVENESS_K_FIELD_NUMBER: _ClassVar[int]
    REGISTRIES_FIELD_NUMBER: _ClassVar[int]
    gallery: str
    liveness: LivenessPolicy
    liveness_k: float
    registries: _containers.RepeatedCompositeFieldContainer[DefineGalleryRequest.RegistrySpec]
    def __init__(self, gallery: _Optional[str] = ..., registries: _Optional[_Iterable[_Union[DefineGalleryRequest.RegistrySpec, _Mapping]]] = ..., liveness: _Optional[_Union[LivenessPolicy, _Mapping]] = ..., liveness_k: _Optional[float] = ...) -> None: ...

class DeleteGalleryRequest(_message.Message):
    __slots__ = ["gallery"]
    GALLERY_FIELD_NUMBER: _ClassVar[int]
    gallery: str
    def __init__(self, gallery: _Optional[str] = ...) -> None: ...

class DeleteGalleryResult(_message.Message):
    __slots__ = ["templates_deleted"]
    TEMPLATES_DELETED_FIELD_NUMBER: _ClassVar[int]
    templates_deleted: int
    def __init__(self, templates_deleted: _Optional[int] = ...) -> None: ...

class DeleteIdentifierRequest(_message.Message):
    __slots__ = ["gallery", "identifier"]
    GALLERY_FIELD_NUMBER: _ClassVar[int]
    IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    gallery: str
    identifier: str
    def __init__(self, gallery: _Optional[str] = ..., identifier: _Optional[str] = ...) -> None: ...

class DeleteIdentifierResult(_message.Message):
    __slots__ = ["templates_deleted"]
    TEMPLATES_DELETED_FIELD_NUMBER: _ClassVar[int]
    templates_deleted: int
    def __init__(self, templates_deleted: _Optional[int] = ...) -> None: ...

class DeleteLivenessProfileRequest(_message.Message):
    __slots__ = ["gallery", "identifier"]
    GALLERY_FIELD_NUMBER: _ClassVar[int]
    IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    gallery: str
    identifier: str
    def __init__(self, gallery: _Optional[str] = ..., identifier: _Optional[str] = ...) -> None: ...

class DeleteLivenessProfileResult(_message.Message):
    __slots__ = ["deleted"]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: bool
    def __init__(self, deleted: bool = ...) -> None: ...

class DeleteTemplateRequest(_message.Message):
    __slots__ = ["gallery", "template_id"]
    GALLERY_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_ID_FIELD_NUMBER: _ClassVar[int]
    gallery: str
    template_id: int
    def __init__(self, gallery: _Optional[str] = ..., template_id: _Optional[int] = ...) -> None: ...

class DeleteTemplateResult(_message.Message):
    __slots__ = ["deleted"]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: bool
    def __init__(self, deleted: bool = ...) -> None: ...

class DepthFrame(_message.Message):
    __slots__ = ["depths", "face_box", "timestamp_millis"]
    DEPTHS_FIELD_NUMBER: _ClassVar[int]
    FACE_BOX_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MILLIS_FIELD_NUMBER: _ClassVar[int]
    depths: _containers.RepeatedScalarFieldContainer[float]
    face_box: FaceBox
    timestamp_millis: int
    def __init__(self, depths: _Optional[_Iterable[float]] = ..., timestamp_millis: _Optional[int] = ..., face_box: _Optional[_Union[FaceBox, _Mapping]] = ...) -> None: ...

class DumpRecord(_message.Message):
    __slots__ = ["gallery", "liveness_profile", "template", "trailer"]
    GALLERY_FIELD_NUMBER: _ClassVar[int]
    LIVENESS_PROFILE_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    TRAILER_FIELD_NUMBER: _ClassVar[int]
    gallery: DefineGalleryRequest
    liveness_profile: LivenessProfileEntry
    template: StoredTemplate
    trailer: DumpTrailer
    def __init__(self, gallery: _Optional[_Union[DefineGalleryRequest, _Mapping]] = ..., template: _Optional[_Union[StoredTemplate, _Mapping]] = ..., liveness_profile: _Optional[_Union[LivenessProfileEntry, _Mapping]] = ..., trailer: _Optional[_Union[DumpTrailer, _Mapping]] = ...) -> None: ...

class DumpTrailer(_message.Message):
    __slots__ = ["checksum", "record_count"]
    CHECKSUM_FIELD_NUMBER: _ClassVar[int]
    RECORD_COUNT_FIELD_NUMBER: _ClassVar[int]
    checksum: int
    record_count: int
    def __init__(self, record_count: _Optional[int] = ..., checksum: _Optional[int] = ...) -> None: ...

class EnrolLivenessProfileRequest(_message.Message):
    __slots__ = ["gallery", "identifier", "k", "poses"]
    class Pose(_message.Message):
        __slots__ = ["frames", "pose"]
        FRAMES_FIELD_NUMBER: _ClassVar[int]
        POSE_FIELD_NUMBER: _ClassVar[int]
        frames: _containers.RepeatedCompositeFieldContainer[DepthFrame]
        pose: str
        def __init__(self, pose: _Optional[str] = ..., frames: _Optional[_Iterable[_Union[DepthFrame, _Mapping]]] = ...) -> None: ...
    GALLERY_FIELD_NUMBER: _ClassVar[int]
    IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    K_FIELD_NUMBER: _ClassVar[int]
    POSES_FIELD_NUMBER: _ClassVar[int]
    gallery: str
    identifier: str
    k: float
    poses: _containers.RepeatedCompositeFieldContainer[EnrolLivenessProfileRequest.Pose]
    def __init__(self, gallery: _Optional[str] = ..., identifier: _Optional[str] = ..., poses: _Optional[_Iterable[_Union[EnrolLivenessProfileRequest.Pose, _Mapping]]] = ..., k: _Optional[float] = ...) -> None: ...

class Error(_message.Message):
    __slots__ = ["code", "decisive", "findings", "liveness", "message", "quality_too_low", "template_problem"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    DECISIVE_FIELD_NUMBER: _ClassVar[int]
    FINDINGS_FIELD_NUMBER: _ClassVar[int]
    LIVENESS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    QUALITY_TOO_LOW_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_PROBLEM_FIELD_NUMBER: _ClassVar[int]
    code: ErrorCode
    decisive: RegistrationFinding
    findings: _containers.RepeatedCompositeFieldContainer[RegistrationFinding]
    liveness: LivenessVerdict
    message: str
    quality_too_low: QualityTooLow
    template_problem: TemplateProblem
    def __init__(self, code: _Optional[_Union[ErrorCode, str]] = ..., message: _Optional[str] = ..., decisive: _Optional[_Union[RegistrationFinding, _Mapping]] = ..., findings: _Optional[_Iterable[_Union[RegistrationFinding, _Mapping]]] = ..., template_problem: _Optional[_Union[TemplateProblem, _Mapping]] = ..., quality_too_low: _Optional[_Union[QualityTooLow, _Mapping]] = ..., liveness: _Optional[_Union[LivenessVerdict, _Mapping]] = ...) -> None: ...

class ExportRequest(_message.Message):
    __slots__ = ["after_identifier", "after_template_id", "gallery", "limit", "liveness_profiles"]
    AFTER_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    AFTER_TEMPLATE_ID_FIELD_NUMBER: _ClassVar[int]
    GALLERY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    LIVENESS_PROFILES_FIELD_NUMBER: _ClassVar[int]
    after_identifier: str
    after_template_id: int
    gallery: str
    limit: int
    liveness_profiles: bool
    def __init__(self, gallery: _Optional[str] = ..., after_template_id: _Optional[int] = ..., limit: _Optional[int] = ..., liveness_profiles: bool = ..., after_identifier: _Optional[str] = ...) -> None: ...

class ExportResult(_message.Message):
    __slots__ = ["liveness_profiles", "next_after_identifier", "next_after_template_id", "templates"]
    LIVENESS_PROFILES_FIELD_NUMBER: _ClassVar[int]
    NEXT_AFTER_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    NEXT_AFTER_TEMPLATE_ID_FIELD_NUMBER: _ClassVar[int]
    TEMPLATES_FIELD_NUMBER: _ClassVar[int]
    liveness_profiles: _containers.RepeatedCompositeFieldContainer[LivenessProfileEntry]
    next_after_identifier: str
    next_after_template_id: int
    templates: _containers.RepeatedCompositeFieldContainer[StoredTemplate]
    def __init__(self, templates: _Optional[_Iterable[_Union[StoredTemplate, _Mapping]]] = ..., next_after_template_id: _Optional[int] = ..., liveness_profiles: _Optional[_Iterable[_Union[LivenessProfileEntry, _Mapping]]] = ..., next_after_identifier: _Optional[str] = ...) -> None: ...

class Face(_message.Message):
    __slots__ = ["capture", "depth_frames", "templates"]
    CAPTURE_FIELD_NUMBER: _ClassVar[int]
    DEPTH_FRAMES_FIELD_NUMBER: _ClassVar[int]
    TEMPLATES_FIELD_NUMBER: _ClassVar[int]
    capture: CaptureMetadata
    depth_frames: _containers.RepeatedCompositeFieldContainer[DepthFrame]
    templates: _containers.RepeatedCompositeFieldContainer[Template]
    def __init__(self, templates: _Optional[_Iterable[_Union[Template, _Mapping]]] = ..., capture: _Optional[_Union[CaptureMetadata, _Mapping]] = ..., depth_frames: _Optional[_Iterable[_Union[DepthFrame, _Mapping]]] = ...) -> None: ...

class FaceBox(_message.Message):
    __slots__ = ["height", "width", "x", "y"]
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    X_FIELD_NUMBER: _ClassVar[int]
    Y_FIELD_NUMBER: _ClassVar[int]
    height: float
    width: float
    x: float
    y: float
    def __init__(self, x: _Optional[float] = ..., y: _Optional[float] = ..., width: _Optional[float] = ..., height: _Optional[float] = ...) -> None: ...

class FaceMismatch(_message.Message):
    __slots__ = ["best_score"]
    BEST_SCORE_FIELD_NUMBER: _ClassVar[int]
    best_score: float
    def __init__(self, best_score: _Optional[float] = ...) -> None: ...

class Gallery(_message.Message):
    __slots__ = ["identifier_count", "liveness", "liveness_k", "name", "registries"]
    IDENTIFIER_COUNT_FIELD_NUMBER: _ClassVar[int]
    LIVENESS_FIELD_NUMBER: _ClassVar[int]
    LIVENESS_K_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REGISTRIES_FIELD_NUMBER: _ClassVar[int]
    identifier_count: int
    liveness: LivenessPolicy
    liveness_k: float
    name: str
    registries: _containers.RepeatedCompositeFieldContainer[Registry]
    def __init__(self, name: _Optional[str] = ..., registries: _Optional[_Iterable[_Union[Registry, _Mapping]]] = ..., identifier_count: _Optional[int] = ..., liveness: _Optional[_Union[LivenessPolicy, _Mapping]] = ..., liveness_k: _Optional[float] = ...) -> None: ...

class GetLivenessProfileRequest(_message.Message):
    __slots__ = ["gallery", "identifier"]
    GALLERY_FIELD_NUMBER: _ClassVar[int]
    IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    gallery: str
    identifier: str
    def __init__(self, gallery: _Optional[str] = ..., identifier: _Optional[str] = ...) -> None: ...

class GetTemplatesRequest(_message.Message):
    __slots__ = ["gallery", "identifier", "include_data"]
    GALLERY_FIELD_NUMBER: _ClassVar[int]
    IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_DATA_FIELD_NUMBER: _ClassVar[int]
    gallery: str
    identifier: str
    include_data: bool
    def __init__(self, gallery: _Optional[str] = ..., identifier: _Optional[str] = ..., include_data: bool = ...) -> None: ...

class GetTemplatesResult(_message.Message):
    __slots__ = ["templates"]
    TEMPLATES_FIELD_NUMBER: _ClassVar[int]
    templates: _containers.RepeatedCompositeFieldContainer[StoredTemplate]
    def __init__(self, templates: _Optional[_Iterable[_Union[StoredTemplate, _Mapping]]] = ...) -> None: ...

class Hello(_message.Message):
    __slots__ = ["client_name", "protocol_major", "protocol_minor"]
    CLIENT_NAME_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_MAJOR_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_MINOR_FIELD_NUMBER: _ClassVar[int]
    client_name: str
    protocol_major: int
    protocol_minor: int
    def __init__(self, protocol_major: _Optional[int] = ..., protocol_minor: _Optional[int] = ..., client_name: _Optional[str] = ...) -> None: ...

class HelloResult(_message.Message):
    __slots__ = ["protocol_major", "protocol_minor", "server_version"]
    PROTOCOL_MAJOR_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_MINOR_FIELD_NUMBER: _ClassVar[int]
    SERVER_VERSION_FIELD_NUMBER: _ClassVar[int]
    protocol_major: int
    protocol_minor: int
    server_version: str
    def __init__(self, protocol_major: _Optional[int] = ..., protocol_minor: _Optional[int] = ..., server_version: _Optional[str] = ...) -> None: ...

class IdentifyRequest(_message.Message):
    __slots__ = ["auto_enrol", "face", "gallery", "limit", "safe"]
    AUTO_ENROL_FIELD_NUMBER: _ClassVar[int]
    FACE_FIELD_NUMBER: _ClassVar[int]
    GALLERY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    SAFE_FIELD_NUMBER: _ClassVar[int]
    auto_enrol: bool
    face: Face
    gallery: str
    limit: int
    safe: bool
    def __init__(self, gallery: _Optional[str] = ..., face: _Optional[_Union[Face, _Mapping]] = ..., safe: bool = ..., auto_enrol: bool = ..., limit: _Optional[int] = ...) -> None: ...

class IdentifyResult(_message.Message):
    __slots__ = ["algorithm", "auto_enrolment", "liveness", "matches"]
    ALGORITHM_FIELD_NUMBER: _ClassVar[int]
    AUTO_ENROLMENT_FIELD_NUMBER: _ClassVar[int]
    LIVENESS_FIELD_NUMBER: _ClassVar[int]
    MATCHES_FIELD_NUMBER: _ClassVar[int]
    algorithm: int
    auto_enrolment: _containers.RepeatedCompositeFieldContainer[AutoEnrolmentOutcome]
    liveness: LivenessVerdict
    matches: _containers.RepeatedCompositeFieldContainer[Match]
    def __init__(self, algorithm: _Optional[int] = ..., matches: _Optional[_Iterable[_Union[Match, _Mapping]]] = ..., auto_enrolment: _Optional[_Iterable[_Union[AutoEnrolmentOutcome, _Mapping]]] = ..., liveness: _Optional[_Union[LivenessVerdict, _Mapping]] = ...) -> None: ...

class ImportRequest(_message.Message):
    __slots__ = ["gallery", "items", "liveness_profiles", "skip_existing"]
    class Item(_message.Message):
        __slots__ = ["identifier", "quality", "registered_at_micros", "source", "template"]
        IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
        QUALITY_FIELD_NUMBER: _ClassVar[int]
        REGISTERED_AT_MICROS_FIELD_NUMBER: _ClassVar[int]
        SOURCE_FIELD_NUMBER: _ClassVar[int]
        TEMPLATE_FIELD_NUMBER: _ClassVar[int]
        identifier: str
        quality: float
        registered_at_micros: int
        source: TemplateSource
        template: Template
        def __init__(self, identifier: _Optional[str] = ..., template: _Optional[_Union[Template, _Mapping]] = ..., registered_at_micros: _Optional[int] = ..., source: _Optional[_Union[TemplateSource, str]] = ..., quality: _Optional[float] = ...) -> None: ...
    GALLERY_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    LIVENESS_PROFILES_FIELD_NUMBER: _ClassVar[int]
    SKIP_EXISTING_FIELD_NUMBER: _ClassVar[int]
    gallery: str
    items: _containers.RepeatedCompositeFieldContainer[ImportRequest.Item]
    liveness_profiles: _containers.RepeatedCompositeFieldContainer[LivenessProfileEntry]
    skip_existing: bool
    def __init__(self, gallery: _Optional[str] = ..., items: _Optional[_Iterable[_Union[ImportRequest.Item, _Mapping]]] = ..., skip_existing: bool = ..., liveness_profiles: _Optional[_Iterable[_Union[LivenessProfileEntry, _Mapping]]] = ...) -> None: ...

class ImportResult(_message.Message):
    __slots__ = ["liveness_profiles_skipped", "liveness_profiles_stored", "skipped", "template_ids"]
    LIVENESS_PROFILES_SKIPPED_FIELD_NUMBER: _ClassVar[int]
    LIVENESS_PROFILES_STORED_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_IDS_FIELD_NUMBER: _ClassVar[int]
    liveness_profiles_skipped: int
    liveness_profiles_stored: int
    skipped: int
    template_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, template_ids: _Optional[_Iterable[int]] = ..., skipped: _Optional[int] = ..., liveness_profiles_stored: _Optional[int] = ..., liveness_profiles_skipped: _Optional[int] = ...) -> None: ...

class Landmark(_message.Message):
    __slots__ = ["name", "x", "y", "z"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    X_FIELD_NUMBER: _ClassVar[int]
    Y_FIELD_NUMBER: _ClassVar[int]
    Z_FIELD_NUMBER: _ClassVar[int]
    name: str
    x: float
    y: float
    z: float
    def __init__(self, name: _Optional[str] = ..., x: _Optional[float] = ..., y: _Optional[float] = ..., z: _Optional[float] = ...) -> None: ...

class ListAlgorithmsRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListAlgorithmsResult(_message.Message):
    __slots__ = ["algorithms"]
    ALGORITHMS_FIELD_NUMBER: _ClassVar[int]
    algorithms: _containers.RepeatedCompositeFieldContainer[Algorithm]
    def __init__(self, algorithms: _Optional[_Iterable[_Union[Algorithm, _Mapping]]] = ...) -> None: ...

class ListGalleriesRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListGalleriesResult(_message.Message):
    __slots__ = ["galleries"]
    GALLERIES_FIELD_NUMBER: _ClassVar[int]
    galleries: _containers.RepeatedCompositeFieldContainer[Gallery]
    def __init__(self, galleries: _Optional[_Iterable[_Union[Gallery, _Mapping]]] = ...) -> None: ...

class ListIdentifiersRequest(_message.Message):
    __slots__ = ["after", "gallery", "limit"]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    GALLERY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    after: str
    gallery: str
    limit: int
    def __init__(self, gallery: _Optional[str] = ..., after: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListIdentifiersResult(_message.Message):
    __slots__ = ["identifiers", "next"]
    IDENTIFIERS_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIELD_NUMBER: _ClassVar[int]
    identifiers: _containers.RepeatedScalarFieldContainer[str]
    next: str
    def __init__(self, identifiers: _Optional[_Iterable[str]] = ..., next: _Optional[str] = ...) -> None: ...

class LivenessPolicy(_message.Message):
    __slots__ = ["authenticate", "identify", "register", "strict"]
    AUTHENTICATE_FIELD_NUMBER: _ClassVar[int]
    IDENTIFY_FIELD_NUMBER: _ClassVar[int]
    REGISTER_FIELD_NUMBER: _ClassVar[int]
    STRICT_FIELD_NUMBER: _ClassVar[int]
    authenticate: bool
    identify: bool
    register: bool
    strict: bool
    def __init__(self, authenticate: bool = ..., identify: bool = ..., register: bool = ..., strict: bool = ...) -> None: ...

class LivenessProfile(_message.Message):
    __slots__ = ["frames", "k", "ranges", "realistic_depth_lower", "realistic_depth_upper"]
    class Range(_message.Message):
        __slots__ = ["lower", "statistic", "upper"]
        LOWER_FIELD_NUMBER: _ClassVar[int]
        STATISTIC_FIELD_NUMBER: _ClassVar[int]
        UPPER_FIELD_NUMBER: _ClassVar[int]
        lower: float
        statistic: str
        upper: float
        def __init__(self, statistic: _Optional[str] = ..., lower: _Optional[float] = ..., upper: _Optional[float] = ...) -> None: ...
    FRAMES_FIELD_NUMBER: _ClassVar[int]
    K_FIELD_NUMBER: _ClassVar[int]
    RANGES_FIELD_NUMBER: _ClassVar[int]
    REALISTIC_DEPTH_LOWER_FIELD_NUMBER: _ClassVar[int]
    REALISTIC_DEPTH_UPPER_FIELD_NUMBER: _ClassVar[int]
    frames: int
    k: float
    ranges: _containers.RepeatedCompositeFieldContainer[LivenessProfile.Range]
    realistic_depth_lower: float
    realistic_depth_upper: float
    def __init__(self, ranges: _Optional[_Iterable[_Union[LivenessProfile.Range, _Mapping]]] = ..., realistic_depth_lower: _Optional[float] = ..., realistic_depth_upper: _Optional[float] = ..., k: _Optional[float] = ..., frames: _Optional[int] = ...) -> None: ...

class LivenessProfileEntry(_message.Message):
    __slots__ = ["identifier", "profile"]
    IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    identifier: str
    profile: LivenessProfile
    def __init__(self, identifier: _Optional[str] = ..., profile: _Optional[_Union[LivenessProfile, _Mapping]] = ...) -> None: ...

class LivenessProfileResult(_message.Message):
    __slots__ = ["profile"]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    profile: LivenessProfile
    def __init__(self, profile: _Optional[_Union[LivenessProfile, _Mapping]] = ...) -> None: ...

class LivenessVerdict(_message.Message):
    __slots__ = ["checks", "failed", "live", "reason", "thresholds", "valid_samples"]
    class Check(_message.Message):
        __slots__ = ["check", "condition", "mandatory", "passed", "threshold", "value"]
        CHECK_FIELD_NUMBER: _ClassVar[int]
        CONDITION_FIELD_NUMBER: _ClassVar[int]
        MANDATORY_FIELD_NUMBER: _ClassVar[int]
        PASSED_FIELD_NUMBER: _ClassVar[int]
        THRESHOLD_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        check: str
        condition: str
        mandatory: bool
        passed: bool
        threshold: str
        value: float
        def __init__(self, check: _Optional[str] = ..., mandatory: bool = ..., value: _Optional[float] = ..., threshold: _Optional[str] = ..., passed: bool = ..., condition: _Optional[str] = ...) -> None: ...
    CHECKS_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    LIVE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    THRESHOLDS_FIELD_NUMBER: _ClassVar[int]
    VALID_SAMPLES_FIELD_NUMBER: _ClassVar[int]
    checks: _containers.RepeatedCompositeFieldContainer[LivenessVerdict.Check]
    failed: _containers.RepeatedScalarFieldContainer[str]
    live: bool
    reason: str
    thresholds: str
    valid_samples: int
    def __init__(self, live: bool = ..., valid_samples: _Optional[int] = ..., thresholds: _Optional[str] = ..., checks: _Optional[_Iterable[_Union[LivenessVerdict.Check, _Mapping]]] = ..., failed: _Optional[_Iterable[str]] = ..., reason: _Optional[str] = ...) -> None: ...

class Match(_message.Message):
    __slots__ = ["identifier", "score", "template_id"]
    IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_ID_FIELD_NUMBER: _ClassVar[int]
    identifier: str
    score: float
    template_id: int
    def __init__(self, identifier: _Optional[str] = ..., score: _Optional[float] = ..., template_id: _Optional[int] = ...) -> None: ...

class MigrationStatusRequest(_message.Message):
    __slots__ = ["gallery"]
    GALLERY_FIELD_NUMBER: _ClassVar[int]
    gallery: str
    def __init__(self, gallery: _Optional[str] = ...) -> None: ...

class MigrationStatusResult(_message.Message):
    __slots__ = ["registries"]
    class Entry(_message.Message):
        __slots__ = ["algorithm", "gallery_identifiers", "identifiers_held"]
        ALGORITHM_FIELD_NUMBER: _ClassVar[int]
        GALLERY_IDENTIFIERS_FIELD_NUMBER: _ClassVar[int]
        IDENTIFIERS_HELD_FIELD_NUMBER: _ClassVar[int]
        algorithm: int
        gallery_identifiers: int
        identifiers_held: int
        def __init__(self, algorithm: _Optional[int] = ..., identifiers_held: _Optional[int] = ..., gallery_identifiers: _Optional[int] = ...) -> None: ...
    REGISTRIES_FIELD_NUMBER: _ClassVar[int]
    registries: _containers.RepeatedCompositeFieldContainer[MigrationStatusResult.Entry]
    def __init__(self, registries: _Optional[_Iterable[_Union[MigrationStatusResult.Entry, _Mapping]]] = ...) -> None: ...

class QualityAssessment(_message.Message):
    __slots__ = ["components", "rating", "score", "weakest"]
    class Component(_message.Message):
        __slots__ = ["name", "value"]
        NAME_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        name: str
        value: float
        def __init__(self, name: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    COMPONENTS_FIELD_NUMBER: _ClassVar[int]
    RATING_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    WEAKEST_FIELD_NUMBER: _ClassVar[int]
    components: _containers.RepeatedCompositeFieldContainer[QualityAssessment.Component]
    rating: str
    score: float
    weakest: str
    def __init__(self, score: _Optional[float] = ..., rating: _Optional[str] = ..., components: _Optional[_Iterable[_Union[QualityAssessment.Component, _Mapping]]] = ..., weakest: _Optional[str] = ...) -> None: ...

class QualityTooLow(_message.Message):
    __slots__ = ["algorithm", "assessment", "minimum", "missing"]
    ALGORITHM_FIELD_NUMBER: _ClassVar[int]
    ASSESSMENT_FIELD_NUMBER: _ClassVar[int]
    MINIMUM_FIELD_NUMBER: _ClassVar[int]
    MISSING_FIELD_NUMBER: _ClassVar[int]
    algorithm: int
    assessment: QualityAssessment
    minimum: float
    missing: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, algorithm: _Optional[int] = ..., minimum: _Optional[float] = ..., assessment: _Optional[_Union[QualityAssessment, _Mapping]] = ..., missing: _Optional[_Iterable[str]] = ...) -> None: ...

class RegisterRequest(_message.Message):
    __slots__ = ["face", "force", "gallery", "identifier"]
    FACE_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    GALLERY_FIELD_NUMBER: _ClassVar[int]
    IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    face: Face
    force: bool
    gallery: str
    identifier: str
    def __init__(self, gallery: _Optional[str] = ..., identifier: _Optional[str] = ..., face: _Optional[_Union[Face, _Mapping]] = ..., force: bool = ...) -> None: ...

class RegisterResult(_message.Message):
    __slots__ = ["findings", "liveness", "quality", "stored"]
    FINDINGS_FIELD_NUMBER: _ClassVar[int]
    LIVENESS_FIELD_NUMBER: _ClassVar[int]
    QUALITY_FIELD_NUMBER: _ClassVar[int]
    STORED_FIELD_NUMBER: _ClassVar[int]
    findings: _containers.RepeatedCompositeFieldContainer[RegistrationFinding]
    liveness: LivenessVerdict
    quality: QualityAssessment
    stored: _containers.RepeatedCompositeFieldContainer[StoredTemplate]
    def __init__(self, stored: _Optional[_Iterable[_Union[StoredTemplate, _Mapping]]] = ..., findings: _Optional[_Iterable[_Union[RegistrationFinding, _Mapping]]] = ..., quality: _Optional[_Union[QualityAssessment, _Mapping]] = ..., liveness: _Optional[_Union[LivenessVerdict, _Mapping]] = ...) -> None: ...

class RegistrationFinding(_message.Message):
    __slots__ = ["algorithm", "face_mismatch", "similar_face"]
    ALGORITHM_FIELD_NUMBER: _ClassVar[int]
    FACE_MISMATCH_FIELD_NUMBER: _ClassVar[int]
    SIMILAR_FACE_FIELD_NUMBER: _ClassVar[int]
    algorithm: int
    face_mismatch: FaceMismatch
    similar_face: SimilarFace
    def __init__(self, algorithm: _Optional[int] = ..., similar_face: _Optional[_Union[SimilarFace, _Mapping]] = ..., face_mismatch: _Optional[_Union[FaceMismatch, _Mapping]] = ...) -> None: ...

class Registry(_message.Message):
    __slots__ = ["algorithm", "identifier_count", "minimum_auto_enrolment_quality", "minimum_quality", "template_count", "thresholds"]
    ALGORITHM_FIELD_NUMBER: _ClassVar[int]
    IDENTIFIER_COUNT_FIELD_NUMBER: _ClassVar[int]
    MINIMUM_AUTO_ENROLMENT_QUALITY_FIELD_NUMBER: _ClassVar[int]
    MINIMUM_QUALITY_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_COUNT_FIELD_NUMBER: _ClassVar[int]
    THRESHOLDS_FIELD_NUMBER: _ClassVar[int]
    algorithm: Algorithm
    identifier_count: int
    minimum_auto_enrolment_quality: float
    minimum_quality: float
    template_count: int
    thresholds: Thresholds
    def __init__(self, algorithm: _Optional[_Union[Algorithm, _Mapping]] = ..., thresholds: _Optional[_Union[Thresholds, _Mapping]] = ..., template_count: _Optional[int] = ..., identifier_count: _Optional[int] = ..., minimum_quality: _Optional[float] = ..., minimum_auto_enrolment_quality: _Optional[float] = ...) -> None: ...

class Request(_message.Message):
    __slots__ = ["audit", "authenticate", "backup", "define_gallery", "delete_gallery", "delete_identifier", "delete_liveness_profile", "delete_template", "enrol_liveness_profile", "export", "get_liveness_profile", "get_templates", "hello", "id", "identify", "list_algorithms", "list_galleries", "list_identifiers", "migration_status", "register", "set_encryption_key", "stats", "verify"]
    AUDIT_FIELD_NUMBER: _ClassVar[int]
    AUTHENTICATE_FIELD_NUMBER: _ClassVar[int]
    BACKUP_FIELD_NUMBER: _ClassVar[int]
    DEFINE_GALLERY_FIELD_NUMBER: _ClassVar[int]
    DELETE_GALLERY_FIELD_NUMBER: _ClassVar[int]
    DELETE_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    DELETE_LIVENESS_PROFILE_FIELD_NUMBER: _ClassVar[int]
    DELETE_TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    ENROL_LIVENESS_PROFILE_FIELD_NUMBER: _ClassVar[int]
    EXPORT_FIELD_NUMBER: _ClassVar[int]
    GET_LIVENESS_PROFILE_FIELD_NUMBER: _ClassVar[int]
    GET_TEMPLATES_FIELD_NUMBER: _ClassVar[int]
    HELLO_FIELD_NUMBER: _ClassVar[int]
    IDENTIFY_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    IMPORT_FIELD_NUMBER: _ClassVar[int]
    LIST_ALGORITHMS_FIELD_NUMBER: _ClassVar[int]
    LIST_GALLERIES_FIELD_NUMBER: _ClassVar[int]
    LIST_IDENTIFIERS_FIELD_NUMBER: _ClassVar[int]
    MIGRATION_STATUS_FIELD_NUMBER: _ClassVar[int]
    REGISTER_FIELD_NUMBER: _ClassVar[int]
    SET_ENCRYPTION_KEY_FIELD_NUMBER: _ClassVar[int]
    STATS_FIELD_NUMBER: _ClassVar[int]
    VERIFY_FIELD_NUMBER: _ClassVar[int]
    audit: AuditQueryRequest
    authenticate: AuthenticateRequest
    backup: BackupRequest
    define_gallery: DefineGalleryRequest
    delete_gallery: DeleteGalleryRequest
    delete_identifier: DeleteIdentifierRequest
    delete_liveness_profile: DeleteLivenessProfileRequest
    delete_template: DeleteTemplateRequest
    enrol_liveness_profile: EnrolLivenessProfileRequest
    export: ExportRequest
    get_liveness_profile: GetLivenessProfileRequest
    get_templates: GetTemplatesRequest
    hello: Hello
    id: int
    identify: IdentifyRequest
    list_algorithms: ListAlgorithmsRequest
    list_galleries: ListGalleriesRequest
    list_identifiers: ListIdentifiersRequest
    migration_status: MigrationStatusRequest
    register: RegisterRequest
    set_encryption_key: SetEncryptionKeyRequest
    stats: StatsRequest
    verify: VerifyRequest
    def __init__(self, id: _Optional[int] = ..., hello: _Optional[_Union[Hello, _Mapping]] = ..., register: _Optional[_Union[RegisterRequest, _Mapping]] = ..., identify: _Optional[_Union[IdentifyRequest, _Mapping]] = ..., authenticate: _Optional[_Union[AuthenticateRequest, _Mapping]] = ..., list_galleries: _Optional[_Union[ListGalleriesRequest, _Mapping]] = ..., list_algorithms: _Optional[_Union[ListAlgorithmsRequest, _Mapping]] = ..., list_identifiers: _Optional[_Union[ListIdentifiersRequest, _Mapping]] = ..., get_templates: _Optional[_Union[GetTemplatesRequest, _Mapping]] = ..., delete_template: _Optional[_Union[DeleteTemplateRequest, _Mapping]] = ..., delete_identifier: _Optional[_Union[DeleteIdentifierRequest, _Mapping]] = ..., delete_gallery: _Optional[_Union[DeleteGalleryRequest, _Mapping]] = ..., define_gallery: _Optional[_Union[DefineGalleryRequest, _Mapping]] = ..., migration_status: _Optional[_Union[MigrationStatusRequest, _Mapping]] = ..., stats: _Optional[_Union[StatsRequest, _Mapping]] = ..., export: _Optional[_Union[ExportRequest, _Mapping]] = ..., backup: _Optional[_Union[BackupRequest, _Mapping]] = ..., verify: _Optional[_Union[VerifyRequest, _Mapping]] = ..., enrol_liveness_profile: _Optional[_Union[EnrolLivenessProfileRequest, _Mapping]] = ..., get_liveness_profile: _Optional[_Union[GetLivenessProfileRequest, _Mapping]] = ..., delete_liveness_profile: _Optional[_Union[DeleteLivenessProfileRequest, _Mapping]] = ..., audit: _Optional[_Union[AuditQueryRequest, _Mapping]] = ..., set_encryption_key: _Optional[_Union[SetEncryptionKeyRequest, _Mapping]] = ..., **kwargs) -> None: ...

class Response(_message.Message):
    __slots__ = ["audit", "authenticate", "backup", "define_gallery", "delete_gallery", "delete_identifier", "delete_liveness_profile", "delete_template", "enrol_liveness_profile", "error", "export", "get_liveness_profile", "get_templates", "hello", "id", "identify", "list_algorithms", "list_galleries", "list_identifiers", "migration_status", "register", "set_encryption_key", "stats", "verify"]
    AUDIT_FIELD_NUMBER: _ClassVar[int]
    AUTHENTICATE_FIELD_NUMBER: _ClassVar[int]
    BACKUP_FIELD_NUMBER: _ClassVar[int]
    DEFINE_GALLERY_FIELD_NUMBER: _ClassVar[int]
    DELETE_GALLERY_FIELD_NUMBER: _ClassVar[int]
    DELETE_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    DELETE_LIVENESS_PROFILE_FIELD_NUMBER: _ClassVar[int]
    DELETE_TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    ENROL_LIVENESS_PROFILE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    EXPORT_FIELD_NUMBER: _ClassVar[int]
    GET_LIVENESS_PROFILE_FIELD_NUMBER: _ClassVar[int]
    GET_TEMPLATES_FIELD_NUMBER: _ClassVar[int]
    HELLO_FIELD_NUMBER: _ClassVar[int]
    IDENTIFY_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    IMPORT_FIELD_NUMBER: _ClassVar[int]
    LIST_ALGORITHMS_FIELD_NUMBER: _ClassVar[int]
    LIST_GALLERIES_FIELD_NUMBER: _ClassVar[int]
    LIST_IDENTIFIERS_FIELD_NUMBER: _ClassVar[int]
    MIGRATION_STATUS_FIELD_NUMBER: _ClassVar[int]
    REGISTER_FIELD_NUMBER: _ClassVar[int]
    SET_ENCRYPTION_KEY_FIELD_NUMBER: _ClassVar[int]
    STATS_FIELD_NUMBER: _ClassVar[int]
    VERIFY_FIELD_NUMBER: _ClassVar[int]
    audit: AuditQueryResult
    authenticate: AuthenticateResult
    backup: BackupResult
    define_gallery: Gallery
    delete_gallery: DeleteGalleryResult
    delete_identifier: DeleteIdentifierResult
    delete_liveness_profile: DeleteLivenessProfileResult
    delete_template: DeleteTemplateResult
    enrol_liveness_profile: LivenessProfileResult
    error: Error
    export: ExportResult
    get_liveness_profile: LivenessProfileResult
    get_templates: GetTemplatesResult
    hello: HelloResult
    id: int
    identify: IdentifyResult
    list_algorithms: ListAlgorithmsResult
    list_galleries: ListGalleriesResult
    list_identifiers: ListIdentifiersResult
    migration_status: MigrationStatusResult
    register: RegisterResult
    set_encryption_key: SetEncryptionKeyResult
    stats: StatsResult
    verify: VerifyResult
    def __init__(self, id: _Optional[int] = ..., error: _Optional[_Union[Error, _Mapping]] = ..., hello: _Optional[_Union[HelloResult, _Mapping]] = ..., register: _Optional[_Union[RegisterResult, _Mapping]] = ..., identify: _Optional[_Union[IdentifyResult, _Mapping]] = ..., authenticate: _Optional[_Union[AuthenticateResult, _Mapping]] = ..., list_galleries: _Optional[_Union[ListGalleriesResult, _Mapping]] = ..., list_algorithms: _Optional[_Union[ListAlgorithmsResult, _Mapping]] = ..., list_identifiers: _Optional[_Union[ListIdentifiersResult, _Mapping]] = ..., get_templates: _Optional[_Union[GetTemplatesResult, _Mapping]] = ..., delete_template: _Optional[_Union[DeleteTemplateResult, _Mapping]] = ..., delete_identifier: _Optional[_Union[DeleteIdentifierResult, _Mapping]] = ..., delete_gallery: _Optional[_Union[DeleteGalleryResult, _Mapping]] = ..., define_gallery: _Optional[_Union[Gallery, _Mapping]] = ..., migration_status: _Optional[_Union[MigrationStatusResult, _Mapping]] = ..., stats: _Optional[_Union[StatsResult, _Mapping]] = ..., export: _Optional[_Union[ExportResult, _Mapping]] = ..., backup: _Optional[_Union[BackupResult, _Mapping]] = ..., verify: _Optional[_Union[VerifyResult, _Mapping]] = ..., enrol_liveness_profile: _Optional[_Union[LivenessProfileResult, _Mapping]] = ..., get_liveness_profile: _Optional[_Union[LivenessProfileResult, _Mapping]] = ..., delete_liveness_profile: _Optional[_Union[DeleteLivenessProfileResult, _Mapping]] = ..., audit: _Optional[_Union[AuditQueryResult, _Mapping]] = ..., set_encryption_key: _Optional[_Union[SetEncryptionKeyResult, _Mapping]] = ..., **kwargs) -> None: ...

class SetEncryptionKeyRequest(_message.Message):
    __slots__ = ["key_file"]
    KEY_FILE_FIELD_NUMBER: _ClassVar[int]
    key_file: str
    def __init__(self, key_file: _Optional[str] = ...) -> None: ...

class SetEncryptionKeyResult(_message.Message):
    __slots__ = ["templates"]
    TEMPLATES_FIELD_NUMBER: _ClassVar[int]
    templates: int
    def __init__(self, templates: _Optional[int] = ...) -> None: ...

class SimilarFace(_message.Message):
    __slots__ = ["identifier", "score"]
    IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    identifier: str
    score: float
    def __init__(self, identifier: _Optional[str] = ..., score: _Optional[float] = ...) -> None: ...

class StatsRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class StatsResult(_message.Message):
    __slots__ = ["commits", "committed_operations", "fleet", "galleries", "metrics", "open_connections", "operations", "prefilter_rows_considered", "prefilter_rows_rescored", "requests_served", "scan_kernels", "server_version", "store_bytes", "uptime_seconds", "writer"]
    class Fleet(_message.Message):
        __slots__ = ["applied_position", "database_reachable", "fleet_id", "head_position", "lag_entries", "lag_seconds", "node"]
        APPLIED_POSITION_FIELD_NUMBER: _ClassVar[int]
        DATABASE_REACHABLE_FIELD_NUMBER: _ClassVar[int]
        FLEET_ID_FIELD_NUMBER: _ClassVar[int]
        HEAD_POSITION_FIELD_NUMBER: _ClassVar[int]
        LAG_ENTRIES_FIELD_NUMBER: _ClassVar[int]
        LAG_SECONDS_FIELD_NUMBER: _ClassVar[int]
        NODE_FIELD_NUMBER: _ClassVar[int]
        applied_position: int
        database_reachable: bool
        fleet_id: str
        head_position: int
        lag_entries: int
        lag_seconds: float
        node: str
        def __init__(self, node: _Optional[str] = ..., applied_position: _Optional[int] = ..., head_position: _Optional[int] = ..., lag_entries: _Optional[int] = ..., lag_seconds: _Optional[float] = ..., database_reachable: bool = ..., fleet_id: _Optional[str] = ...) -> None: ...
    class Latency(_message.Message):
        __slots__ = ["mean_seconds", "p50_seconds", "p99_seconds"]
        MEAN_SECONDS_FIELD_NUMBER: _ClassVar[int]
        P50_SECONDS_FIELD_NUMBER: _ClassVar[int]
        P99_SECONDS_FIELD_NUMBER: _ClassVar[int]
        mean_seconds: float
        p50_seconds: float
        p99_seconds: float
        def __init__(self, mean_seconds: _Optional[float] = ..., p50_seconds: _Optional[float] = ..., p99_seconds: _Optional[float] = ...) -> None: ...
    class OperationStats(_message.Message):
        __slots__ = ["errors", "latency", "match", "no_match", "ok", "operation", "refused"]
        class ErrorsEntry(_message.Message):
            __slots__ = ["key", "value"]
            KEY_FIELD_NUMBER: _ClassVar[int]
            VALUE_FIELD_NUMBER: _ClassVar[int]
            key: str
            value: int
            def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
        ERRORS_FIELD_NUMBER: _ClassVar[int]
        LATENCY_FIELD_NUMBER: _ClassVar[int]
        MATCH_FIELD_NUMBER: _ClassVar[int]
        NO_MATCH_FIELD_NUMBER: _ClassVar[int]
        OK_FIELD_NUMBER: _ClassVar[int]
        OPERATION_FIELD_NUMBER: _ClassVar[int]
        REFUSED_FIELD_NUMBER: _ClassVar[int]
        errors: _containers.ScalarMap[str, int]
        latency: StatsResult.Latency
        match: int
        no_match: int
        ok: int
        operation: str
        refused: int
        def __init__(self, operation: _Optional[str] = ..., ok: _Optional[int] = ..., match: _Optional[int] = ..., no_match: _Optional[int] = ..., refused: _Optional[int] = ..., errors: _Optional[_Mapping[str, int]] = ..., latency: _Optional[_Union[StatsResult.Latency, _Mapping]] = ...) -> None: ...
    class WriterStats(_message.Message):
        __slots__ = ["commit_latency", "queue_depth"]
        COMMIT_LATENCY_FIELD_NUMBER: _ClassVar[int]
        QUEUE_DEPTH_FIELD_NUMBER: _ClassVar[int]
        commit_latency: StatsResult.Latency
        queue_depth: int
        def __init__(self, queue_depth: _Optional[int] = ..., commit_latency: _Optional[_Union[StatsResult.Latency, _Mapping]] = ...) -> None: ...
    COMMITS_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OPERATIONS_FIELD_NUMBER: _ClassVar[int]
    FLEET_FIELD_NUMBER: _ClassVar[int]
    GALLERIES_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    OPEN_CONNECTIONS_FIELD_NUMBER: _ClassVar[int]
    OPERATIONS_FIELD_NUMBER: _ClassVar[int]
    PREFILTER_ROWS_CONSIDERED_FIELD_NUMBER: _ClassVar[int]
    PREFILTER_ROWS_RESCORED_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_SERVED_FIELD_NUMBER: _ClassVar[int]
    SCAN_KERNELS_FIELD_NUMBER: _ClassVar[int]
    SERVER_VERSION_FIELD_NUMBER: _ClassVar[int]
    STORE_BYTES_FIELD_NUMBER: _ClassVar[int]
    UPTIME_SECONDS_FIELD_NUMBER: _ClassVar[int]
    WRITER_FIELD_NUMBER: _ClassVar[int]
    commits: int
    committed_operations: int
    fleet: StatsResult.Fleet
    galleries: _containers.RepeatedCompositeFieldContainer[Gallery]
    metrics: str
    open_connections: int
    operations: _containers.RepeatedCompositeFieldContainer[StatsResult.OperationStats]
    prefilter_rows_considered: int
    prefilter_rows_rescored: int
    requests_served: int
    scan_kernels: str
    server_version: str
    store_bytes: int
    uptime_seconds: int
    writer: StatsResult.WriterStats
    def __init__(self, server_version: _Optional[str] = ..., uptime_seconds: _Optional[int] = ..., open_connections: _Optional[int] = ..., requests_served: _Optional[int] = ..., store_bytes: _Optional[int] = ..., commits: _Optional[int] = ..., committed_operations: _Optional[int] = ..., galleries: _Optional[_Iterable[_Union[Gallery, _Mapping]]] = ..., scan_kernels: _Optional[str] = ..., prefilter_rows_considered: _Optional[int] = ..., prefilter_rows_rescored: _Optional[int] = ..., metrics: _Optional[str] = ..., operations: _Optional[_Iterable[_Union[StatsResult.OperationStats, _Mapping]]] = ..., writer: _Optional[_Union[StatsResult.WriterStats, _Mapping]] = ..., fleet: _Optional[_Union[StatsResult.Fleet, _Mapping]] = ...) -> None: ...

class StoredTemplate(_message.Message):
    __slots__ = ["algorithm", "id", "identifier", "landmark_quality", "quality", "registered_at_micros", "source", "template"]
    ALGORITHM_FIELD_NUMBER: _ClassVar[int]
    IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    LANDMARK_QUALITY_FIELD_NUMBER: _ClassVar[int]
    QUALITY_FIELD_NUMBER: _ClassVar[int]
    REGISTERED_AT_MICROS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    algorithm: int
    id: int
    identifier: str
    landmark_quality: float
    quality: float
    registered_at_micros: int
    source: TemplateSource
    template: Template
    def __init__(self, id: _Optional[int] = ..., identifier: _Optional[str] = ..., algorithm: _Optional[int] = ..., registered_at_micros: _Optional[int] = ..., source: _Optional[_Union[TemplateSource, str]] = ..., quality: _Optional[float] = ..., template: _Optional[_Union[Template, _Mapping]] = ..., landmark_quality: _Optional[float] = ...) -> None: ...

class Template(_message.Message):
    __slots__ = ["algorithm", "landmarks", "vector"]
    ALGORITHM_FIELD_NUMBER: _ClassVar[int]
    LANDMARKS_FIELD_NUMBER: _ClassVar[int]
    VECTOR_FIELD_NUMBER: _ClassVar[int]
    algorithm: int
    landmarks: _containers.RepeatedCompositeFieldContainer[Landmark]
    vector: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, algorithm: _Optional[int] = ..., vector: _Optional[_Iterable[float]] = ..., landmarks: _Optional[_Iterable[_Union[Landmark, _Mapping]]] = ...) -> None: ...

class TemplateProblem(_message.Message):
    __slots__ = ["actual", "algorithm", "expected", "index", "kind", "landmark", "norm"]
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = []
    ACTUAL_FIELD_NUMBER: _ClassVar[int]
    ALGORITHM_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    KIND_DUPLICATE_LANDMARK: TemplateProblem.Kind
    KIND_FIELD_NUMBER: _ClassVar[int]
    KIND_NON_FINITE_VALUE: TemplateProblem.Kind
    KIND_NOT_NORMALISED: TemplateProblem.Kind
    KIND_TOO_FEW_LANDMARKS: TemplateProblem.Kind
    KIND_UNKNOWN_LANDMARK: TemplateProblem.Kind
    KIND_UNSPECIFIED: TemplateProblem.Kind
    KIND_WRONG_DIMENSION: TemplateProblem.Kind
    KIND_WRONG_KIND: TemplateProblem.Kind
    KIND_ZERO_VECTOR: TemplateProblem.Kind
    LANDMARK_FIELD_NUMBER: _ClassVar[int]
    NORM_FIELD_NUMBER: _ClassVar[int]
    actual: int
    algorithm: int
    expected: int
    index: int
    kind: TemplateProblem.Kind
    landmark: str
    norm: float
    def __init__(self, algorithm: _Optional[int] = ..., kind: _Optional[_Union[TemplateProblem.Kind, str]] = ..., expected: _Optional[int] = ..., actual: _Optional[int] = ..., index: _Optional[int] = ..., norm: _Optional[float] = ..., landmark: _Optional[str] = ...) -> None: ...

class Thresholds(_message.Message):
    __slots__ = ["authentication", "auto_enrolment", "identification"]
    AUTHENTICATION_FIELD_NUMBER: _ClassVar[int]
    AUTO_ENROLMENT_FIELD_NUMBER: _ClassVar[int]
    IDENTIFICATION_FIELD_NUMBER: _ClassVar[int]
    authentication: float
    auto_enrolment: float
    identification: float
    def __init__(self, authentication: _Optional[float] = ..., identification: _Optional[float] = ..., auto_enrolment: _Optional[float] = ...) -> None: ...

class VerifyRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class VerifyResult(_message.Message):
    __slots__ = ["problems", "templates_checked"]
    PROBLEMS_FIELD_NUMBER: _ClassVar[int]
    TEMPLATES_CHECKED_FIELD_NUMBER: _ClassVar[int]
    problems: _containers.RepeatedScalarFieldContainer[str]
    templates_checked: int
    def __init__(self, templates_checked: _Optional[int] = ..., problems: _Optional[_Iterable[str]] = ...) -> None: ...

class ErrorCode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class TemplateSource(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
