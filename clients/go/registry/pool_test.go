package registry_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"registryd.local/client/registry"
	pb "registryd.local/client/registrypb"
)

func dialPool(t *testing.T, d *daemon, size int, opts ...registry.Option) *registry.Pool {
	t.Helper()
	pool, err := registry.DialPool(testContext(t), d.socket, size, append([]registry.Option{registry.WithClientName("go-pool-test")}, opts...)...)
	if err != nil {
		t.Fatalf("DialPool: %v", err)
	}
	t.Cleanup(func() { pool.Close() })
	return pool
}

// Calls in turn go to every member (ties in turn); many goroutines at once are answered right and
// leave nothing counted in flight.
func TestPoolSpreadsCallsAndAnswersGoroutinesAtOnce(t *testing.T) {
	d := startDaemon(t)
	pool := dialPool(t, d, 3)
	ctx := testContext(t)
	for i := 0; i < 6; i++ {
		if err := pool.Do(ctx, func(c *registry.Client) error { _, err := c.ListGalleries(ctx); return err }); err != nil {
			t.Fatal(err)
		}
	}
	for i, client := range pool.Clients() {
		if opened := client.ConnectionsOpened(); opened != 1 {
			t.Errorf("member %d opened %d connections, want 1", i, opened)
		}
	}

	f := newFaces(t)
	people := map[string][]float32{}
	for i := 0; i < 24; i++ {
		people[fmt.Sprintf("pool-person-%d", i)] = f.vector()
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(people))
	for name, vector := range people {
		name, vector, capture := name, vector, f.capture(vector)
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := pool.Do(ctx, func(c *registry.Client) error {
				if _, err := c.Register(ctx, &pb.RegisterRequest{Identifier: name, Face: arcface(vector)}); err != nil {
					return err
				}
				result, err := c.Authenticate(ctx, &pb.AuthenticateRequest{Identifier: name, Face: arcface(capture)})
				if err == nil && !result.GetAuthenticated() {
					err = fmt.Errorf("%s not authenticated", name)
				}
				return err
			})
			if err == nil {
				var response *pb.Response
				response, err = pool.Send(ctx, &pb.Request{Operation: &pb.Request_Identify{Identify: &pb.IdentifyRequest{Face: arcface(vector)}}})
				if err == nil {
					matches := response.GetIdentify().GetMatches()
					if len(matches) == 0 || matches[0].GetIdentifier() != name {
						err = fmt.Errorf("%s identified as %v", name, matches)
					}
				}
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	for i, busy := range pool.InFlight() {
		if busy != 0 {
			t.Errorf("member %d still counts %d calls in flight", i, busy)
		}
	}
}

// Across a daemon restart every member dials again by itself under its retry policy.
func TestPoolMembersReconnectAfterARestart(t *testing.T) {
	d := startDaemon(t)
	pool := dialPool(t, d, 3, registry.WithRetry(registry.RetryPolicy{MaxAttempts: 1000, MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}))
	ctx := testContext(t)
	d.stop(t)
	d.start(t)
	for i := 0; i < 6; i++ {
		if _, err := pool.Send(ctx, &pb.Request{Operation: &pb.Request_ListGalleries{ListGalleries: &pb.ListGalleriesRequest{}}}); err != nil {
			t.Fatalf("call %d after the restart: %v", i, err)
		}
	}
	for i, client := range pool.Clients() {
		if opened := client.ConnectionsOpened(); opened != 2 {
			t.Errorf("member %d opened %d connections, want 2", i, opened)
		}
	}
}

// A pool has at least one connection: -1 is refused, 0 means DefaultPoolSize, 1 is one connection.
func TestPoolSizes(t *testing.T) {
	d := startDaemon(t)
	if _, err := registry.DialPool(testContext(t), d.socket, -1); err == nil {
		t.Error("a pool of -1 connections was dialed")
	}
	if got := len(dialPool(t, d, 0).Clients()); got != registry.DefaultPoolSize {
		t.Errorf("size 0 dialed %d connections, want %d", got, registry.DefaultPoolSize)
	}
	one := dialPool(t, d, 1)
	ctx := testContext(t)
	for i := 0; i < 3; i++ {
		if _, err := one.Send(ctx, &pb.Request{Operation: &pb.Request_ListGalleries{ListGalleries: &pb.ListGalleriesRequest{}}}); err != nil {
			t.Fatal(err)
		}
	}
	if opened := one.Clients()[0].ConnectionsOpened(); opened != 1 {
		t.Errorf("a pool of one opened %d connections, want 1", opened)
	}
}
