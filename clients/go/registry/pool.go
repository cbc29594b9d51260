package registry

import (
	"context"
	"fmt"
	"sync"

	"registryd.local/client/registrypb"
)

// DefaultPoolSize is the number of connections DialPool opens when given 0.
const DefaultPoolSize = 4

// Pool is several Clients to one daemon, one connection each. One Client already pipelines any
// number of calls, but the daemon answers a connection's requests in order: a slow identification
// over a large gallery holds up the authentications queued behind it on the same connection, and a
// connection has the daemon's limit of requests in flight. A Pool gives each call to the member
// with the fewest calls in flight (ties in turn). Each member dials again, retries and refuses to
// send a request twice exactly as a lone Client does (see Client); the Pool adds no resending of
// its own. It is safe for concurrent use.
//
//	pool, err := registry.DialPool(ctx, "", 8, registry.WithRetry(policy))
//	err = pool.Do(ctx, func(c *registry.Client) error {
//		result, err := c.Authenticate(ctx, request)
//		...
//	})
type Pool struct {
	clients []*Client

	mu   sync.Mutex
	busy []int
	next int
}

// DialPool dials size Clients (DefaultPoolSize when 0) with the same options (see Dial); when one
// fails, the ones already dialed are closed and its error returned.
func DialPool(ctx context.Context, socketPath string, size int, opts ...Option) (*Pool, error) {
	if size == 0 {
		size = DefaultPoolSize
	}
	if size < 0 {
		return nil, fmt.Errorf("registry: a pool of %d connections", size)
	}
	p := &Pool{busy: make([]int, size)}
	for i := 0; i < size; i++ {
		client, err := Dial(ctx, socketPath, opts...)
		if err != nil {
			p.Close()
			return nil, err
		}
		p.clients = append(p.clients, client)
	}
	return p, nil
}

// take picks the member with the fewest calls in flight, ties in turn, and counts the call there.
func (p *Pool) take() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	chosen := p.next
	for offset := 1; offset < len(p.busy); offset++ {
		i := (p.next + offset) % len(p.busy)
		if p.busy[i] < p.busy[chosen] {
			chosen = i
		}
	}
	p.busy[chosen]++
	p.next = (chosen + 1) % len(p.busy)
	return chosen
}

func (p *Pool) give(i int) {
	p.mu.Lock()
	p.busy[i]--
	p.mu.Unlock()
}

// Do runs fn with the member that has the fewest calls in flight; the member counts as busy until
// fn returns. fn may make any number of calls on it (a paged listing, say).
func (p *Pool) Do(ctx context.Context, fn func(*Client) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	i := p.take()
	defer p.give(i)
	return fn(p.clients[i])
}

// Send is Client.Send on the member with the fewest calls in flight.
func (p *Pool) Send(ctx context.Context, req *registrypb.Request) (*registrypb.Response, error) {
	var response *registrypb.Response
	err := p.Do(ctx, func(c *Client) error {
		var err error
		response, err = c.Send(ctx, req)
		return err
	})
	return response, err
}

// Clients returns the members, one connection each.
func (p *Pool) Clients() []*Client { return append([]*Client(nil), p.clients...) }

// InFlight returns the calls each member has in flight through the Pool now.
func (p *Pool) InFlight() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int(nil), p.busy...)
}

// Close closes every member; calls still waiting fail with ErrConnectionClosed.
func (p *Pool) Close() error {
	var first error
	for _, client := range p.clients {
		if err := client.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
