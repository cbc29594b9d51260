package registry

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"

	"registryd.local/client/registrypb"
)

const (
	// ProtocolMajor and ProtocolMinor are the protocol version this client speaks (PROTOCOL.md 1.1).
	ProtocolMajor = 1
	ProtocolMinor = 1
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

// Client is one connection to registryd. It is safe for concurrent use: requests from any number of
// goroutines are pipelined on the connection and each caller gets its own response.
type Client struct {
	conn    net.Conn
	path    string
	options options
	nextID  atomic.Uint64

	// writeToken is held (a value in the channel) by the goroutine writing a frame; taking it can be
	// abandoned with the caller's context, unlike a mutex.
	writeToken chan struct{}

	mu      sync.Mutex
	pending []*pendingCall // written and not yet answered, in request order
	failure error          // set once: the reason the connection is unusable
	peak    int            // the most calls ever pending at once (tests)

	readerDone chan struct{}
	server     atomic.Pointer[registrypb.HelloResult]
}

type pendingCall struct {
	id   uint64
	done chan outcome // buffered: the reader never blocks on a caller that gave up
}

type outcome struct {
	response *registrypb.Response
	err      error
}

// Dial connects to registryd's Unix socket and, unless WithoutHello is given, exchanges Hello: the
// daemon's major protocol version must be ProtocolMajor, or Dial fails with a *VersionError (or the
// daemon's UNSUPPORTED_VERSION *RegistryError); both match errors.Is(err, ErrUnsupportedVersion).
//
// socketPath "" means SocketPath(""): $REGISTRYD_SOCKET, else DefaultSocketPath (else
// SystemSocketPath when only that exists). ctx bounds the connection and the Hello, not the
// client's later life.
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
	path := SocketPath(socketPath)
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, &TransportError{Op: "dial", Path: path, Err: dialCause(err)}
	}
	c := &Client{
		conn:       conn,
		path:       path,
		options:    o,
		writeToken: make(chan struct{}, 1),
		readerDone: make(chan struct{}),
	}
	go c.readLoop()
	if o.hello {
		if _, err := c.Hello(ctx, o.clientName); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
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

// SocketPath returns the path of the socket the client is connected to.
func (c *Client) SocketPath() string { return c.path }

// Server returns the daemon's Hello result (protocol version and server_version), or nil when no
// Hello was exchanged.
func (c *Client) Server() *registrypb.HelloResult { return c.server.Load() }

// Hello exchanges protocol versions (Dial does it unless WithoutHello was given). If sent, it must
// be the connection's first request. A daemon answering with another major version gets a
// *VersionError and the connection is closed.
func (c *Client) Hello(ctx context.Context, clientName string) (*registrypb.HelloResult, error) {
	result, err := call(ctx, c, "hello", &registrypb.Request{Operation: &registrypb.Request_Hello{Hello: &registrypb.Hello{
		ProtocolMajor: ProtocolMajor,
		ProtocolMinor: ProtocolMinor,
		ClientName:    clientName,
	}}}, (*registrypb.Response).GetHello)
	if err != nil {
		return nil, err
	}
	if result.GetProtocolMajor() != ProtocolMajor {
		versionError := &VersionError{
			ClientMajor:   ProtocolMajor,
			ServerMajor:   result.GetProtocolMajor(),
			ServerMinor:   result.GetProtocolMinor(),
			ServerVersion: result.GetServerVersion(),
		}
		c.fail(versionError)
		return nil, versionError
	}
	c.server.Store(result)
	return result, nil
}

// Close closes the connection. Calls in flight fail with ErrClientClosed (requests already written
// may still be carried out by the daemon). Close is idempotent and always returns nil.
func (c *Client) Close() error {
	c.fail(&TransportError{Op: "close", Path: c.path, Err: ErrClientClosed})
	<-c.readerDone
	return nil
}

// Send sends one request and waits for its response. It sets req.Id (the client chooses the ids:
// unique per connection, never 0); the caller sets the operation. It returns the response when its
// result is not an error, a *RegistryError when the daemon answered with one, and otherwise a
// transport, context or version error.
//
// Context: if ctx ends before the request is written, it is not sent. If it ends after, Send returns
// ctx.Err() at once, the response is discarded when it arrives, and the connection stays usable; but
// the daemon may still carry the request out (a write may be stored: check with GetTemplates or
// ListIdentifiers if it matters).
func (c *Client) Send(ctx context.Context, req *registrypb.Request) (*registrypb.Response, error) {
	if req == nil {
		req = &registrypb.Request{}
	}
	response, err := c.roundTrip(ctx, req)
	if err != nil {
		return nil, err
	}
	if e := response.GetError(); e != nil {
		return nil, newRegistryError(response.GetId(), e)
	}
	if response.GetResult() == nil {
		return nil, c.protocolError("a response to request %d without a result this client knows", req.GetId())
	}
	return response, nil
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

func (c *Client) roundTrip(ctx context.Context, req *registrypb.Request) (*registrypb.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	req.Id = c.newID()
	frame, err := encodeFrame(req, c.options.maxRequestBytes)
	if err != nil {
		return nil, err
	}

	select {
	case c.writeToken <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	pending := &pendingCall{id: req.Id, done: make(chan outcome, 1)}
	c.mu.Lock()
	if c.failure != nil {
		err := c.failure
		c.mu.Unlock()
		<-c.writeToken
		return nil, err
	}
	c.pending = append(c.pending, pending)
	if len(c.pending) > c.peak {
		c.peak = len(c.pending)
	}
	c.mu.Unlock()
	written, err := c.write(ctx, frame)
	if err != nil {
		if written == 0 && ctx.Err() != nil {
			// Nothing went out: the stream is intact. The call is the last pending one (the write
			// token is held), and no response can have come for it.
			c.mu.Lock()
			if n := len(c.pending); n > 0 && c.pending[n-1] == pending {
				c.pending[n-1] = nil
				c.pending = c.pending[:n-1]
			}
			c.mu.Unlock()
			<-c.writeToken
			return nil, ctx.Err()
		}
		<-c.writeToken
		if written == 0 && peerClosed(err) {
			// The daemon closed the connection, possibly after a last word still to be read (e.g.
			// TOO_MANY_CONNECTIONS, or the response to an earlier request): the reader delivers it,
			// then fails the remaining calls, this one included, when it reaches the end.
			select {
			case o := <-pending.done:
				return o.response, o.err
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Second):
			}
		}
		// A partial frame would corrupt the stream: the connection is done for.
		c.fail(&TransportError{Op: "write", Path: c.path, Err: writeCause(err)})
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		o := <-pending.done
		return o.response, o.err
	}
	<-c.writeToken

	select {
	case o := <-pending.done:
		return o.response, o.err
	case <-ctx.Done():
		// The response will be read and dropped in turn; the connection stays in step.
		return nil, ctx.Err()
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

// write writes one whole frame, giving up when ctx ends (the daemon applies back-pressure by not
// reading, so a write can block).
func (c *Client) write(ctx context.Context, frame []byte) (int, error) {
	deadline, hasDeadline := ctx.Deadline()
	if ctx.Done() == nil {
		return c.conn.Write(frame)
	}
	if hasDeadline {
		c.conn.SetWriteDeadline(deadline)
	}
	stop := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-ctx.Done():
			c.conn.SetWriteDeadline(time.Unix(1, 0))
		case <-stop:
		}
	}()
	n, err := c.conn.Write(frame)
	close(stop)
	<-stopped
	c.conn.SetWriteDeadline(time.Time{})
	return n, err
}

func peerClosed(err error) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

func writeCause(err error) error {
	if peerClosed(err) || errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("%w (%v)", ErrConnectionClosed, dialCause(err))
	}
	return dialCause(err)
}

// fail makes the connection unusable with err (the first reason wins), closes it, and fails every
// pending call with that reason.
func (c *Client) fail(err error) {
	c.mu.Lock()
	if c.failure == nil {
		c.failure = err
	}
	failure := c.failure
	pending := c.pending
	c.pending = nil
	c.mu.Unlock()
	c.conn.Close()
	for _, p := range pending {
		p.done <- outcome{err: failure}
	}
}

// readLoop reads responses and hands each to the oldest pending call: the daemon answers in request
// order on a connection.
func (c *Client) readLoop() {
	defer close(c.readerDone)
	reader := bufio.NewReaderSize(c.conn, 64<<10)
	var header [4]byte
	for {
		if _, err := io.ReadFull(reader, header[:]); err != nil {
			c.fail(c.readError(err))
			return
		}
		length := binary.BigEndian.Uint32(header[:])
		if uint64(length) > uint64(c.options.maxResponseBytes) {
			c.fail(c.protocolError("a response of %d bytes exceeds the limit of %d (WithMaxResponseBytes)", length, c.options.maxResponseBytes))
			return
		}
		body := make([]byte, length)
		if _, err := io.ReadFull(reader, body); err != nil {
			c.fail(c.readError(err))
			return
		}
		response := &registrypb.Response{}
		if err := proto.Unmarshal(body, response); err != nil {
			c.fail(c.protocolError("an undecodable response frame of %d bytes", length))
			return
		}
		if err := c.deliver(response); err != nil {
			c.fail(err)
			return
		}
	}
}

func (c *Client) readError(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
		return &TransportError{Op: "read", Path: c.path, Err: ErrConnectionClosed}
	}
	return &TransportError{Op: "read", Path: c.path, Err: dialCause(err)}
}

func (c *Client) deliver(response *registrypb.Response) error {
	c.mu.Lock()
	if len(c.pending) == 0 {
		c.mu.Unlock()
		// A connection-level error before any request, e.g. TOO_MANY_CONNECTIONS: it is the reason
		// every call on this connection fails.
		if e := response.GetError(); e != nil && response.GetId() == 0 {
			return newRegistryError(0, e)
		}
		return c.protocolError("a response to request %d that was not sent", response.GetId())
	}
	head := c.pending[0]
	// Id 0 answers what the daemon could not attribute to a request (FRAME_TOO_LARGE): the oldest.
	if response.GetId() != head.id && response.GetId() != 0 {
		c.mu.Unlock()
		return c.protocolError("a response to request %d while request %d was the oldest unanswered", response.GetId(), head.id)
	}
	c.pending[0] = nil
	c.pending = c.pending[1:]
	c.mu.Unlock()
	if e := response.GetError(); e != nil {
		if registryError := newRegistryError(response.GetId(), e); registryError.ClosesConnection() {
			// The daemon closes the connection after this answer: it is the reason every later
			// call fails (set before the caller hears of it, and before the reader meets EOF).
			c.fail(registryError)
		}
	}
	head.done <- outcome{response: response}
	return nil
}
