package registry_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"registryd.local/client/registry"
	pb "registryd.local/client/registrypb"
)

// Enrol a person, then recognise a later capture. (Not run by go test: it needs a daemon.)
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client, err := registry.Dial(ctx, "", registry.WithClientName("door-kiosk/2.1")) // $REGISTRYD_SOCKET, else ./run/registryd.sock
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()

	var embedding, laterEmbedding []float32 // 128 floats each, from an ArcFace model
	_, err = client.Register(ctx, &pb.RegisterRequest{
		Identifier: "alice",
		Face:       registry.VectorFace(registry.AlgorithmArcFace, embedding),
	})
	var refusal *registry.RegistryError
	if errors.As(err, &refusal) {
		if similar, _, ok := refusal.SimilarFace(); ok {
			fmt.Printf("already registered as %s (score %.2f)\n", similar.GetIdentifier(), similar.GetScore())
		}
		return
	} else if err != nil {
		fmt.Println(err) // a transport or context error
		return
	}

	result, err := client.Authenticate(ctx, &pb.AuthenticateRequest{
		Identifier: "alice",
		Face:       registry.VectorFace(registry.AlgorithmArcFace, laterEmbedding),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("authenticated:", result.GetAuthenticated(), "score:", result.GetScore())
}
