package registry

import (
	"math"
	"sort"

	pb "registryd.local/client/registrypb"
)

// The built-in algorithms' version ids (PROTOCOL.md §4, Algorithms and scores). Operators may
// configure more vector algorithms: ListAlgorithms shows them all.
const (
	// AlgorithmArcFace: 128 floats, cosine score (the daemon L2-normalises them), threshold 0.6.
	AlgorithmArcFace uint32 = 24
	// AlgorithmDlib: 128 floats, half-cosine score, threshold 0.8.
	AlgorithmDlib uint32 = 16
	// AlgorithmR300: 512 floats with an L2 norm within 1 ± 0.01 (see Normalize), dot score, 0.6.
	AlgorithmR300 uint32 = 300
	// AlgorithmLandmarks: at least 15 named 3-D landmarks, threshold 0.65.
	AlgorithmLandmarks uint32 = 1000
	// AlgorithmLandmarksAligned: the same landmarks, aligned in 3-D before scoring, threshold 0.65.
	AlgorithmLandmarksAligned uint32 = 1001
)

// LandmarkNames is the landmark vocabulary of PROTOCOL.md §4, in the order LandmarkTemplate sends
// landmarks. Names are exact and case-sensitive.
var LandmarkNames = []string{
	"LEFT_EYE", "RIGHT_EYE", "LEFT_EYE_LEFT_CORNER", "LEFT_EYE_RIGHT_CORNER", "RIGHT_EYE_LEFT_CORNER",
	"RIGHT_EYE_RIGHT_CORNER", "LEFT_EYE_TOP_BOUNDARY", "LEFT_EYE_BOTTOM_BOUNDARY",
	"RIGHT_EYE_TOP_BOUNDARY", "RIGHT_EYE_BOTTOM_BOUNDARY", "NOSE_TIP", "MIDPOINT_BETWEEN_EYES",
	"NOSE_BOTTOM_CENTER", "NOSE_BOTTOM_LEFT", "NOSE_BOTTOM_RIGHT", "MOUTH_LEFT", "MOUTH_RIGHT",
	"UPPER_LIP", "LOWER_LIP", "MOUTH_CENTER", "RIGHT_OF_LEFT_EYEBROW", "LEFT_OF_LEFT_EYEBROW",
	"LEFT_OF_RIGHT_EYEBROW", "RIGHT_OF_RIGHT_EYEBROW", "CHIN_GNATHION", "LEFT_CHEEK_CENTER",
	"RIGHT_CHEEK_CENTER", "CHIN_LEFT_GONION", "CHIN_RIGHT_GONION", "FOREHEAD_GLABELLA",
	"LEFT_EAR_TRAGION", "RIGHT_EAR_TRAGION",
}

// Point is a landmark's position as the detector reports it (e.g. pixels); the daemon normalises
// position and scale.
type Point struct{ X, Y, Z float32 }

// NewFace returns a face made of the templates of one capture, at most one per algorithm: a client
// running two models sends both templates in one face, which is how the registry migrates people
// from one algorithm to the next.
func NewFace(templates ...*pb.Template) *pb.Face {
	return &pb.Face{Templates: templates}
}

// VectorTemplate returns a vector algorithm's template. The slice is referenced, not copied, until
// the request that carries it has been sent.
func VectorTemplate(algorithm uint32, vector []float32) *pb.Template {
	return &pb.Template{Algorithm: algorithm, Vector: vector}
}

// VectorFace returns a face with one vector template, e.g. VectorFace(AlgorithmArcFace, embedding).
func VectorFace(algorithm uint32, vector []float32) *pb.Face {
	return NewFace(VectorTemplate(algorithm, vector))
}

// LandmarkTemplate returns a landmark algorithm's template from named points, one per name, in the
// order of LandmarkNames (names outside the vocabulary follow, sorted; the daemon refuses them with
// INVALID_TEMPLATE, KIND_UNKNOWN_LANDMARK). A fixed order makes TemplateProblem.Index meaningful.
func LandmarkTemplate(algorithm uint32, points map[string]Point) *pb.Template {
	landmarks := make([]*pb.Landmark, 0, len(points))
	known := make(map[string]bool, len(LandmarkNames))
	for _, name := range LandmarkNames {
		known[name] = true
		if p, ok := points[name]; ok {
			landmarks = append(landmarks, &pb.Landmark{Name: name, X: p.X, Y: p.Y, Z: p.Z})
		}
	}
	var unknown []string
	for name := range points {
		if !known[name] {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	for _, name := range unknown {
		p := points[name]
		landmarks = append(landmarks, &pb.Landmark{Name: name, X: p.X, Y: p.Y, Z: p.Z})
	}
	return &pb.Template{Algorithm: algorithm, Landmarks: landmarks}
}

// LandmarkFace returns a face with one landmark template, e.g. LandmarkFace(AlgorithmLandmarks, points).
func LandmarkFace(algorithm uint32, points map[string]Point) *pb.Face {
	return NewFace(LandmarkTemplate(algorithm, points))
}

// Normalize returns a copy of vector scaled to an L2 norm of 1 (a "dot" algorithm such as r300
// needs it; the daemon normalises cosine ones itself). A zero vector is returned unchanged.
func Normalize(vector []float32) []float32 {
	var sum float64
	for _, v := range vector {
		sum += float64(v) * float64(v)
	}
	out := make([]float32, len(vector))
	if sum == 0 {
		copy(out, vector)
		return out
	}
	scale := 1 / math.Sqrt(sum)
	for i, v := range vector {
		out[i] = float32(float64(v) * scale)
	}
	return out
}

// Bool returns a pointer to b, for the optional bools of the protocol (IdentifyRequest.Safe and
// AutoEnrol, AuthenticateRequest.AutoEnrol): nil means true, Bool(false) turns them off.
func Bool(b bool) *bool { return &b }
