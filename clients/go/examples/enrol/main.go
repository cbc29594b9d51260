// Command enrol walks through registryd's register / identify / authenticate with random ArcFace
// templates (algorithm 24: 128 floats, which the daemon normalises; a score is the cosine, and 0.6
// is the default threshold). Start the daemon first (tools/registryd, from the repository), then,
// from clients/go:
//
//	go run ./examples/enrol                       # finds ../../run/registryd.sock
//	go run ./examples/enrol -socket /run/registryd/registryd.sock
//
// Without -socket it uses $REGISTRYD_SOCKET, else ./run/registryd.sock (registry.SocketPath), else,
// when that does not exist, the nearest run/registryd.sock in a parent directory.
//
// The identifiers get a random suffix, so the example can run again on the same store; it deletes
// them at the end unless -keep is given. It prints what happened and never prints template values.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"math"
	mathrand "math/rand"
	"os"
	"path/filepath"
	"time"

	"registryd.local/client/registry"
	pb "registryd.local/client/registrypb"
)

func main() {
	socket := flag.String("socket", "", "the daemon's Unix socket (default: $REGISTRYD_SOCKET, else "+registry.DefaultSocketPath+", else run/registryd.sock in a parent directory)")
	gallery := flag.String("gallery", "", "the gallery (default: default)")
	keep := flag.Bool("keep", false, "keep the identifiers registered (default: delete them at the end)")
	flag.Parse()
	if err := run(*socket, *gallery, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "enrol:", err)
		os.Exit(1)
	}
}

func run(socket, gallery string, keep bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	client, err := registry.Dial(ctx, socketPath(socket), registry.WithClientName("go-example-enrol/1"))
	if err != nil {
		return err
	}
	defer client.Close()
	server := client.Server()
	fmt.Printf("connected to registryd %s (protocol %d.%d) at %s\n",
		server.GetServerVersion(), server.GetProtocolMajor(), server.GetProtocolMinor(), client.SocketPath())

	suffix := randomSuffix()
	alice, bob := "alice-"+suffix, "bob-"+suffix
	random := mathrand.New(mathrand.NewSource(time.Now().UnixNano()))
	aliceFace := randomUnitVector(random)
	bobFace := randomUnitVector(random)
	aliceAgain := perturbed(random, aliceFace, 0.3) // another capture of alice: cosine about 0.95

	// 1. Enrol two people.
	for _, person := range []struct {
		identifier string
		vector     []float32
	}{{alice, aliceFace}, {bob, bobFace}} {
		result, err := client.Register(ctx, &pb.RegisterRequest{
			Gallery:    gallery,
			Identifier: person.identifier,
			Face:       registry.VectorFace(registry.AlgorithmArcFace, person.vector),
		})
		if err != nil {
			return fmt.Errorf("registering %s: %w", person.identifier, err)
		}
		for _, stored := range result.GetStored() {
			fmt.Printf("registered %s: template %d (algorithm %d, %s)\n",
				stored.GetIdentifier(), stored.GetId(), stored.GetAlgorithm(), stored.GetSource())
		}
	}
	if !keep {
		defer func() {
			for _, identifier := range []string{alice, bob} {
				deleted, err := client.DeleteIdentifier(context.Background(), &pb.DeleteIdentifierRequest{Gallery: gallery, Identifier: identifier})
				if err != nil {
					fmt.Printf("could not delete %s: %v\n", identifier, err)
					continue
				}
				fmt.Printf("deleted %s (%d templates)\n", identifier, deleted)
			}
		}()
	}

	// 2. The same face under another name is refused: a similar face is registered.
	_, err = client.Register(ctx, &pb.RegisterRequest{
		Gallery:    gallery,
		Identifier: "mallory-" + suffix,
		Face:       registry.VectorFace(registry.AlgorithmArcFace, aliceFace),
	})
	var refusal *registry.RegistryError
	switch {
	case errors.As(err, &refusal) && refusal.Code == registry.CodeSimilarFaceRegistered:
		similar, algorithm, _ := refusal.SimilarFace()
		fmt.Printf("registering alice's face as mallory was refused: %s (similar face %s, score %.3f, algorithm %d)\n",
			registry.CodeName(refusal.Code), similar.GetIdentifier(), similar.GetScore(), algorithm)
	case err != nil:
		return fmt.Errorf("registering mallory: %w", err)
	default:
		return errors.New("registering alice's face as mallory was accepted; expected SIMILAR_FACE_REGISTERED")
	}

	// 3. Who is this? (another capture of alice)
	identification, err := client.Identify(ctx, &pb.IdentifyRequest{
		Gallery: gallery,
		Face:    registry.VectorFace(registry.AlgorithmArcFace, aliceAgain),
	})
	if registry.HasCode(err, registry.CodeIncompatibleTemplates) {
		// The gallery holds people without an arcface template (a migration in progress): search
		// the registries this face has templates for instead.
		fmt.Println("identify: INCOMPATIBLE_TEMPLATES in safe mode; trying again with safe = false")
		identification, err = client.Identify(ctx, &pb.IdentifyRequest{
			Gallery: gallery,
			Face:    registry.VectorFace(registry.AlgorithmArcFace, aliceAgain),
			Safe:    registry.Bool(false),
		})
	}
	if err != nil {
		return fmt.Errorf("identifying: %w", err)
	}
	if len(identification.GetMatches()) == 0 {
		fmt.Println("identify: no match")
	}
	for _, match := range identification.GetMatches() {
		fmt.Printf("identify: %s, score %.3f (template %d, algorithm %d)\n",
			match.GetIdentifier(), match.GetScore(), match.GetTemplateId(), identification.GetAlgorithm())
	}

	// 4. Is this alice? Yes for her later capture, no for bob's face (a result, not an error).
	for _, attempt := range []struct {
		what   string
		vector []float32
	}{{"alice's later capture", aliceAgain}, {"bob's face", bobFace}} {
		authentication, err := client.Authenticate(ctx, &pb.AuthenticateRequest{
			Gallery:    gallery,
			Identifier: alice,
			Face:       registry.VectorFace(registry.AlgorithmArcFace, attempt.vector),
		})
		if err != nil {
			return fmt.Errorf("authenticating %s: %w", attempt.what, err)
		}
		fmt.Printf("authenticate %s as %s: authenticated %t, score %.3f\n",
			attempt.what, alice, authentication.GetAuthenticated(), authentication.GetScore())
	}

	// 5. Someone never registered: an error with its code.
	_, err = client.Authenticate(ctx, &pb.AuthenticateRequest{
		Gallery:    gallery,
		Identifier: "carol-" + suffix,
		Face:       registry.VectorFace(registry.AlgorithmArcFace, aliceAgain),
	})
	if !registry.IsIdentifierNotRegistered(err) {
		return fmt.Errorf("authenticating an unknown identifier: expected IDENTIFIER_NOT_REGISTERED, got %v", err)
	}
	fmt.Printf("authenticate as carol: %v\n", err)
	return nil
}

// socketPath is the -socket flag, else registry.SocketPath("") ($REGISTRYD_SOCKET, else
// ./run/registryd.sock, else the system service's socket) when that exists, else the nearest
// run/registryd.sock in a parent directory: tools/registryd's socket when run from clients/go.
func socketPath(flagValue string) string {
	path := registry.SocketPath(flagValue)
	if flagValue != "" || os.Getenv(registry.SocketEnvironmentVariable) != "" {
		return path
	}
	if _, err := os.Stat(path); err == nil {
		return path
	}
	dir, err := os.Getwd()
	if err != nil {
		return path
	}
	for {
		candidate := filepath.Join(dir, "run", "registryd.sock")
		if _, err := os.Stat(candidate); err == nil {
			return candidate
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return path
		}
		dir = parent
	}
}

func randomSuffix() string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Sprint(time.Now().UnixNano())
	}
	return hex.EncodeToString(b[:])
}

// randomUnitVector returns 128 Gaussian values scaled to norm 1: two of them score about 0 ± 0.09.
func randomUnitVector(random *mathrand.Rand) []float32 {
	v := make([]float32, 128)
	for i := range v {
		v[i] = float32(random.NormFloat64())
	}
	return registry.Normalize(v)
}

// perturbed returns v plus Gaussian noise of norm about `noise`, normalised.
func perturbed(random *mathrand.Rand, v []float32, noise float64) []float32 {
	out := make([]float32, len(v))
	scale := noise / math.Sqrt(float64(len(v)))
	for i := range v {
		out[i] = v[i] + float32(random.NormFloat64()*scale)
	}
	return registry.Normalize(out)
}
