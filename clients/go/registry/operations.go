package registry

import (
	"context"

	pb "registryd.local/client/registrypb"
)

// The operations of PROTOCOL.md §4. Each takes the operation's request message (nil: an empty one,
// every field at its default) and returns its result message, or the error of Send.

// Register stores a face's templates under an identifier after the similar-face and mismatch checks
// (PROTOCOL.md §4 register). A refusal is a *RegistryError: SIMILAR_FACE_REGISTERED or FACE_MISMATCH
// with Decisive and Findings, INVALID_TEMPLATE with TemplateProblem, QUALITY_TOO_LOW, LIVENESS_FAILED.
func (c *Client) Register(ctx context.Context, req *pb.RegisterRequest) (*pb.RegisterResult, error) {
	if req == nil {
		req = &pb.RegisterRequest{}
	}
	return call(ctx, c, "register", &pb.Request{Operation: &pb.Request_Register{Register: req}}, (*pb.Response).GetRegister)
}

// Identify returns the identifiers whose templates match the face, best first (no match is an empty
// list, not an error). Safe and AutoEnrol default to true: set them to Bool(false) to turn them off.
func (c *Client) Identify(ctx context.Context, req *pb.IdentifyRequest) (*pb.IdentifyResult, error) {
	if req == nil {
		req = &pb.IdentifyRequest{}
	}
	return call(ctx, c, "identify", &pb.Request{Operation: &pb.Request_Identify{Identify: req}}, (*pb.Response).GetIdentify)
}

// Authenticate tells whether the face is the identifier's. A non-match is a result with
// Authenticated false, not an error; an identifier the gallery does not hold is
// IDENTIFIER_NOT_REGISTERED.
func (c *Client) Authenticate(ctx context.Context, req *pb.AuthenticateRequest) (*pb.AuthenticateResult, error) {
	if req == nil {
		req = &pb.AuthenticateRequest{}
	}
	return call(ctx, c, "authenticate", &pb.Request{Operation: &pb.Request_Authenticate{Authenticate: req}}, (*pb.Response).GetAuthenticate)
}

// ListGalleries returns every gallery with its registries in priority order and their counts.
func (c *Client) ListGalleries(ctx context.Context) ([]*pb.Gallery, error) {
	result, err := call(ctx, c, "list_galleries", &pb.Request{Operation: &pb.Request_ListGalleries{ListGalleries: &pb.ListGalleriesRequest{}}}, (*pb.Response).GetListGalleries)
	return result.GetGalleries(), err
}

// ListAlgorithms returns every algorithm the daemon knows, built-in and configured.
func (c *Client) ListAlgorithms(ctx context.Context) ([]*pb.Algorithm, error) {
	result, err := call(ctx, c, "list_algorithms", &pb.Request{Operation: &pb.Request_ListAlgorithms{ListAlgorithms: &pb.ListAlgorithmsRequest{}}}, (*pb.Response).GetListAlgorithms)
	return result.GetAlgorithms(), err
}

// ListIdentifiers returns one page of a gallery's identifiers in byte order; pass the result's Next
// (absent on the last page) as the next request's After.
func (c *Client) ListIdentifiers(ctx context.Context, req *pb.ListIdentifiersRequest) (*pb.ListIdentifiersResult, error) {
	if req == nil {
		req = &pb.ListIdentifiersRequest{}
	}
	return call(ctx, c, "list_identifiers", &pb.Request{Operation: &pb.Request_ListIdentifiers{ListIdentifiers: req}}, (*pb.Response).GetListIdentifiers)
}

// GetTemplates returns an identifier's templates in registration order (with their data when
// IncludeData is set).
func (c *Client) GetTemplates(ctx context.Context, req *pb.GetTemplatesRequest) ([]*pb.StoredTemplate, error) {
	if req == nil {
		req = &pb.GetTemplatesRequest{}
	}
	result, err := call(ctx, c, "get_templates", &pb.Request{Operation: &pb.Request_GetTemplates{GetTemplates: req}}, (*pb.Response).GetGetTemplates)
	return result.GetTemplates(), err
}

// DeleteTemplate deletes one template by id; it returns false when the gallery has no such template.
func (c *Client) DeleteTemplate(ctx context.Context, req *pb.DeleteTemplateRequest) (bool, error) {
	if req == nil {
		req = &pb.DeleteTemplateRequest{}
	}
	result, err := call(ctx, c, "delete_template", &pb.Request{Operation: &pb.Request_DeleteTemplate{DeleteTemplate: req}}, (*pb.Response).GetDeleteTemplate)
	return result.GetDeleted(), err
}

// DeleteIdentifier erases an identifier from a gallery (its templates in every registry and its
// liveness profile) and returns how many templates were deleted; 0 is not an error.
func (c *Client) DeleteIdentifier(ctx context.Context, req *pb.DeleteIdentifierRequest) (uint64, error) {
	if req == nil {
		req = &pb.DeleteIdentifierRequest{}
	}
	result, err := call(ctx, c, "delete_identifier", &pb.Request{Operation: &pb.Request_DeleteIdentifier{DeleteIdentifier: req}}, (*pb.Response).GetDeleteIdentifier)
	return result.GetTemplatesDeleted(), err
}

// DeleteGallery deletes a gallery and everything in it (not "default") and returns how many
// templates were deleted.
func (c *Client) DeleteGallery(ctx context.Context, req *pb.DeleteGalleryRequest) (uint64, error) {
	if req == nil {
		req = &pb.DeleteGalleryRequest{}
	}
	result, err := call(ctx, c, "delete_gallery", &pb.Request{Operation: &pb.Request_DeleteGallery{DeleteGallery: req}}, (*pb.Response).GetDeleteGallery)
	return result.GetTemplatesDeleted(), err
}

// DefineGallery creates or reconfigures a gallery (registry order, thresholds, new registries) and
// returns the gallery as now defined. When you send thresholds, set all three.
func (c *Client) DefineGallery(ctx context.Context, req *pb.DefineGalleryRequest) (*pb.Gallery, error) {
	if req == nil {
		req = &pb.DefineGalleryRequest{}
	}
	return call(ctx, c, "define_gallery", &pb.Request{Operation: &pb.Request_DefineGallery{DefineGallery: req}}, (*pb.Response).GetDefineGallery)
}

// MigrationStatus returns, per registry of the gallery, how many of its identifiers it holds.
func (c *Client) MigrationStatus(ctx context.Context, req *pb.MigrationStatusRequest) ([]*pb.MigrationStatusResult_Entry, error) {
	if req == nil {
		req = &pb.MigrationStatusRequest{}
	}
	result, err := call(ctx, c, "migration_status", &pb.Request{Operation: &pb.Request_MigrationStatus{MigrationStatus: req}}, (*pb.Response).GetMigrationStatus)
	return result.GetRegistries(), err
}

// Stats returns the daemon's version, uptime, connections, requests served, store size and counters.
func (c *Client) Stats(ctx context.Context) (*pb.StatsResult, error) {
	return call(ctx, c, "stats", &pb.Request{Operation: &pb.Request_Stats{Stats: &pb.StatsRequest{}}}, (*pb.Response).GetStats)
}

// Export returns one page of a gallery's templates with data, in registration order;
// NextAfterTemplateId is 0 on the last page. The page holds biometric data: do not log it.
func (c *Client) Export(ctx context.Context, req *pb.ExportRequest) (*pb.ExportResult, error) {
	if req == nil {
		req = &pb.ExportRequest{}
	}
	return call(ctx, c, "export", &pb.Request{Operation: &pb.Request_Export{Export: req}}, (*pb.Response).GetExport)
}

// Import stores templates without the register checks, all or none, and returns their ids in item
// order.
func (c *Client) Import(ctx context.Context, req *pb.ImportRequest) ([]uint64, error) {
	if req == nil {
		req = &pb.ImportRequest{}
	}
	result, err := call(ctx, c, "import", &pb.Request{Operation: &pb.Request_Import{Import: req}}, (*pb.Response).GetImport)
	return result.GetTemplateIds(), err
}

// Backup has the daemon make a compacting hot copy of the store in a new directory it names (the
// copy's UTC start time, 20261126T234000Z) inside its backup root, or inside req.Directory when the
// daemon's configuration allows that one (backup.allowedDirectories; an absolute path on the daemon's
// side, any other refused with PERMISSION_DENIED). A nil request or an empty Directory: the root.
// The result gives the directory written (Directory) and the copy's size in bytes (Bytes).
func (c *Client) Backup(ctx context.Context, req *pb.BackupRequest) (*pb.BackupResult, error) {
	if req == nil {
		req = &pb.BackupRequest{}
	}
	return call(ctx, c, "backup", &pb.Request{Operation: &pb.Request_Backup{Backup: req}}, (*pb.Response).GetBackup)
}

// Verify checks the store against itself and the in-memory index; Problems is empty when all is well.
func (c *Client) Verify(ctx context.Context) (*pb.VerifyResult, error) {
	return call(ctx, c, "verify", &pb.Request{Operation: &pb.Request_Verify{Verify: &pb.VerifyRequest{}}}, (*pb.Response).GetVerify)
}

// EnrolLivenessProfile learns an identifier's personalised liveness thresholds from depth frames
// over the seven enrolment poses.
func (c *Client) EnrolLivenessProfile(ctx context.Context, req *pb.EnrolLivenessProfileRequest) (*pb.LivenessProfile, error) {
	if req == nil {
		req = &pb.EnrolLivenessProfileRequest{}
	}
	result, err := call(ctx, c, "enrol_liveness_profile", &pb.Request{Operation: &pb.Request_EnrolLivenessProfile{EnrolLivenessProfile: req}}, (*pb.Response).GetEnrolLivenessProfile)
	return result.GetProfile(), err
}

// GetLivenessProfile returns the identifier's liveness profile, or nil when it has none.
func (c *Client) GetLivenessProfile(ctx context.Context, req *pb.GetLivenessProfileRequest) (*pb.LivenessProfile, error) {
	if req == nil {
		req = &pb.GetLivenessProfileRequest{}
	}
	result, err := call(ctx, c, "get_liveness_profile", &pb.Request{Operation: &pb.Request_GetLivenessProfile{GetLivenessProfile: req}}, (*pb.Response).GetGetLivenessProfile)
	return result.GetProfile(), err
}

// DeleteLivenessProfile erases the identifier's liveness profile (its templates stay) and reports
// whether there was one.
func (c *Client) DeleteLivenessProfile(ctx context.Context, req *pb.DeleteLivenessProfileRequest) (bool, error) {
	if req == nil {
		req = &pb.DeleteLivenessProfileRequest{}
	}
	result, err := call(ctx, c, "delete_liveness_profile", &pb.Request{Operation: &pb.Request_DeleteLivenessProfile{DeleteLivenessProfile: req}}, (*pb.Response).GetDeleteLivenessProfile)
	return result.GetDeleted(), err
}

// Audit returns the newest audit-trail entries matching the filters, oldest first.
func (c *Client) Audit(ctx context.Context, req *pb.AuditQueryRequest) ([]*pb.AuditEntry, error) {
	if req == nil {
		req = &pb.AuditQueryRequest{}
	}
	result, err := call(ctx, c, "audit", &pb.Request{Operation: &pb.Request_Audit{Audit: req}}, (*pb.Response).GetAudit)
	return result.GetEntries(), err
}

// SetEncryptionKey encrypts (or re-encrypts) every template at rest with the key in KeyFile, a path
// the daemon reads, and returns how many templates it wrote.
func (c *Client) SetEncryptionKey(ctx context.Context, req *pb.SetEncryptionKeyRequest) (uint64, error) {
	if req == nil {
		req = &pb.SetEncryptionKeyRequest{}
	}
	result, err := call(ctx, c, "set_encryption_key", &pb.Request{Operation: &pb.Request_SetEncryptionKey{SetEncryptionKey: req}}, (*pb.Response).GetSetEncryptionKey)
	return result.GetTemplates(), err
}
