package registry

import (
	"errors"
	"fmt"
	"strings"

	"registryd.local/client/registrypb"
)

// The error codes of PROTOCOL.md §5, named without the ERROR_CODE_ prefix.
const (
	CodeSimilarFaceRegistered   = registrypb.ErrorCode_ERROR_CODE_SIMILAR_FACE_REGISTERED
	CodeFaceMismatch            = registrypb.ErrorCode_ERROR_CODE_FACE_MISMATCH
	CodeIdentifierNotRegistered = registrypb.ErrorCode_ERROR_CODE_IDENTIFIER_NOT_REGISTERED
	CodeIncompatibleTemplates   = registrypb.ErrorCode_ERROR_CODE_INCOMPATIBLE_TEMPLATES
	CodeInvalidTemplate         = registrypb.ErrorCode_ERROR_CODE_INVALID_TEMPLATE
	CodeUnknownAlgorithm        = registrypb.ErrorCode_ERROR_CODE_UNKNOWN_ALGORITHM
	CodeUnknownGallery          = registrypb.ErrorCode_ERROR_CODE_UNKNOWN_GALLERY
	CodeQualityTooLow           = registrypb.ErrorCode_ERROR_CODE_QUALITY_TOO_LOW
	CodeLivenessFailed          = registrypb.ErrorCode_ERROR_CODE_LIVENESS_FAILED
	CodePermissionDenied        = registrypb.ErrorCode_ERROR_CODE_PERMISSION_DENIED
	CodeMalformedRequest        = registrypb.ErrorCode_ERROR_CODE_MALFORMED_REQUEST
	CodeFrameTooLarge           = registrypb.ErrorCode_ERROR_CODE_FRAME_TOO_LARGE
	CodeUnsupportedVersion      = registrypb.ErrorCode_ERROR_CODE_UNSUPPORTED_VERSION
	CodeStorageFull             = registrypb.ErrorCode_ERROR_CODE_STORAGE_FULL
	CodeShuttingDown            = registrypb.ErrorCode_ERROR_CODE_SHUTTING_DOWN
	CodeInternal                = registrypb.ErrorCode_ERROR_CODE_INTERNAL
	CodeTooManyConnections      = registrypb.ErrorCode_ERROR_CODE_TOO_MANY_CONNECTIONS
	CodeFleetUnavailable        = registrypb.ErrorCode_ERROR_CODE_FLEET_UNAVAILABLE
)

// RegistryError is the daemon's answer when it refuses or fails a request: the stable code, the
// message for people (it may change between versions: programs act on Code and the details), and the
// structured details the code carries. A request that failed stored nothing.
//
// The daemon never puts template values in Message, and Error() adds none.
type RegistryError struct {
	// Code is the error code. A value this client does not know (a newer daemon) should be treated
	// as CodeInternal, as PROTOCOL.md asks; Known reports whether it is one.
	Code registrypb.ErrorCode
	// Message is for people, not programs.
	Message string
	// RequestID is the id of the request answered (0: a connection-level error such as
	// TOO_MANY_CONNECTIONS or FRAME_TOO_LARGE, which the daemon cannot attribute to a request).
	RequestID uint64

	// Decisive and Findings: SIMILAR_FACE_REGISTERED and FACE_MISMATCH. Decisive is the finding that
	// decided; Findings lists every registry's finding in priority order, the decisive one included.
	Decisive *registrypb.RegistrationFinding
	Findings []*registrypb.RegistrationFinding
	// TemplateProblem: INVALID_TEMPLATE, what is wrong with which template (the first problem found).
	TemplateProblem *registrypb.TemplateProblem
	// QualityTooLow: QUALITY_TOO_LOW, the registry's minimum and the face's assessment.
	QualityTooLow *registrypb.QualityTooLow
	// Liveness: LIVENESS_FAILED, the verdict with every check and the failed ones.
	Liveness *registrypb.LivenessVerdict
}

func newRegistryError(requestID uint64, e *registrypb.Error) *RegistryError {
	return &RegistryError{
		Code:            e.GetCode(),
		Message:         e.GetMessage(),
		RequestID:       requestID,
		Decisive:        e.GetDecisive(),
		Findings:        e.GetFindings(),
		TemplateProblem: e.GetTemplateProblem(),
		QualityTooLow:   e.GetQualityTooLow(),
		Liveness:        e.GetLiveness(),
	}
}

// Error returns "registryd: CODE: message", e.g.
// "registryd: IDENTIFIER_NOT_REGISTERED: 'carol' is not registered in gallery 'default'".
func (e *RegistryError) Error() string {
	if e.Message == "" {
		return "registryd: " + CodeName(e.Code)
	}
	return "registryd: " + CodeName(e.Code) + ": " + e.Message
}

// Is makes errors.Is(err, ErrUnsupportedVersion) true for the daemon's UNSUPPORTED_VERSION refusal.
func (e *RegistryError) Is(target error) bool {
	return target == ErrUnsupportedVersion && e.Code == CodeUnsupportedVersion
}

// Known reports whether Code is one of the codes this client knows (protocol 1.2).
func (e *RegistryError) Known() bool {
	_, ok := registrypb.ErrorCode_name[int32(e.Code)]
	return ok && e.Code != registrypb.ErrorCode_ERROR_CODE_UNSPECIFIED
}

// Retryable reports whether the same request, unchanged, may succeed later (PROTOCOL.md §5):
// SHUTTING_DOWN (not carried out; retry on a new connection once the daemon is back),
// TOO_MANY_CONNECTIONS (no request was read; reconnect with back-off), STORAGE_FULL (nothing was
// stored; the write succeeds once space is freed) and FLEET_UNAVAILABLE (a fleet node could not
// reach the fleet's database; the write was carried out nowhere). In each case the request was not carried out, so
// sending it again cannot do it twice. Every other code gets the same answer for the same request
// (or, INTERNAL, needs an operator when it repeats).
func (e *RegistryError) Retryable() bool {
	return retryableCode(e.Code)
}

func retryableCode(code registrypb.ErrorCode) bool {
	switch code {
	case CodeShuttingDown, CodeTooManyConnections, CodeStorageFull, CodeFleetUnavailable:
		return true
	}
	return false
}

// ClosesConnection reports whether the daemon closes the connection after this error
// (FRAME_TOO_LARGE, UNSUPPORTED_VERSION, TOO_MANY_CONNECTIONS): the client is then unusable.
func (e *RegistryError) ClosesConnection() bool {
	switch e.Code {
	case CodeFrameTooLarge, CodeUnsupportedVersion, CodeTooManyConnections:
		return true
	}
	return false
}

// SimilarFace returns the decisive similar face of a SIMILAR_FACE_REGISTERED refusal: the identifier
// already registered with a similar face, its score, and the algorithm of the registry that found it.
func (e *RegistryError) SimilarFace() (face *registrypb.SimilarFace, algorithm uint32, ok bool) {
	if e.Code != CodeSimilarFaceRegistered || e.Decisive.GetSimilarFace() == nil {
		return nil, 0, false
	}
	return e.Decisive.GetSimilarFace(), e.Decisive.GetAlgorithm(), true
}

// FaceMismatch returns the decisive mismatch of a FACE_MISMATCH refusal: the best score of the
// identifier's own templates, and the algorithm of the registry that found it.
func (e *RegistryError) FaceMismatch() (mismatch *registrypb.FaceMismatch, algorithm uint32, ok bool) {
	if e.Code != CodeFaceMismatch || e.Decisive.GetFaceMismatch() == nil {
		return nil, 0, false
	}
	return e.Decisive.GetFaceMismatch(), e.Decisive.GetAlgorithm(), true
}

// CodeName is the code's name without the ERROR_CODE_ prefix ("SIMILAR_FACE_REGISTERED"), or
// "ERROR_CODE(n)" for a value this client does not know.
func CodeName(code registrypb.ErrorCode) string {
	if name, ok := registrypb.ErrorCode_name[int32(code)]; ok {
		return strings.TrimPrefix(name, "ERROR_CODE_")
	}
	return fmt.Sprintf("ERROR_CODE(%d)", int32(code))
}

// AsRegistryError returns the *RegistryError in err's chain, if any.
func AsRegistryError(err error) (*RegistryError, bool) {
	var registryError *RegistryError
	if errors.As(err, &registryError) {
		return registryError, true
	}
	return nil, false
}

// HasCode reports whether err is, or wraps, a *RegistryError with this code.
func HasCode(err error, code registrypb.ErrorCode) bool {
	registryError, ok := AsRegistryError(err)
	return ok && registryError.Code == code
}

// IsSimilarFaceRegistered reports whether a registration was refused because a similar face is
// registered under another identifier (details: RegistryError.SimilarFace, Findings).
func IsSimilarFaceRegistered(err error) bool { return HasCode(err, CodeSimilarFaceRegistered) }

// IsFaceMismatch reports whether a registration was refused because the identifier's templates do
// not match the face (details: RegistryError.FaceMismatch, Findings).
func IsFaceMismatch(err error) bool { return HasCode(err, CodeFaceMismatch) }

// IsIdentifierNotRegistered reports whether the identifier is not registered (authenticate,
// get_templates). A non-matching authentication is not an error: it is a result with
// Authenticated false.
func IsIdentifierNotRegistered(err error) bool { return HasCode(err, CodeIdentifierNotRegistered) }

// IsInvalidTemplate reports whether a template failed validation (details:
// RegistryError.TemplateProblem).
func IsInvalidTemplate(err error) bool { return HasCode(err, CodeInvalidTemplate) }

// IsRetryable reports whether err is a RegistryError the same request may overcome later
// (RegistryError.Retryable).
func IsRetryable(err error) bool {
	registryError, ok := AsRegistryError(err)
	return ok && registryError.Retryable()
}

var (
	// ErrClientClosed: Close was called; calls in flight and later calls fail with it.
	ErrClientClosed = errors.New("registry client closed")
	// ErrConnectionClosed: the daemon closed the connection (or it broke) before the response
	// arrived. By PROTOCOL.md §3 a request without a response on a closed connection was not carried
	// out, unless the daemon closed it at its drain deadline.
	ErrConnectionClosed = errors.New("the connection to registryd closed before the response arrived")
	// ErrProtocol: the daemon sent something this client cannot accept. An undecodable or oversized
	// frame, or a response out of order, closes the connection; a result of another operation, or of
	// one this client does not know (a newer daemon), fails only that call.
	ErrProtocol = errors.New("registryd protocol violation")
	// ErrUnsupportedVersion: the daemon and the client speak different major protocol versions
	// (a *VersionError from this client's check, or the daemon's UNSUPPORTED_VERSION refusal).
	ErrUnsupportedVersion = errors.New("unsupported registryd protocol version")
	// ErrRequestTooLarge: the request's frame exceeds the limit set by WithMaxRequestBytes (by
	// default the daemon's default, 4 MiB); it was not sent, and the connection stays usable.
	ErrRequestTooLarge = errors.New("request frame too large")
)

// TransportError is a failure to exchange frames with the daemon: Op is "dial", "write", "read",
// "protocol" or "close" (Close was called); Path is the socket. Err says why and wraps ErrConnectionClosed, ErrClientClosed,
// ErrProtocol or the system's error (e.g. syscall.ENOENT, syscall.ECONNREFUSED, syscall.EACCES).
type TransportError struct {
	Op   string
	Path string
	Err  error
}

func (e *TransportError) Error() string {
	switch e.Op {
	case "dial":
		return fmt.Sprintf("cannot reach registryd at %s: %v", e.Path, e.Err)
	default:
		return fmt.Sprintf("registryd at %s: %s: %v", e.Path, e.Op, e.Err)
	}
}

func (e *TransportError) Unwrap() error { return e.Err }

// VersionError: the daemon's Hello result names a major protocol version this client does not speak.
// The connection is closed.
type VersionError struct {
	ClientMajor, ServerMajor, ServerMinor uint32
	ServerVersion                         string
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("registryd %q speaks protocol %d.%d; this client speaks major version %d",
		e.ServerVersion, e.ServerMajor, e.ServerMinor, e.ClientMajor)
}

// Is makes errors.Is(err, ErrUnsupportedVersion) true.
func (e *VersionError) Is(target error) bool { return target == ErrUnsupportedVersion }
