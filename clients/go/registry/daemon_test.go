package registry_test

// Tests against a real registryd: the binary named by REGISTRYD_BINARY, started per test on a
// temporary socket and data directory and stopped with SIGTERM (it must exit 0). Without
// REGISTRYD_BINARY these tests are skipped; clients/go/run-tests always sets it.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"registryd.local/client/registry"
	pb "registryd.local/client/registrypb"
)

type daemon struct {
	binary  string
	dir     string
	args    []string
	socket  string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{}
	stopped bool
}

// startDaemon starts REGISTRYD_BINARY with --socket <tmp>/registryd.sock --data <tmp>/data and the
// extra arguments, and waits until it accepts connections; the test's cleanup stops it.
func startDaemon(t *testing.T, extraArgs ...string) *daemon {
	t.Helper()
	binary := os.Getenv("REGISTRYD_BINARY")
	if binary == "" {
		t.Skip("REGISTRYD_BINARY is not set: set it to a registryd executable to run the tests against a real daemon (clients/go/run-tests does)")
	}
	if !filepath.IsAbs(binary) {
		t.Fatalf("REGISTRYD_BINARY must be an absolute path (the tests run in the package's directory): %s", binary)
	}
	// Short: a Unix socket path is limited to 107 bytes.
	dir, err := os.MkdirTemp("", "registryd-go")
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{binary: binary, dir: dir, socket: filepath.Join(dir, "registryd.sock"), logPath: filepath.Join(dir, "registryd.log")}
	d.args = append([]string{"--socket", d.socket, "--data", filepath.Join(dir, "data")}, extraArgs...)
	t.Cleanup(func() {
		d.stop(t)
		if t.Failed() {
			t.Logf("registryd's log:\n%s", d.log())
		}
		os.RemoveAll(dir)
	})
	d.start(t)
	return d
}

// start starts the daemon (again, after stop: on the same socket and store) and waits until it
// accepts connections.
func (d *daemon) start(t *testing.T) {
	t.Helper()
	logFile, err := os.OpenFile(d.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	d.cmd = exec.Command(d.binary, d.args...)
	d.cmd.Dir = d.dir
	d.cmd.Stdout, d.cmd.Stderr = logFile, logFile
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", d.binary, err)
	}
	exited := make(chan struct{})
	d.exited, d.stopped = exited, false
	go func(cmd *exec.Cmd) {
		cmd.Wait()
		logFile.Close()
		close(exited)
	}(d.cmd)

	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-d.exited:
			t.Fatalf("registryd exited at start (%v):\n%s", d.cmd.ProcessState, d.log())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		client, err := registry.Dial(ctx, d.socket, registry.WithoutHello())
		cancel()
		if err == nil {
			client.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("registryd did not accept connections on %s within 60 s: %v", d.socket, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop sends SIGTERM and requires a clean exit within the drain deadline.
func (d *daemon) stop(t *testing.T) {
	t.Helper()
	if d.stopped || d.cmd == nil || d.cmd.Process == nil {
		return
	}
	d.stopped = true
	select {
	case <-d.exited:
		t.Errorf("registryd exited before it was stopped: %v", d.cmd.ProcessState)
		return
	default:
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
		if code := d.cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("registryd exited with status %d after SIGTERM", code)
		}
	case <-time.After(45 * time.Second):
		d.cmd.Process.Kill()
		<-d.exited
		t.Errorf("registryd did not exit within 45 s of SIGTERM")
	}
}

func (d *daemon) log() string {
	data, _ := os.ReadFile(d.logPath)
	return string(data)
}

func (d *daemon) dial(t *testing.T, opts ...registry.Option) *registry.Client {
	t.Helper()
	client, err := registry.Dial(testContext(t), d.socket, append([]registry.Option{registry.WithClientName("go-client-test")}, opts...)...)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { client.Close() })
	return client
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// faces makes random ArcFace vectors: 128 Gaussian values, normalised. Two of them score about
// 0 ± 0.09, far below the threshold 0.6.
type faces struct{ random *rand.Rand }

func newFaces(t *testing.T) faces {
	seed := time.Now().UnixNano()
	t.Logf("random faces from seed %d", seed)
	return faces{rand.New(rand.NewSource(seed))}
}

func (f faces) vector() []float32 {
	v := make([]float32, 128)
	for i := range v {
		v[i] = float32(f.random.NormFloat64())
	}
	return registry.Normalize(v)
}

// capture returns another capture of the same face: v plus noise, cosine about 0.95.
func (f faces) capture(v []float32) []float32 {
	out := make([]float32, len(v))
	for i := range v {
		out[i] = v[i] + float32(f.random.NormFloat64()*0.3/math.Sqrt(float64(len(v))))
	}
	return registry.Normalize(out)
}

func arcface(v []float32) *pb.Face { return registry.VectorFace(registry.AlgorithmArcFace, v) }

func register(t *testing.T, client *registry.Client, identifier string, vector []float32) *pb.RegisterResult {
	t.Helper()
	result, err := client.Register(testContext(t), &pb.RegisterRequest{Identifier: identifier, Face: arcface(vector)})
	if err != nil {
		t.Fatalf("registering %s: %v", identifier, err)
	}
	return result
}

func TestHelloAndProtocolVersion(t *testing.T) {
	d := startDaemon(t)
	client := d.dial(t)
	server := client.Server()
	if server.GetProtocolMajor() != registry.ProtocolMajor || server.GetServerVersion() == "" {
		t.Fatalf("hello result: %v", server)
	}
	t.Logf("registryd %s, protocol %d.%d", server.GetServerVersion(), server.GetProtocolMajor(), server.GetProtocolMinor())
	stats, err := client.Stats(testContext(t))
	if err != nil || stats.GetServerVersion() != server.GetServerVersion() {
		t.Fatalf("Stats: %v, %v", stats, err)
	}

	// The daemon refuses a major version it does not speak, and closes the connection.
	other := d.dial(t, registry.WithoutHello())
	if other.Server() != nil {
		t.Errorf("Server() without a Hello: %v", other.Server())
	}
	_, err = other.Send(testContext(t), &pb.Request{Operation: &pb.Request_Hello{Hello: &pb.Hello{ProtocolMajor: 2, ClientName: "from-the-future"}}})
	registryError, ok := registry.AsRegistryError(err)
	if !ok || registryError.Code != registry.CodeUnsupportedVersion || !errors.Is(err, registry.ErrUnsupportedVersion) || !registryError.ClosesConnection() {
		t.Fatalf("Hello with major 2: %v, want UNSUPPORTED_VERSION", err)
	}
	if registryError.RequestID == 0 {
		t.Errorf("UNSUPPORTED_VERSION should carry the Hello's id")
	}
	// The daemon closed that connection: the next call opens a new one.
	if _, err := other.Stats(testContext(t)); err != nil {
		t.Errorf("a call after UNSUPPORTED_VERSION: %v", err)
	}
	if opened := other.ConnectionsOpened(); opened != 2 {
		t.Errorf("%d connections opened, want 2 (the one refused, then a new one)", opened)
	}

	// Send: a request without an operation is MALFORMED_REQUEST with its own id.
	request := &pb.Request{}
	_, err = client.Send(testContext(t), request)
	if registryError, ok := registry.AsRegistryError(err); !ok || registryError.Code != registry.CodeMalformedRequest || registryError.RequestID != request.GetId() || request.GetId() == 0 {
		t.Fatalf("a request without an operation: %v (request id %d)", err, request.GetId())
	}
}

func TestRegisterIdentifyAuthenticate(t *testing.T) {
	d := startDaemon(t)
	client := d.dial(t)
	ctx := testContext(t)
	f := newFaces(t)
	alice, bob := f.vector(), f.vector()

	registration := register(t, client, "alice", alice)
	if len(registration.GetStored()) != 1 {
		t.Fatalf("register: %v", registration)
	}
	stored := registration.GetStored()[0]
	if stored.GetIdentifier() != "alice" || stored.GetAlgorithm() != registry.AlgorithmArcFace || stored.GetSource() != pb.TemplateSource_TEMPLATE_SOURCE_REGISTERED || stored.GetId() == 0 {
		t.Fatalf("stored template: %v", stored)
	}
	register(t, client, "bob", bob)

	later := f.capture(alice)
	identification, err := client.Identify(ctx, &pb.IdentifyRequest{Face: arcface(later)})
	if err != nil {
		t.Fatalf("Identify: %v", err)
	}
	matches := identification.GetMatches()
	if len(matches) != 1 || matches[0].GetIdentifier() != "alice" || matches[0].GetScore() < 0.6 || matches[0].GetTemplateId() != stored.GetId() || identification.GetAlgorithm() != registry.AlgorithmArcFace {
		t.Fatalf("Identify: %v", identification)
	}

	authentication, err := client.Authenticate(ctx, &pb.AuthenticateRequest{Identifier: "alice", Face: arcface(later)})
	if err != nil {
		t.Fatalf("Authenticate: %v", err)
	}
	if !authentication.GetAuthenticated() || authentication.GetScore() != matches[0].GetScore() || authentication.GetTemplateId() != stored.GetId() || authentication.GetAlgorithm() != registry.AlgorithmArcFace {
		t.Fatalf("Authenticate: %v", authentication)
	}

	// The administration calls.
	galleries, err := client.ListGalleries(ctx)
	if err != nil || len(galleries) != 1 || galleries[0].GetName() != "default" || galleries[0].GetIdentifierCount() != 2 {
		t.Fatalf("ListGalleries: %v, %v", galleries, err)
	}
	algorithms, err := client.ListAlgorithms(ctx)
	if err != nil {
		t.Fatalf("ListAlgorithms: %v", err)
	}
	found := false
	for _, algorithm := range algorithms {
		if algorithm.GetVersion() == registry.AlgorithmArcFace {
			found = algorithm.GetName() == "arcface" && algorithm.GetDimension() == 128 && algorithm.GetScoreFunction() == "cosine"
		}
	}
	if !found {
		t.Fatalf("ListAlgorithms has no arcface (24, 128, cosine): %v", algorithms)
	}
	status, err := client.MigrationStatus(ctx, nil)
	if err != nil || len(status) == 0 || status[0].GetAlgorithm() != registry.AlgorithmArcFace || status[0].GetIdentifiersHeld() != 2 || status[0].GetGalleryIdentifiers() != 2 {
		t.Fatalf("MigrationStatus: %v, %v", status, err)
	}
	page, err := client.ListIdentifiers(ctx, nil)
	if err != nil || strings.Join(page.GetIdentifiers(), ",") != "alice,bob" || page.Next != nil {
		t.Fatalf("ListIdentifiers: %v, %v", page, err)
	}
	templates, err := client.GetTemplates(ctx, &pb.GetTemplatesRequest{Identifier: "alice"})
	if err != nil || len(templates) != 1 || templates[0].GetId() != stored.GetId() || templates[0].GetTemplate() != nil {
		t.Fatalf("GetTemplates: %v, %v", templates, err)
	}

	// A gallery of its own, with arcface alone.
	gallery, err := client.DefineGallery(ctx, &pb.DefineGalleryRequest{
		Gallery: "kiosk",
		Registries: []*pb.DefineGalleryRequest_RegistrySpec{{
			Algorithm:  registry.AlgorithmArcFace,
			Thresholds: &pb.Thresholds{Authentication: 0.7, Identification: 0.7, AutoEnrolment: 0.8},
		}},
	})
	if err != nil || gallery.GetName() != "kiosk" || len(gallery.GetRegistries()) != 1 || gallery.GetRegistries()[0].GetThresholds().GetAuthentication() != 0.7 {
		t.Fatalf("DefineGallery: %v, %v", gallery, err)
	}
	if _, err := client.Register(ctx, &pb.RegisterRequest{Gallery: "kiosk", Identifier: "alice", Face: arcface(alice)}); err != nil {
		t.Fatalf("registering alice in kiosk: %v", err)
	}
	if _, err := client.Register(ctx, &pb.RegisterRequest{Gallery: "nowhere", Identifier: "alice", Face: arcface(alice)}); !registry.HasCode(err, registry.CodeUnknownGallery) {
		t.Fatalf("registering in an unknown gallery: %v", err)
	}

	deleted, err := client.DeleteIdentifier(ctx, &pb.DeleteIdentifierRequest{Identifier: "bob"})
	if err != nil || deleted != 1 {
		t.Fatalf("DeleteIdentifier: %d, %v", deleted, err)
	}
	if _, err := client.Authenticate(ctx, &pb.AuthenticateRequest{Identifier: "bob", Face: arcface(bob)}); !registry.IsIdentifierNotRegistered(err) {
		t.Fatalf("authenticating a deleted identifier: %v", err)
	}
	if stats, err := client.Stats(ctx); err != nil || stats.GetRequestsServed() == 0 || len(stats.GetGalleries()) != 2 {
		t.Fatalf("Stats: %v, %v", stats, err)
	}
	if verified, err := client.Verify(ctx); err != nil || len(verified.GetProblems()) != 0 || verified.GetTemplatesChecked() != 2 {
		t.Fatalf("Verify: %v, %v", verified, err)
	}
}

func TestSimilarFaceRegisteredUnderAnotherName(t *testing.T) {
	d := startDaemon(t)
	client := d.dial(t)
	f := newFaces(t)
	alice := f.vector()
	register(t, client, "alice", alice)

	_, err := client.Register(testContext(t), &pb.RegisterRequest{Identifier: "bob", Face: arcface(alice)})
	if !registry.IsSimilarFaceRegistered(err) {
		t.Fatalf("registering alice's face as bob: %v, want SIMILAR_FACE_REGISTERED", err)
	}
	var registryError *registry.RegistryError
	if !errors.As(err, &registryError) {
		t.Fatalf("errors.As: %T", err)
	}
	similar, algorithm, ok := registryError.SimilarFace()
	if !ok || similar.GetIdentifier() != "alice" || similar.GetScore() < 0.99 || algorithm != registry.AlgorithmArcFace {
		t.Fatalf("decisive finding: %v (algorithm %d)", registryError.Decisive, algorithm)
	}
	if len(registryError.Findings) != 1 || registryError.Findings[0].GetSimilarFace().GetIdentifier() != "alice" || registryError.Findings[0].GetAlgorithm() != registry.AlgorithmArcFace {
		t.Fatalf("findings: %v", registryError.Findings)
	}
	if _, _, ok := registryError.FaceMismatch(); ok || registry.IsFaceMismatch(err) {
		t.Errorf("a similar-face refusal reads as a mismatch")
	}
	// Nothing was stored for bob.
	if _, err := client.GetTemplates(testContext(t), &pb.GetTemplatesRequest{Identifier: "bob"}); !registry.IsIdentifierNotRegistered(err) {
		t.Fatalf("bob's templates after the refusal: %v", err)
	}
	// force stores it anyway, and reports the finding.
	forced, err := client.Register(testContext(t), &pb.RegisterRequest{Identifier: "bob", Face: arcface(alice), Force: true})
	if err != nil || len(forced.GetFindings()) != 1 || forced.GetStored()[0].GetSource() != pb.TemplateSource_TEMPLATE_SOURCE_FORCED {
		t.Fatalf("forced registration: %v, %v", forced, err)
	}
}

func TestFaceMismatch(t *testing.T) {
	d := startDaemon(t)
	client := d.dial(t)
	f := newFaces(t)
	register(t, client, "alice", f.vector())
	_, err := client.Register(testContext(t), &pb.RegisterRequest{Identifier: "alice", Face: arcface(f.vector())})
	registryError, ok := registry.AsRegistryError(err)
	if !ok || !registry.IsFaceMismatch(err) {
		t.Fatalf("registering another face as alice: %v, want FACE_MISMATCH", err)
	}
	mismatch, algorithm, ok := registryError.FaceMismatch()
	if !ok || mismatch.GetBestScore() >= 0.6 || algorithm != registry.AlgorithmArcFace || len(registryError.Findings) != 1 {
		t.Fatalf("mismatch details: %v, findings %v", registryError.Decisive, registryError.Findings)
	}
}

func TestAuthenticateAnotherFaceIsAResultNotAnError(t *testing.T) {
	d := startDaemon(t)
	client := d.dial(t)
	f := newFaces(t)
	register(t, client, "alice", f.vector())
	authentication, err := client.Authenticate(testContext(t), &pb.AuthenticateRequest{Identifier: "alice", Face: arcface(f.vector())})
	if err != nil {
		t.Fatalf("authenticating another face: %v", err)
	}
	if authentication.GetAuthenticated() || authentication.GetScore() >= 0.6 || authentication.GetAlgorithm() != registry.AlgorithmArcFace {
		t.Fatalf("authenticating another face: %v", authentication)
	}
	identification, err := client.Identify(testContext(t), &pb.IdentifyRequest{Face: arcface(f.vector()), AutoEnrol: registry.Bool(false)})
	if err != nil || len(identification.GetMatches()) != 0 {
		t.Fatalf("identifying a stranger: %v, %v", identification, err)
	}
	_, err = client.Authenticate(testContext(t), &pb.AuthenticateRequest{Identifier: "carol", Face: arcface(f.vector())})
	if !registry.IsIdentifierNotRegistered(err) {
		t.Fatalf("authenticating carol: %v", err)
	}
}

func landmarkPoints(n int) map[string]registry.Point {
	points := map[string]registry.Point{}
	for i, name := range registry.LandmarkNames[:n] {
		points[name] = registry.Point{X: float32(100 + 7*i), Y: float32(200 + 13*(i%5)), Z: float32(i % 3)}
	}
	return points
}

func TestInvalidTemplateDetails(t *testing.T) {
	d := startDaemon(t)
	client := d.dial(t)
	f := newFaces(t)
	withNaN := f.vector()
	withNaN[5] = float32(math.NaN())
	unnormalised := make([]float32, 512)
	for i := range unnormalised {
		unnormalised[i] = float32(2 / math.Sqrt(512))
	}
	unknownLandmark := landmarkPoints(20)
	unknownLandmark["THIRD_EYE"] = registry.Point{X: 1, Y: 2, Z: 3}

	for _, test := range []struct {
		name     string
		template *pb.Template
		want     *pb.TemplateProblem
	}{
		{"wrong dimension", registry.VectorTemplate(registry.AlgorithmArcFace, f.vector()[:127]),
			&pb.TemplateProblem{Algorithm: 24, Kind: pb.TemplateProblem_KIND_WRONG_DIMENSION, Expected: 128, Actual: 127}},
		{"non-finite value", registry.VectorTemplate(registry.AlgorithmArcFace, withNaN),
			&pb.TemplateProblem{Algorithm: 24, Kind: pb.TemplateProblem_KIND_NON_FINITE_VALUE, Index: 5}},
		{"zero vector", registry.VectorTemplate(registry.AlgorithmArcFace, make([]float32, 128)),
			&pb.TemplateProblem{Algorithm: 24, Kind: pb.TemplateProblem_KIND_ZERO_VECTOR}},
		{"not normalised", registry.VectorTemplate(registry.AlgorithmR300, unnormalised),
			&pb.TemplateProblem{Algorithm: 300, Kind: pb.TemplateProblem_KIND_NOT_NORMALISED, Norm: 2}},
		{"too few landmarks", registry.LandmarkTemplate(registry.AlgorithmLandmarks, landmarkPoints(3)),
			&pb.TemplateProblem{Algorithm: 1000, Kind: pb.TemplateProblem_KIND_TOO_FEW_LANDMARKS, Expected: 15, Actual: 3}},
		{"unknown landmark", registry.LandmarkTemplate(registry.AlgorithmLandmarks, unknownLandmark),
			&pb.TemplateProblem{Algorithm: 1000, Kind: pb.TemplateProblem_KIND_UNKNOWN_LANDMARK, Landmark: "THIRD_EYE"}},
		{"wrong kind", registry.LandmarkTemplate(registry.AlgorithmArcFace, landmarkPoints(20)),
			&pb.TemplateProblem{Algorithm: 24, Kind: pb.TemplateProblem_KIND_WRONG_KIND}},
	} {
		t.Run(test.name, func(t *testing.T) {
			_, err := client.Register(testContext(t), &pb.RegisterRequest{Identifier: "invalid", Face: registry.NewFace(test.template)})
			registryError, ok := registry.AsRegistryError(err)
			if !ok || !registry.IsInvalidTemplate(err) || registryError.TemplateProblem == nil {
				t.Fatalf("Register: %v, want INVALID_TEMPLATE with a problem", err)
			}
			got := registryError.TemplateProblem
			if got.GetAlgorithm() != test.want.GetAlgorithm() || got.GetKind() != test.want.GetKind() ||
				got.GetExpected() != test.want.GetExpected() || got.GetActual() != test.want.GetActual() ||
				got.GetIndex() != test.want.GetIndex() || got.GetLandmark() != test.want.GetLandmark() ||
				math.Abs(float64(got.GetNorm()-test.want.GetNorm())) > 1e-3 {
				t.Fatalf("template problem %v, want %v", got, test.want)
			}
		})
	}
	// Nothing was stored.
	if page, err := client.ListIdentifiers(testContext(t), nil); err != nil || len(page.GetIdentifiers()) != 0 {
		t.Fatalf("identifiers after the refusals: %v, %v", page, err)
	}
}

// 200 requests from 200 goroutines on one connection, pipelined: each gets its own answer.
func TestPipeliningFromManyGoroutines(t *testing.T) {
	d := startDaemon(t)
	client := d.dial(t)
	f := newFaces(t)
	const people, requests = 20, 200
	vectors := make([][]float32, people)
	for i := range vectors {
		vectors[i] = f.vector()
	}
	// Register everyone concurrently too.
	var wg sync.WaitGroup
	errs := make(chan error, requests)
	for i := range vectors {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if _, err := client.Register(testContext(t), &pb.RegisterRequest{Identifier: fmt.Sprintf("person-%02d", i), Face: arcface(vectors[i])}); err != nil {
				errs <- fmt.Errorf("registering person-%02d: %w", i, err)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	captures := make([][]float32, requests)
	newcomers := make([][]float32, requests)
	for i := range captures {
		captures[i] = f.capture(vectors[i%people])
		newcomers[i] = f.vector()
	}
	start := make(chan struct{})
	errs = make(chan error, requests)
	for i := 0; i < requests; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			ctx := testContext(t)
			want := fmt.Sprintf("person-%02d", i%people)
			switch i % 4 {
			case 0: // identify
				result, err := client.Identify(ctx, &pb.IdentifyRequest{Face: arcface(captures[i]), AutoEnrol: registry.Bool(false)})
				if err != nil {
					errs <- fmt.Errorf("request %d (identify %s): %w", i, want, err)
				} else if len(result.GetMatches()) != 1 || result.GetMatches()[0].GetIdentifier() != want {
					errs <- fmt.Errorf("request %d: identify %s answered %v", i, want, result.GetMatches())
				}
			case 1: // authenticate
				result, err := client.Authenticate(ctx, &pb.AuthenticateRequest{Identifier: want, Face: arcface(captures[i]), AutoEnrol: registry.Bool(false)})
				if err != nil {
					errs <- fmt.Errorf("request %d (authenticate %s): %w", i, want, err)
				} else if !result.GetAuthenticated() {
					errs <- fmt.Errorf("request %d: %s not authenticated (score %v)", i, want, result.GetScore())
				}
			case 2: // register a newcomer
				identifier := fmt.Sprintf("newcomer-%03d", i)
				result, err := client.Register(ctx, &pb.RegisterRequest{Identifier: identifier, Face: arcface(newcomers[i])})
				if err != nil {
					errs <- fmt.Errorf("request %d (register %s): %w", i, identifier, err)
				} else if len(result.GetStored()) != 1 || result.GetStored()[0].GetIdentifier() != identifier {
					errs <- fmt.Errorf("request %d: registering %s answered %v", i, identifier, result.GetStored())
				}
			case 3: // someone else's face: a non-match, with the right identifier's refusal
				result, err := client.Authenticate(ctx, &pb.AuthenticateRequest{Identifier: want, Face: arcface(captures[(i+1)%requests]), AutoEnrol: registry.Bool(false)})
				if err != nil {
					errs <- fmt.Errorf("request %d (authenticate another face as %s): %w", i, want, err)
				} else if result.GetAuthenticated() {
					errs <- fmt.Errorf("request %d: another face authenticated as %s", i, want)
				}
			}
		}(i)
	}
	began := time.Now()
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	peak := registry.PeakInFlight(client)
	t.Logf("%d requests from %d goroutines in %v; at most %d in flight at once", requests, requests, time.Since(began), peak)
	if peak < 2 {
		t.Errorf("the requests were not pipelined (at most %d in flight)", peak)
	}
	if page, err := client.ListIdentifiers(testContext(t), &pb.ListIdentifiersRequest{Limit: 1000}); err != nil || len(page.GetIdentifiers()) != people+requests/4 {
		t.Fatalf("identifiers after the run: %d, %v", len(page.GetIdentifiers()), err)
	}
}

func TestSocketFromTheEnvironment(t *testing.T) {
	d := startDaemon(t)
	t.Setenv(registry.SocketEnvironmentVariable, d.socket)
	client, err := registry.Dial(testContext(t), "")
	if err != nil {
		t.Fatalf("Dial with REGISTRYD_SOCKET: %v", err)
	}
	defer client.Close()
	if client.SocketPath() != d.socket {
		t.Fatalf("connected to %s, want %s", client.SocketPath(), d.socket)
	}
	if _, err := client.ListGalleries(testContext(t)); err != nil {
		t.Fatal(err)
	}
}

// Templates are biometric data: no error string may carry their values.
func TestErrorStringsCarryNoTemplateValues(t *testing.T) {
	d := startDaemon(t)
	client := d.dial(t)
	f := newFaces(t)
	alice, stranger := f.vector(), f.vector()
	register(t, client, "alice", alice)
	withNaN := f.vector()
	withNaN[7] = float32(math.Inf(1))
	notNormalised := make([]float32, 512)
	for i := range notNormalised {
		notNormalised[i] = float32(f.random.NormFloat64())
	}
	sent := [][]float32{alice, stranger, withNaN, notNormalised}

	var errs []error
	collect := func(_ any, err error) {
		if err == nil {
			t.Fatalf("expected an error")
		}
		errs = append(errs, err)
	}
	ctx := testContext(t)
	collect(client.Register(ctx, &pb.RegisterRequest{Identifier: "bob", Face: arcface(alice)}))                                                                                // SIMILAR_FACE_REGISTERED
	collect(client.Register(ctx, &pb.RegisterRequest{Identifier: "alice", Face: arcface(stranger)}))                                                                           // FACE_MISMATCH
	collect(client.Register(ctx, &pb.RegisterRequest{Identifier: "carol", Face: arcface(stranger[:100])}))                                                                     // INVALID_TEMPLATE, dimension
	collect(client.Register(ctx, &pb.RegisterRequest{Identifier: "carol", Face: arcface(withNaN)}))                                                                            // INVALID_TEMPLATE, non-finite
	collect(client.Register(ctx, &pb.RegisterRequest{Identifier: "carol", Face: registry.VectorFace(registry.AlgorithmR300, notNormalised)}))                                  // INVALID_TEMPLATE, norm
	collect(client.Authenticate(ctx, &pb.AuthenticateRequest{Identifier: "carol", Face: arcface(stranger)}))                                                                   // IDENTIFIER_NOT_REGISTERED
	collect(client.Register(ctx, &pb.RegisterRequest{Identifier: "carol", Face: registry.VectorFace(12345, stranger)}))                                                        // UNKNOWN_ALGORITHM
	collect(client.Register(ctx, &pb.RegisterRequest{Identifier: "carol", Face: registry.NewFace(registry.VectorTemplate(24, alice), registry.VectorTemplate(24, stranger))})) // MALFORMED_REQUEST
	small := d.dial(t, registry.WithMaxRequestBytes(100))
	collect(small.Register(ctx, &pb.RegisterRequest{Identifier: "carol", Face: arcface(stranger)})) // ErrRequestTooLarge
	d.stop(t)
	collect(client.Register(ctx, &pb.RegisterRequest{Identifier: "carol", Face: arcface(stranger)})) // the daemon is gone
	var transportError *registry.TransportError
	if !errors.As(errs[len(errs)-1], &transportError) || transportError.Op != "dial" {
		t.Errorf("a call after the daemon stopped: %v, want a dial error", errs[len(errs)-1])
	}

	var renderings []string
	for _, vector := range sent {
		for _, v := range vector {
			// The shortest representation, as Go's %v and Swift's description print a float32
			// (a score in a message cannot match one by chance: it would have to be the same float32).
			s := strings.TrimPrefix(strconv.FormatFloat(float64(v), 'g', -1, 32), "-")
			if len(strings.TrimLeft(s, "0.")) >= 5 {
				renderings = append(renderings, s)
			}
		}
	}
	for _, err := range errs {
		t.Logf("%v", err)
		for _, text := range []string{err.Error(), fmt.Sprintf("%v", err), fmt.Sprintf("%+v", err)} {
			for _, value := range renderings {
				if strings.Contains(text, value) {
					t.Errorf("error %q contains the template value %s", text, value)
				}
			}
		}
	}
	// The daemon's log, too (PROTOCOL.md: the daemon never logs templates).
	log := d.log()
	for _, value := range renderings {
		if strings.Contains(log, value) {
			t.Errorf("registryd's log contains the template value %s", value)
		}
	}
}

// A daemon stopping with SIGTERM closes the connection: a call then tries a new one and cannot reach
// the daemon; once it is back, the same client works again on a new connection.
func TestDaemonRestart(t *testing.T) {
	d := startDaemon(t)
	client := d.dial(t)
	if _, err := client.Stats(testContext(t)); err != nil {
		t.Fatal(err)
	}
	d.stop(t)
	_, err := client.Stats(testContext(t))
	var transportError *registry.TransportError
	if !errors.As(err, &transportError) || transportError.Op != "dial" || !(errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED)) {
		t.Fatalf("Stats after the daemon stopped: %v, want a dial error (ENOENT or ECONNREFUSED)", err)
	}
	if _, err := registry.Dial(testContext(t), d.socket); err == nil {
		t.Fatalf("Dial succeeded after the daemon stopped")
	}

	d.start(t)
	stats, err := client.Stats(testContext(t))
	if err != nil {
		t.Fatalf("Stats after the daemon restarted: %v", err)
	}
	if client.Server().GetServerVersion() != stats.GetServerVersion() {
		t.Errorf("no Hello on the new connection: Server() is %v", client.Server())
	}
	if opened := client.ConnectionsOpened(); opened != 2 {
		t.Errorf("%d connections opened, want 2 (the failed dial opened none)", opened)
	}
}

// The daemon closes a connection idle for --idle-timeout seconds: the next call opens exactly one new
// connection (also when many goroutines call at once), says Hello on it, and succeeds.
func TestIdleTimeoutReconnects(t *testing.T) {
	d := startDaemon(t, "--idle-timeout", "1")
	client := d.dial(t)
	if _, err := client.Stats(testContext(t)); err != nil {
		t.Fatal(err)
	}
	for round := 1; round <= 2; round++ {
		time.Sleep(2500 * time.Millisecond) // past the idle timeout: the daemon has closed the connection
		const callers = 20
		var wg sync.WaitGroup
		errs := make(chan error, callers)
		for i := 0; i < callers; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := client.ListGalleries(testContext(t)); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("a call after %d idle timeouts: %v", round, err)
		}
		if opened := client.ConnectionsOpened(); opened != uint64(1+round) {
			t.Fatalf("after %d idle timeouts, %d connections opened, want %d", round, opened, 1+round)
		}
		if client.Server() == nil {
			t.Fatalf("no Hello on the new connection")
		}
	}
	if !strings.Contains(d.log(), "idle") {
		t.Errorf("registryd's log does not mention closing the idle connection")
	}
}

// With a retry policy, a call made while the daemon is down waits for it (the dial errors ENOENT and
// ECONNREFUSED are retried) and succeeds once it is back.
func TestRetryWhileTheDaemonRestarts(t *testing.T) {
	d := startDaemon(t)
	client := d.dial(t, registry.WithRetry(registry.RetryPolicy{MaxAttempts: 1000, MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}))
	if _, err := client.Stats(testContext(t)); err != nil {
		t.Fatal(err)
	}
	d.stop(t)
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := client.ListGalleries(testContext(t))
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("the call ended while the daemon was down: %v", err)
	default:
	}
	d.start(t)
	if err := <-done; err != nil {
		t.Fatalf("the call across the restart: %v", err)
	}
	t.Logf("the call took %v across the restart", time.Since(start))
	if opened := client.ConnectionsOpened(); opened != 2 {
		t.Errorf("%d connections opened, want 2", opened)
	}
}

// A real STORAGE_FULL: a daemon keeping more free space than the file system has refuses every
// registration. The policy sends it MaxAttempts times (the daemon counts them), then reports it.
func TestStorageFullIsRetried(t *testing.T) {
	d := startDaemon(t, "--storage-reserve", "1000000000000000") // 1 PB
	client := d.dial(t, registry.WithRetry(registry.RetryPolicy{MaxAttempts: 3, MinBackoff: 10 * time.Millisecond}))
	before, err := client.Stats(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = client.Register(testContext(t), &pb.RegisterRequest{Identifier: "alice", Face: arcface(newFaces(t).vector())})
	elapsed := time.Since(start)
	registryError, ok := registry.AsRegistryError(err)
	if !ok || registryError.Code != registry.CodeStorageFull || !registryError.Retryable() {
		t.Fatalf("Register: %v, want STORAGE_FULL", err)
	}
	after, err := client.Stats(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	// Requests served between the two stats: three registrations and the second stats itself.
	if served := after.GetRequestsServed() - before.GetRequestsServed(); served != 4 {
		t.Fatalf("the daemon served %d requests between the stats, want 4 (3 attempts + stats)", served)
	}
	if elapsed < 15*time.Millisecond { // waits of at least 5 and 10 ms
		t.Errorf("three attempts in %v: the waits were skipped", elapsed)
	}
	// Without the policy: once.
	plain := d.dial(t)
	if _, err := plain.Register(testContext(t), &pb.RegisterRequest{Identifier: "bob", Face: arcface(newFaces(t).vector())}); !registry.HasCode(err, registry.CodeStorageFull) {
		t.Fatalf("Register without a policy: %v", err)
	}
	last, err := client.Stats(testContext(t))
	if err != nil || last.GetRequestsServed()-after.GetRequestsServed() != 3 { // hello, register, stats
		t.Fatalf("without a policy: %d requests served, want 3 (hello, one registration, stats); %v", last.GetRequestsServed()-after.GetRequestsServed(), err)
	}
}
