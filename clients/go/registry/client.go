package registry

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"registryd.local/client/registrypb"
)

const (
	// ProtocolMajor and ProtocolMinor are the protocol version this client speaks (PROTOCOL.md 1.2).
	ProtocolMajor = 1
	ProtocolMinor = 2
	// DefaultClientName is the client name sent in Hello unless WithClientName says otherwise.
	DefaultClientName = "registryd-go-client"
	// DefaultMaxRequestBytes is the daemon's default frame limit: a larger request would get
	// FRAME_TOO_LARGE and lose the connection, so the client refuses to send it.
	DefaultMaxRequestBytes = 4 << 20
	// DefaultMaxResponseBytes is the largest response accepted by default. Responses can be far
	// larger than requests (export pages, get_templates with data).
	DefaultMaxResponseBytes = 256 << 20
)

// Option configures Dial.
type Option func(*options)

type options struct {
	clientName       string
	hello            bool
	maxRequestBytes  int
	maxResponseBytes int
	retry            RetryPolicy
	// sleep replaces the retry policy's waits (tests): it waits d or until ctx ends (false).
	sleep func(ctx context.Context, d time.Duration) bool
}

// WithClientName sets the client name sent in Hello, for the daemon's log (e.g. "door-kiosk/2.1").
func WithClientName(name string) Option { return func(o *options) { o.clientName = name } }

// WithoutHello makes Dial skip the Hello exchange (the daemon then assumes protocol 1.x).
func WithoutHello() Option { return func(o *options) { o.hello = false } }

// WithMaxRequestBytes sets the largest request frame body the client sends (the daemon's
// maximumFrameBytes; default DefaultMaxRequestBytes). Larger requests fail with ErrRequestTooLarge.
func WithMaxRequestBytes(n int) Option { return func(o *options) { o.maxRequestBytes = n } }

// WithMaxResponseBytes sets the largest response frame body accepted (default
// DefaultMaxResponseBytes); a larger one is a protocol error that closes the connection.
func WithMaxResponseBytes(n int) Option { return func(o *options) { o.maxResponseBytes = n } }

// Client is a connection to registryd, replaced when it ends. It is safe for concurrent use:
// requests from any number of goroutines are pipelined on the current connection and each caller
// gets its own response.
//
// When the daemon closes the connection (its idle timeout, a restart, or after an error that closes
// it), the next call dials a new one, with a new Hello unless WithoutHello was given. A request is
// only ever sent again on a new connection when it provably never reached the daemon (the connection
// had ended before it was written, or the write failed before any of it went out); a request
// written without a response before the connection closed fails with ErrConnectionClosed.
type Client struct {
	path    string
	options options
	nextID  atomic.Uint64

	mu       sync.Mutex
	conn     *connection   // the current connection (nil before the first)
	draining []*connection // replaced connections whose reader still runs (e.g. retired after SHUTTING_DOWN, answering their pending calls)
	dialing  *dialAttempt  // non-nil while a goroutine opens a new connection
	closed   bool          // Close was called

	retrier *retrier // nil: no retry

	opened atomic.Uint64 // connections opened
	peak   atomic.Int64  // the most calls ever pending at once on one connection (tests)
	server atomic.Pointer[registrypb.HelloResult]
}

// dialAttempt is one goroutine opening a connection; the others wait for it.
type dialAttempt struct {
	done       chan struct{}
	err        error
	ctxStopped bool // the dialer's own context ended: its failure says nothing to the others
}

// Dial connects to registryd's Unix socket and, unless WithoutHello is given, exchanges Hello: the
// daemon's major protocol version must be ProtocolMajor, or Dial fails with a *VersionError (or the
// daemon's UNSUPPORTED_VERSION *RegistryError); both match errors.Is(err, ErrUnsupportedVersion).
//
// socketPath "" means SocketPath(""): $REGISTRYD_SOCKET, else DefaultSocketPath (else
// SystemSocketPath when only that exists). ctx bounds the connection and the Hello, not the
// client's later life. With WithRetry, Dial retries what the policy retries (e.g. while the daemon
// restarts), within ctx.
func Dial(ctx context.Context, socketPath string, opts ...Option) (*Client, error) {
	o := options{
		clientName:       DefaultClientName,
		hello:            true,
		maxRequestBytes:  DefaultMaxRequestBytes,
		maxResponseBytes: DefaultMaxResponseBytes,
	}
	for _, opt := range opts {
		opt(&o)
	}
	c := &Client{path: SocketPath(socketPath), options: o}
	if o.retry.MaxAttempts > 1 {
		c.retrier = newRetrier(o.retry, o.sleep)
	}
	for attempt := 1; ; attempt++ {
		_, err := c.acquire(ctx)
		if err == nil {
			return c, nil
		}
		if !c.again(ctx, attempt, err, false) {
			return nil, err
		}
	}
}

// again reports whether a failed attempt is to be made again under the retry policy, after its wait.
func (c *Client) again(ctx context.Context, attempt int, err error, sent bool) bool {
	return c.retrier != nil && c.retrier.again(ctx, attempt, err, sent)
}

// dialCause strips net.OpError's repetition of the path: "connect: no such file or directory".
func dialCause(err error) error {
	var opError *net.OpError
	if errors.As(err, &opError) {
		var syscallError *os.SyscallError
		if errors.As(opError.Err, &syscallError) {
			return syscallError
		}
	}
	return err
}

// SocketPath returns the path of the socket the client connects to.
func (c *Client) SocketPath() string { return c.path }

// Server returns the daemon's Hello result (protocol version and server_version) on the current
// connection, or nil when no Hello was exchanged on it.
func (c *Client) Server() *registrypb.HelloResult { return c.server.Load() }

// ConnectionsOpened returns how many connections the client has opened: 1 after Dial, one more each
// time it replaced a connection that had ended.
func (c *Client) ConnectionsOpened() uint64 { return c.opened.Load() }

// Hello exchanges protocol versions (Dial, and each reconnection, do it unless WithoutHello was
// given). If sent, it must be the connection's first request. A daemon answering with another major
// version gets a *VersionError and the connection is closed.
func (c *Client) Hello(ctx context.Context, clientName string) (*registrypb.HelloResult, error) {
	response, conn, err := c.exchange(ctx, helloRequest(clientName))
	if err != nil {
		return nil, err
	}
	result, err := c.helloResult(conn, response)
	if err != nil {
		return nil, err
	}
	c.server.Store(result)
	return result, nil
}

func helloRequest(clientName string) *registrypb.Request {
	return &registrypb.Request{Operation: &registrypb.Request_Hello{Hello: &registrypb.Hello{
		ProtocolMajor: ProtocolMajor,
		ProtocolMinor: ProtocolMinor,
		ClientName:    clientName,
	}}}
}

// helloResult checks the answer to a Hello sent on conn: a daemon of another major version fails
// the connection with a *VersionError.
func (c *Client) helloResult(conn *connection, response *registrypb.Response) (*registrypb.HelloResult, error) {
	result := response.GetHello()
	if result == nil {
		return nil, c.protocolError("a %s result to a hello request", resultName(response))
	}
	if result.GetProtocolMajor() != ProtocolMajor {
		versionError := &VersionError{
			ClientMajor:   ProtocolMajor,
			ServerMajor:   result.GetProtocolMajor(),
			ServerMinor:   result.GetProtocolMinor(),
			ServerVersion: result.GetServerVersion(),
		}
		conn.fail(versionError)
		return nil, versionError
	}
	return result, nil
}

// Close closes the connection. Calls in flight fail with ErrClientClosed (requests already written
// may still be carried out by the daemon), and so do later calls: a closed client does not
// reconnect. Close is idempotent and always returns nil.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	conns := append(c.draining, c.conn)
	c.draining = nil
	c.mu.Unlock()
	for _, conn := range conns {
		if conn != nil {
			conn.close(c.closedError())
		}
	}
	return nil
}

func (c *Client) closedError() error {
	return &TransportError{Op: "close", Path: c.path, Err: ErrClientClosed}
}

// acquire returns the current connection, or opens a new one when there is none or it has ended or
// been retired: one goroutine dials (and says Hello), the others wait for it.
func (c *Client) acquire(ctx context.Context) (*connection, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, c.closedError()
		}
		if conn := c.conn; conn != nil && conn.usable() {
			c.mu.Unlock()
			return conn, nil
		}
		if d := c.dialing; d != nil {
			c.mu.Unlock()
			select {
			case <-d.done:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if d.err != nil && !d.ctxStopped {
				return nil, d.err
			}
			continue
		}
		d := &dialAttempt{done: make(chan struct{})}
		c.dialing = d
		c.mu.Unlock()

		conn, err := c.open(ctx)

		c.mu.Lock()
		c.dialing = nil
		var discard *connection
		if err == nil && c.closed {
			err = c.closedError()
			discard, conn = conn, nil
		}
		if err == nil {
			// A retired connection keeps answering what it was sent: Close must still reach it.
			kept := c.draining[:0]
			for _, old := range c.draining {
				if !old.finished() {
					kept = append(kept, old)
				}
			}
			c.draining = kept
			if old := c.conn; old != nil && !old.finished() {
				c.draining = append(c.draining, old)
			}
			c.conn = conn
		}
		d.err, d.ctxStopped = err, ctx.Err() != nil
		close(d.done)
		c.mu.Unlock()
		if discard != nil {
			discard.close(err)
		}
		return conn, err
	}
}

// open dials a new connection and, unless WithoutHello, exchanges Hello on it.
func (c *Client) open(ctx context.Context) (*connection, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var dialer net.Dialer
	netConn, err := dialer.DialContext(ctx, "unix", c.path)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &TransportError{Op: "dial", Path: c.path, Err: dialCause(err)}
	}
	conn := newConnection(netConn, c.path, &c.options, c.opened.Add(1), c.notePending)
	if !c.options.hello {
		c.server.Store(nil)
		return conn, nil
	}
	request := helloRequest(c.options.clientName)
	request.Id = c.newID()
	frame, err := encodeFrame(request, c.options.maxRequestBytes)
	if err == nil {
		var response *registrypb.Response
		if response, _, err = conn.roundTrip(ctx, frame, request.Id); err == nil {
			if e := response.GetError(); e != nil {
				err = newRegistryError(response.GetId(), e)
			} else {
				var result *registrypb.HelloResult
				if result, err = c.helloResult(conn, response); err == nil {
					c.server.Store(result)
					return conn, nil
				}
			}
		}
	}
	conn.close(err)
	return nil, err
}

func (c *Client) notePending(n int) {
	for {
		peak := c.peak.Load()
		if int64(n) <= peak || c.peak.CompareAndSwap(peak, int64(n)) {
			return
		}
	}
}

// Send sends one request and waits for its response. It sets req.Id (the client chooses the ids:
// unique per client, never 0); the caller sets the operation. It returns the response when its
// result is not an error, a *RegistryError when the daemon answered with one, and otherwise a
// transport, context or version error.
//
// Context: if ctx ends before the request is written, it is not sent. If it ends after, Send returns
// ctx.Err() at once, the response is discarded when it arrives, and the connection stays usable; but
// the daemon may still carry the request out (a write may be stored: check with GetTemplates or
// ListIdentifiers if it matters).
//
// With WithRetry, a retryable failure is tried again, with a new request id, until the policy's
// attempts are spent or ctx ends; the error is then the last attempt's.
func (c *Client) Send(ctx context.Context, req *registrypb.Request) (*registrypb.Response, error) {
	response, _, err := c.exchange(ctx, req)
	return response, err
}

// exchange sends one request, retrying under the policy, and returns its response (not an error
// response) and the connection that answered it.
func (c *Client) exchange(ctx context.Context, req *registrypb.Request) (*registrypb.Response, *connection, error) {
	if req == nil {
		req = &registrypb.Request{}
	}
	for attempt := 1; ; attempt++ {
		response, conn, sent, err := c.attempt(ctx, req)
		if err == nil {
			if e := response.GetError(); e != nil {
				err = newRegistryError(response.GetId(), e)
			} else if response.GetResult() == nil {
				return nil, conn, c.protocolError("a response to request %d without a result this client knows", req.GetId())
			} else {
				return response, conn, nil
			}
		}
		if !c.again(ctx, attempt, err, sent) {
			return nil, conn, err
		}
	}
}

// attempt sends the request once: on the current connection, or on a new one when the current one
// has ended. When the request provably never reached the daemon on a connection that was open before
// this call (e.g. it ended while idle, and the call came before its reader had seen it), it is sent
// on a new connection instead; a connection opened for this call that fails the same way is
// reported. sent is false when the request never reached the daemon.
func (c *Client) attempt(ctx context.Context, req *registrypb.Request) (response *registrypb.Response, conn *connection, sent bool, err error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, false, err
	}
	req.Id = c.newID()
	frame, err := encodeFrame(req, c.options.maxRequestBytes)
	if err != nil {
		return nil, nil, false, err
	}
	openedBefore := c.opened.Load()
	for resends := 0; ; resends++ {
		conn, err := c.acquire(ctx)
		if err != nil {
			return nil, nil, false, err
		}
		response, sent, err := conn.roundTrip(ctx, frame, req.Id)
		if err == nil || sent || ctx.Err() != nil || resends == 2 || (conn.seq > openedBefore && !errors.Is(err, errRetired)) {
			return response, conn, sent, err
		}
	}
}

// call sends one operation and returns its result message, checking the result's case.
func call[R any](ctx context.Context, c *Client, op string, req *registrypb.Request, get func(*registrypb.Response) *R) (*R, error) {
	response, err := c.Send(ctx, req)
	if err != nil {
		return nil, err
	}
	if result := get(response); result != nil {
		return result, nil
	}
	// Name the cases only: results may hold template data.
	return nil, c.protocolError("a %s result to a %s request", resultName(response), op)
}

func resultName(response *registrypb.Response) string {
	message := response.ProtoReflect()
	if field := message.WhichOneof(message.Descriptor().Oneofs().ByName("result")); field != nil {
		return string(field.Name())
	}
	return "empty"
}

func (c *Client) protocolError(format string, args ...any) error {
	return &TransportError{Op: "protocol", Path: c.path, Err: fmt.Errorf("%w: "+format, append([]any{ErrProtocol}, args...)...)}
}

func (c *Client) newID() uint64 {
	for {
		if id := c.nextID.Add(1); id != 0 {
			return id
		}
	}
}

// encodeFrame returns the request's frame: the body's length (4 bytes, big-endian), then the body.
func encodeFrame(req *registrypb.Request, maxBytes int) ([]byte, error) {
	size := proto.Size(req)
	if size > maxBytes || size > math.MaxUint32 {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d (WithMaxRequestBytes)", ErrRequestTooLarge, size, maxBytes)
	}
	frame, err := proto.MarshalOptions{}.MarshalAppend(make([]byte, 4, 4+size), req)
	if err != nil {
		// e.g. a string that is not valid UTF-8; the message names the field, not its value.
		return nil, fmt.Errorf("registry: cannot encode the request: %w", err)
	}
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	return frame, nil
}
