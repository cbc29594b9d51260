package registry

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"

	"registryd.local/client/registrypb"
)

// connection is one socket to the daemon: the frames written on it, in order, and a reader goroutine
// that hands each response to the oldest waiting call. A Client replaces it when it ends.
type connection struct {
	conn    net.Conn
	path    string
	options *options
	// seq is the connection's number: n for the client's n-th connection.
	seq uint64
	// notePending reports how many calls are pending after one was added (the client's peak).
	notePending func(int)

	// writeToken is held (a value in the channel) by the goroutine writing a frame; taking it can be
	// abandoned with the caller's context, unlike a mutex.
	writeToken chan struct{}

	mu      sync.Mutex
	pending []*pendingCall // written (or being written) and not yet answered, in request order
	failure error          // set once: the reason the connection is unusable
	// retired: the daemon answered SHUTTING_DOWN here, so it reads no more requests on this
	// connection. Calls pending get their answers; new calls go to a new connection.
	retired bool

	readerDone chan struct{}
}

type pendingCall struct {
	id   uint64
	done chan outcome // buffered: the reader never blocks on a caller that gave up
}

type outcome struct {
	response *registrypb.Response
	err      error
}

func newConnection(conn net.Conn, path string, o *options, seq uint64, notePending func(int)) *connection {
	c := &connection{
		conn:        conn,
		path:        path,
		options:     o,
		seq:         seq,
		notePending: notePending,
		writeToken:  make(chan struct{}, 1),
		readerDone:  make(chan struct{}),
	}
	go c.readLoop()
	return c
}

// usable reports whether a new request may be written on the connection.
func (c *connection) usable() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failure == nil && !c.retired
}

// finished reports whether the connection's reader has ended (the connection is closed).
func (c *connection) finished() bool {
	select {
	case <-c.readerDone:
		return true
	default:
		return false
	}
}

// roundTrip writes one frame (the request with this id) and waits for its response.
//
// sent is false only when the request provably never reached the daemon: the connection had
// already ended (or been retired) when the call came to write, or the write failed before a single
// byte of the frame was handed to the socket. A request written, even in part, is sent: if the
// connection then closes without its response, the daemon may have carried it out (PROTOCOL.md §3,
// the drain deadline), so it must never be sent again.
func (c *connection) roundTrip(ctx context.Context, frame []byte, id uint64) (response *registrypb.Response, sent bool, err error) {
	select {
	case c.writeToken <- struct{}{}:
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
	pending := &pendingCall{id: id, done: make(chan outcome, 1)}
	c.mu.Lock()
	if c.failure != nil || c.retired {
		err := c.failure
		if err == nil {
			err = c.retiredError()
		}
		c.mu.Unlock()
		<-c.writeToken
		return nil, false, err
	}
	c.pending = append(c.pending, pending)
	inFlight := len(c.pending)
	c.mu.Unlock()
	c.notePending(inFlight)
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
			return nil, false, ctx.Err()
		}
		<-c.writeToken
		if written == 0 && peerClosed(err) {
			// The daemon closed the connection, possibly after a last word still to be read (e.g.
			// TOO_MANY_CONNECTIONS, or the response to an earlier request): the reader delivers it,
			// then fails the remaining calls, this one included, when it reaches the end.
			select {
			case o := <-pending.done:
				return o.response, o.response != nil, o.err
			case <-ctx.Done():
				return nil, false, ctx.Err()
			case <-time.After(time.Second):
			}
		}
		// A partial frame would corrupt the stream: the connection is done for.
		c.fail(&TransportError{Op: "write", Path: c.path, Err: writeCause(err)})
		if ctx.Err() != nil {
			return nil, written > 0, ctx.Err()
		}
		o := <-pending.done
		return o.response, written > 0 || o.response != nil, o.err
	}
	<-c.writeToken

	select {
	case o := <-pending.done:
		return o.response, true, o.err
	case <-ctx.Done():
		// The response will be read and dropped in turn; the connection stays in step.
		return nil, true, ctx.Err()
	}
}

// errRetired: the connection was retired after SHUTTING_DOWN, before the request was written. It
// wraps ErrConnectionClosed.
var errRetired = fmt.Errorf("%w: registryd answered SHUTTING_DOWN on this connection and reads no more requests on it", ErrConnectionClosed)

func (c *connection) retiredError() error {
	return &TransportError{Op: "write", Path: c.path, Err: errRetired}
}

// write writes one whole frame, giving up when ctx ends (the daemon applies back-pressure by not
// reading, so a write can block).
func (c *connection) write(ctx context.Context, frame []byte) (int, error) {
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
func (c *connection) fail(err error) {
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

// close fails the connection with err and waits for its reader to end.
func (c *connection) close(err error) {
	c.fail(err)
	<-c.readerDone
}

func (c *connection) protocolError(format string, args ...any) error {
	return &TransportError{Op: "protocol", Path: c.path, Err: fmt.Errorf("%w: "+format, append([]any{ErrProtocol}, args...)...)}
}

// readLoop reads responses and hands each to the oldest pending call: the daemon answers in request
// order on a connection.
func (c *connection) readLoop() {
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

func (c *connection) readError(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
		return &TransportError{Op: "read", Path: c.path, Err: ErrConnectionClosed}
	}
	return &TransportError{Op: "read", Path: c.path, Err: dialCause(err)}
}

func (c *connection) deliver(response *registrypb.Response) error {
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
	if response.GetError().GetCode() == CodeShuttingDown {
		// The daemon reads no more requests on this connection: the next call (a retry included)
		// goes to a new one. Set before the caller hears of it.
		c.retired = true
	}
	c.mu.Unlock()
	if e := response.GetError(); e != nil {
		if registryError := newRegistryError(response.GetId(), e); registryError.ClosesConnection() {
			// The daemon closes the connection after this answer: it is the reason the calls
			// pending behind it fail (set before the caller hears of it, and before the reader
			// meets EOF); the next call opens a new connection.
			c.fail(registryError)
		}
	}
	head.done <- outcome{response: response}
	return nil
}
