package registry

// Tests against an in-process fake daemon: the client's side of the protocol where a real daemon
// cannot be made to misbehave (another major version, responses out of order, a connection that
// closes mid-request) or to be slow on purpose. They need no REGISTRYD_BINARY.

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "registryd.local/client/registrypb"
)

// fakeDaemon listens on a temporary socket and runs serve on each connection it accepts.
func fakeDaemon(t *testing.T, serve func(conn net.Conn)) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "registry-fake")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "fake.sock")
	listener, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var conns sync.Map
	go func() {
		for {
			conn, err := listener.Accept()
			if err != nil {
				return
			}
			conns.Store(conn, true)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conn.Close()
				serve(conn)
			}()
		}
	}()
	t.Cleanup(func() {
		listener.Close()
		conns.Range(func(conn, _ any) bool { conn.(net.Conn).Close(); return true })
		wg.Wait()
		os.RemoveAll(dir)
	})
	return path
}

func readRequest(conn net.Conn) (*pb.Request, error) {
	var header [4]byte
	if _, err := io.ReadFull(conn, header[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(header[:]))
	if _, err := io.ReadFull(conn, body); err != nil {
		return nil, err
	}
	request := &pb.Request{}
	return request, proto.Unmarshal(body, request)
}

func writeResponse(conn net.Conn, response *pb.Response) error {
	body, err := proto.Marshal(response)
	if err != nil {
		return err
	}
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	_, err = conn.Write(append(frame, body...))
	return err
}

func statsResponse(id uint64, version string) *pb.Response {
	return &pb.Response{Id: id, Result: &pb.Response_Stats{Stats: &pb.StatsResult{ServerVersion: version}}}
}

// echoStats answers every request with a stats result naming the request's id.
func echoStats(conn net.Conn) {
	for {
		request, err := readRequest(conn)
		if err != nil {
			return
		}
		if writeResponse(conn, statsResponse(request.GetId(), "fake")) != nil {
			return
		}
	}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// The frames of PROTOCOL.md §6 and §7, byte for byte.
func TestFramesMatchTheProtocolDocument(t *testing.T) {
	hello, err := encodeFrame(&pb.Request{Id: 1, Operation: &pb.Request_Hello{Hello: &pb.Hello{
		ProtocolMajor: 1, ProtocolMinor: 0, ClientName: "example",
	}}}, DefaultMaxRequestBytes)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := hex.EncodeToString(hello), "0000000f080112 0b08011a076578616d706c65"; got != strings.ReplaceAll(want, " ", "") {
		t.Errorf("hello frame %s, PROTOCOL.md §6 says %s", got, want)
	}
	list, err := encodeFrame(&pb.Request{Id: 2, Operation: &pb.Request_ListGalleries{ListGalleries: &pb.ListGalleriesRequest{}}}, DefaultMaxRequestBytes)
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(list); got != "000000050802a20100" {
		t.Errorf("list_galleries frame %s, PROTOCOL.md §7 says 000000050802a20100", got)
	}

	// Alice's later capture (§6): magnitudes 0.1875 (i < 4), 0.125 (i < 36), 0.0625; negative when
	// i mod 3 = 1; values 4-7 with their signs flipped.
	vector := make([]float32, 128)
	for i := range vector {
		switch {
		case i < 4:
			vector[i] = 0.1875
		case i < 36:
			vector[i] = 0.125
		default:
			vector[i] = 0.0625
		}
		if i%3 == 1 {
			vector[i] = -vector[i]
		}
		if i >= 4 && i < 8 {
			vector[i] = -vector[i]
		}
	}
	identify, err := encodeFrame(&pb.Request{Id: 4, Operation: &pb.Request_Identify{Identify: &pb.IdentifyRequest{
		Face: VectorFace(AlgorithmArcFace, vector),
	}}}, DefaultMaxRequestBytes)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(identify)
	if len(identify) != 532 || hex.EncodeToString(sum[:]) != "c0d79f2e4172534f539b954e74a9ac3df830ddaf00583c5582a6a346e9579407" {
		t.Errorf("identify frame: %d bytes, SHA-256 %x; PROTOCOL.md §6 says 532 bytes, c0d79f2e…", len(identify), sum)
	}
}

func TestDialRefusesAnotherMajorVersion(t *testing.T) {
	path := fakeDaemon(t, func(conn net.Conn) {
		request, err := readRequest(conn)
		if err != nil {
			return
		}
		if request.GetHello().GetProtocolMajor() != ProtocolMajor || request.GetHello().GetClientName() != "version-test" {
			return
		}
		writeResponse(conn, &pb.Response{Id: request.GetId(), Result: &pb.Response_Hello{Hello: &pb.HelloResult{
			ProtocolMajor: 2, ProtocolMinor: 3, ServerVersion: "9.9.9",
		}}})
		io.Copy(io.Discard, conn)
	})
	client, err := Dial(testContext(t), path, WithClientName("version-test"))
	if err == nil {
		client.Close()
		t.Fatal("Dial accepted a daemon speaking protocol 2.3")
	}
	var versionError *VersionError
	if !errors.As(err, &versionError) || versionError.ServerMajor != 2 || !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("Dial: %v (%T), want a *VersionError matching ErrUnsupportedVersion", err, err)
	}
	if !strings.Contains(err.Error(), "protocol 2.3") || !strings.Contains(err.Error(), "major version 1") {
		t.Errorf("unclear message: %q", err)
	}
}

func TestTooManyConnectionsBeforeAnyRequest(t *testing.T) {
	path := fakeDaemon(t, func(conn net.Conn) {
		writeResponse(conn, &pb.Response{Id: 0, Result: &pb.Response_Error{Error: &pb.Error{
			Code: CodeTooManyConnections, Message: "the daemon serves 256 connections",
		}}})
	})
	_, err := Dial(testContext(t), path)
	registryError, ok := AsRegistryError(err)
	if !ok || registryError.Code != CodeTooManyConnections || !registryError.Retryable() || !registryError.ClosesConnection() {
		t.Fatalf("Dial: %v, want TOO_MANY_CONNECTIONS", err)
	}
}

// A call abandoned by its context leaves the connection in step: the next call gets its own response.
func TestAbandonedCallKeepsTheConnectionInStep(t *testing.T) {
	release := make(chan struct{})
	path := fakeDaemon(t, func(conn net.Conn) {
		first, err := readRequest(conn)
		if err != nil {
			return
		}
		second, err := readRequest(conn)
		if err != nil {
			return
		}
		<-release
		writeResponse(conn, statsResponse(first.GetId(), "first"))
		writeResponse(conn, statsResponse(second.GetId(), "second"))
		echoStats(conn)
	})
	client, err := Dial(testContext(t), path, WithoutHello())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := client.Stats(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("first call: %v, want context.DeadlineExceeded", err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("the deadline took %v to end the call", elapsed)
	}
	secondDone := make(chan error, 1)
	go func() {
		stats, err := client.Stats(testContext(t))
		if err == nil && stats.GetServerVersion() != "second" {
			err = errors.New("the second call got " + stats.GetServerVersion() + "'s response")
		}
		secondDone <- err
	}()
	time.Sleep(50 * time.Millisecond)
	close(release)
	if err := <-secondDone; err != nil {
		t.Fatal(err)
	}
	// A context that has already ended sends nothing.
	cancelled, cancelNow := context.WithCancel(context.Background())
	cancelNow()
	if _, err := client.Stats(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
	if stats, err := client.Stats(testContext(t)); err != nil || stats.GetServerVersion() != "fake" {
		t.Fatalf("after the cancelled call: %v, %v", stats, err)
	}
}

func TestResponseOutOfOrderIsAProtocolError(t *testing.T) {
	path := fakeDaemon(t, func(conn net.Conn) {
		request, err := readRequest(conn)
		if err != nil {
			return
		}
		writeResponse(conn, statsResponse(request.GetId()+7, "wrong"))
		io.Copy(io.Discard, conn)
	})
	client, err := Dial(testContext(t), path, WithoutHello())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	_, err = client.Stats(testContext(t))
	var transportError *TransportError
	if !errors.Is(err, ErrProtocol) || !errors.As(err, &transportError) || transportError.Op != "protocol" {
		t.Fatalf("Stats: %v, want a protocol TransportError", err)
	}
	// The connection is closed; the next call opens a new one (where the fake errs again).
	if _, err := client.Stats(testContext(t)); !errors.Is(err, ErrProtocol) {
		t.Fatalf("a call after the protocol error: %v", err)
	}
	if opened := client.ConnectionsOpened(); opened != 2 {
		t.Fatalf("%d connections opened, want 2", opened)
	}
}

func TestWrongResultCaseIsAProtocolError(t *testing.T) {
	path := fakeDaemon(t, echoStats)
	client, err := Dial(testContext(t), path, WithoutHello())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	_, err = client.ListGalleries(testContext(t))
	if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "a stats result to a list_galleries request") {
		t.Fatalf("ListGalleries answered by stats: %v", err)
	}
	// The stream is still in step: only that call failed.
	if _, err := client.Stats(testContext(t)); err != nil {
		t.Fatalf("a call after the mismatched result: %v", err)
	}
}

// A request written in full before the daemon closed the connection is never sent again: the daemon
// may have carried it out (PROTOCOL.md §3, the drain deadline). The call fails with
// ErrConnectionClosed; the next call opens a new connection.
func TestWrittenRequestIsNotResent(t *testing.T) {
	var mu sync.Mutex
	seen := map[uint64]int{}
	path := fakeDaemon(t, func(conn net.Conn) {
		request, err := readRequest(conn)
		if err != nil {
			return
		}
		mu.Lock()
		seen[request.GetId()]++
		mu.Unlock()
		// then close without answering
	})
	// Even with a retry policy: ErrConnectionClosed after the write is never retried.
	var recorded waits
	client, err := Dial(testContext(t), path, WithoutHello(), WithRetry(RetryPolicy{MaxAttempts: 5, MinBackoff: time.Millisecond}), recorded.option())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	first := &pb.Request{Operation: &pb.Request_Stats{Stats: &pb.StatsRequest{}}}
	if _, err := client.Send(testContext(t), first); !errors.Is(err, ErrConnectionClosed) {
		t.Fatalf("Stats on a connection the daemon closed: %v", err)
	}
	second := &pb.Request{Operation: &pb.Request_Stats{Stats: &pb.StatsRequest{}}}
	if _, err := client.Send(testContext(t), second); !errors.Is(err, ErrConnectionClosed) {
		t.Fatalf("a later call: %v", err)
	}
	time.Sleep(100 * time.Millisecond) // time for a resend to arrive, were there one
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[first.GetId()] != 1 || seen[second.GetId()] != 1 {
		t.Fatalf("the fake daemon saw %v, want requests %d and %d once each", seen, first.GetId(), second.GetId())
	}
	if opened, waited := client.ConnectionsOpened(), recorded.get(); opened != 2 || len(waited) != 0 {
		t.Fatalf("%d connections opened, %d retry waits; want 2 (one per call), none", opened, len(waited))
	}
}

// The daemon closes a connection while nothing is in flight (its idle timeout): the next call says
// Hello on a new connection and succeeds, whether or not the client's reader had seen the end yet
// (if not, the write fails before any byte goes out, and the request goes to a new connection).
func TestConnectionClosedWhileIdleIsReplaced(t *testing.T) {
	var mu sync.Mutex
	seen := map[uint64]int{}
	hellos := 0
	closed := make(chan struct{}, 1)
	path := fakeDaemon(t, func(conn net.Conn) {
		hello, err := readRequest(conn)
		if err != nil || hello.GetHello() == nil {
			return
		}
		writeResponse(conn, &pb.Response{Id: hello.GetId(), Result: &pb.Response_Hello{Hello: &pb.HelloResult{ProtocolMajor: 1, ProtocolMinor: 1, ServerVersion: "fake"}}})
		request, err := readRequest(conn)
		if err != nil {
			return
		}
		mu.Lock()
		hellos++
		seen[request.GetId()]++
		mu.Unlock()
		writeResponse(conn, statsResponse(request.GetId(), "fake"))
		conn.Close()
		closed <- struct{}{}
	})
	client, err := Dial(testContext(t), path)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	const calls = 40
	for i := 1; i <= calls; i++ {
		if _, err := client.Stats(testContext(t)); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		<-closed // closed by the daemon, nothing in flight
		if i%2 == 0 {
			time.Sleep(5 * time.Millisecond) // the reader has seen the end by now, most likely
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if opened := client.ConnectionsOpened(); opened != calls || hellos != calls || len(seen) != calls {
		t.Fatalf("%d connections opened, %d hellos, %d distinct requests; want %d each", opened, hellos, len(seen), calls)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("request %d arrived %d times", id, n)
		}
	}
}

// Many goroutines call while the daemon closes each connection after one answer: every call either
// succeeds with its own response or fails with ErrConnectionClosed (written, then closed unanswered),
// and no request reaches the daemon twice.
func TestReconnectingUnderConcurrentCallsNeverResends(t *testing.T) {
	var mu sync.Mutex
	seen := map[uint64]int{}
	path := fakeDaemon(t, func(conn net.Conn) {
		request, err := readRequest(conn)
		if err != nil {
			return
		}
		mu.Lock()
		seen[request.GetId()]++
		mu.Unlock()
		writeResponse(conn, &pb.Response{Id: request.GetId(), Result: &pb.Response_Stats{Stats: &pb.StatsResult{RequestsServed: request.GetId()}}})
	})
	client, err := Dial(testContext(t), path, WithoutHello())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	const goroutines, calls = 8, 25
	var wg sync.WaitGroup
	var succeeded, closedErrors sync.Map
	errs := make(chan error, goroutines*calls)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < calls; i++ {
				request := &pb.Request{Operation: &pb.Request_Stats{Stats: &pb.StatsRequest{}}}
				response, err := client.Send(testContext(t), request)
				switch {
				case err == nil && response.GetStats().GetRequestsServed() == request.GetId():
					succeeded.Store(request.GetId(), true)
				case err == nil:
					errs <- fmt.Errorf("request %d got the response to %d", request.GetId(), response.GetStats().GetRequestsServed())
				case errors.Is(err, ErrConnectionClosed):
					closedErrors.Store(request.GetId(), true)
				default:
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	mu.Lock()
	defer mu.Unlock()
	count := 0
	succeeded.Range(func(id, _ any) bool {
		count++
		if seen[id.(uint64)] != 1 {
			t.Errorf("answered request %d arrived %d times", id, seen[id.(uint64)])
		}
		return true
	})
	for id, n := range seen {
		if n != 1 {
			t.Errorf("request %d arrived %d times", id, n)
		}
	}
	failed := 0
	closedErrors.Range(func(_, _ any) bool { failed++; return true })
	t.Logf("%d calls: %d answered, %d failed with ErrConnectionClosed; %d connections", goroutines*calls, count, failed, client.ConnectionsOpened())
	if count == 0 {
		t.Errorf("no call succeeded")
	}
}

// A connection whose daemon answered SHUTTING_DOWN reads no more requests: the next call goes to a
// new connection instead of waiting there until the daemon closes it.
func TestShuttingDownRetiresTheConnection(t *testing.T) {
	var connections, onFirst atomic.Int32
	path := fakeDaemon(t, func(conn net.Conn) {
		if connections.Add(1) == 1 {
			request, err := readRequest(conn)
			if err != nil {
				return
			}
			onFirst.Add(1)
			writeResponse(conn, &pb.Response{Id: request.GetId(), Result: &pb.Response_Error{Error: &pb.Error{Code: CodeShuttingDown, Message: "stopping"}}})
			for {
				if _, err := readRequest(conn); err != nil {
					return
				}
				onFirst.Add(1)
			}
		}
		echoStats(conn)
	})
	client, err := Dial(testContext(t), path, WithoutHello())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if _, err := client.Stats(testContext(t)); !HasCode(err, CodeShuttingDown) || !IsRetryable(err) {
		t.Fatalf("Stats: %v, want SHUTTING_DOWN", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if stats, err := client.Stats(ctx); err != nil || stats.GetServerVersion() != "fake" {
		t.Fatalf("the call after SHUTTING_DOWN: %v, %v", stats, err)
	}
	if opened, first := client.ConnectionsOpened(), onFirst.Load(); opened != 2 || first != 1 {
		t.Fatalf("%d connections opened, %d requests on the first; want 2 and 1", opened, first)
	}
}

// The daemon closed the connection while it was idle, and the call writes before the client's reader
// has seen the end (held back here: none runs on the old connection): the write fails before any
// byte goes out, so the request goes to a new connection, and reaches the daemon once.
func TestUnsentRequestGoesToANewConnection(t *testing.T) {
	var mu sync.Mutex
	seen := map[uint64]int{}
	path := fakeDaemon(t, func(conn net.Conn) {
		for {
			request, err := readRequest(conn)
			if err != nil {
				return
			}
			mu.Lock()
			seen[request.GetId()]++
			mu.Unlock()
			writeResponse(conn, statsResponse(request.GetId(), "fake"))
		}
	})
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	syscall.Close(fds[1]) // the daemon's side, closed
	file := os.NewFile(uintptr(fds[0]), "idle")
	idle, err := net.FileConn(file)
	file.Close()
	if err != nil {
		t.Fatal(err)
	}
	client := &Client{path: path, options: options{hello: false, maxRequestBytes: DefaultMaxRequestBytes, maxResponseBytes: DefaultMaxResponseBytes}}
	client.opened.Store(1)
	old := &connection{conn: idle, path: path, options: &client.options, seq: 1, notePending: client.notePending, writeToken: make(chan struct{}, 1), readerDone: make(chan struct{})}
	client.conn = old
	defer client.Close()
	defer func() { go old.readLoop() }() // lets Close finish with it

	request := &pb.Request{Operation: &pb.Request_Stats{Stats: &pb.StatsRequest{}}}
	response, err := client.Send(testContext(t), request)
	if err != nil || response.GetStats().GetServerVersion() != "fake" {
		t.Fatalf("Send: %v, %v", response, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if seen[request.GetId()] != 1 || len(seen) != 1 || client.ConnectionsOpened() != 2 {
		t.Fatalf("the daemon saw %v (want request %d once); %d connections opened, want 2", seen, request.GetId(), client.ConnectionsOpened())
	}
}

// roundTrip's "sent": false only when the request provably never reached the daemon.
func TestRoundTripSaysWhetherTheRequestWentOut(t *testing.T) {
	pair := func() (net.Conn, net.Conn) {
		fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
		if err != nil {
			t.Fatal(err)
		}
		var conns [2]net.Conn
		for i, fd := range fds {
			file := os.NewFile(uintptr(fd), "pair")
			if conns[i], err = net.FileConn(file); err != nil {
				t.Fatal(err)
			}
			file.Close()
		}
		return conns[0], conns[1]
	}
	o := &options{maxResponseBytes: DefaultMaxResponseBytes}
	frame, err := encodeFrame(&pb.Request{Id: 1, Operation: &pb.Request_Stats{Stats: &pb.StatsRequest{}}}, DefaultMaxRequestBytes)
	if err != nil {
		t.Fatal(err)
	}

	// The peer closed before the write, and the reader has not seen it yet (none runs here): the
	// write fails before any byte goes out.
	mine, peer := pair()
	peer.Close()
	c := &connection{conn: mine, path: "pair", options: o, notePending: func(int) {}, writeToken: make(chan struct{}, 1), readerDone: make(chan struct{})}
	if _, sent, err := c.roundTrip(testContext(t), frame, 1); sent || !errors.Is(err, ErrConnectionClosed) {
		t.Errorf("a write to a closed peer: sent %v, %v; want not sent, ErrConnectionClosed", sent, err)
	}
	// Known closed before the call: not sent either.
	if _, sent, err := c.roundTrip(testContext(t), frame, 2); sent || !errors.Is(err, ErrConnectionClosed) {
		t.Errorf("a call on a failed connection: sent %v, %v", sent, err)
	}

	// Written in full, then the peer closes without answering: sent.
	mine, peer = pair()
	c = newConnection(mine, "pair", o, 1, func(int) {})
	go func() {
		readRequest(peer)
		peer.Close()
	}()
	if _, sent, err := c.roundTrip(testContext(t), frame, 3); !sent || !errors.Is(err, ErrConnectionClosed) {
		t.Errorf("a request read, then the connection closed: sent %v, %v; want sent, ErrConnectionClosed", sent, err)
	}
	c.close(ErrClientClosed)
}

func TestCloseFailsCallsInFlight(t *testing.T) {
	path := fakeDaemon(t, func(conn net.Conn) { io.Copy(io.Discard, conn) })
	client, err := Dial(testContext(t), path, WithoutHello())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := client.Stats(context.Background())
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	client.Close()
	if err := <-done; !errors.Is(err, ErrClientClosed) {
		t.Fatalf("a call in flight at Close: %v", err)
	}
	if _, err := client.Stats(context.Background()); !errors.Is(err, ErrClientClosed) {
		t.Fatalf("a call after Close: %v", err)
	}
	client.Close() // idempotent
}

func TestRequestTooLargeIsNotSent(t *testing.T) {
	path := fakeDaemon(t, echoStats)
	client, err := Dial(testContext(t), path, WithoutHello(), WithMaxRequestBytes(1000))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	_, err = client.Register(testContext(t), &pb.RegisterRequest{Identifier: "big", Face: VectorFace(AlgorithmR300, make([]float32, 512))})
	if !errors.Is(err, ErrRequestTooLarge) {
		t.Fatalf("Register: %v, want ErrRequestTooLarge", err)
	}
	if _, err := client.Stats(testContext(t)); err != nil {
		t.Fatalf("the connection after a refused request: %v", err)
	}
}

func TestResponseAboveTheLimitIsAProtocolError(t *testing.T) {
	path := fakeDaemon(t, func(conn net.Conn) {
		request, err := readRequest(conn)
		if err != nil {
			return
		}
		writeResponse(conn, statsResponse(request.GetId(), strings.Repeat("v", 500)))
		io.Copy(io.Discard, conn)
	})
	client, err := Dial(testContext(t), path, WithoutHello(), WithMaxResponseBytes(100))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if _, err := client.Stats(testContext(t)); !errors.Is(err, ErrProtocol) {
		t.Fatalf("an oversized response: %v", err)
	}
}

func TestDialErrorNamesTheSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "absent.sock")
	_, err := Dial(testContext(t), path)
	var transportError *TransportError
	if !errors.As(err, &transportError) || transportError.Op != "dial" || !strings.Contains(err.Error(), path) {
		t.Fatalf("Dial of a missing socket: %v", err)
	}
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Dial of a missing socket does not match os.ErrNotExist: %v", err)
	}
}

func TestSocketPathResolution(t *testing.T) {
	t.Setenv(SocketEnvironmentVariable, "/env/registryd.sock")
	if got := SocketPath("/given.sock"); got != "/given.sock" {
		t.Errorf("explicit path: %s", got)
	}
	if got := SocketPath(""); got != "/env/registryd.sock" {
		t.Errorf("from the environment: %s", got)
	}
	t.Setenv(SocketEnvironmentVariable, "")
	want := DefaultSocketPath
	if !exists(DefaultSocketPath) && exists(SystemSocketPath) {
		want = SystemSocketPath
	}
	if got := SocketPath(""); got != want {
		t.Errorf("default: %s, want %s", got, want)
	}
}

func TestLandmarkTemplateOrder(t *testing.T) {
	template := LandmarkTemplate(AlgorithmLandmarks, map[string]Point{
		"zzz": {}, "NOSE_TIP": {X: 1}, "LEFT_EYE": {Y: 2}, "aaa": {},
	})
	var names []string
	for _, landmark := range template.GetLandmarks() {
		names = append(names, landmark.GetName())
	}
	if got := strings.Join(names, ","); got != "LEFT_EYE,NOSE_TIP,aaa,zzz" {
		t.Errorf("landmark order %s", got)
	}
}

// PROTOCOL.md §5: exactly SHUTTING_DOWN, TOO_MANY_CONNECTIONS, STORAGE_FULL and FLEET_UNAVAILABLE are retryable.
func TestRetryableCodes(t *testing.T) {
	for value, name := range pb.ErrorCode_name {
		code := pb.ErrorCode(value)
		want := code == CodeShuttingDown || code == CodeTooManyConnections || code == CodeStorageFull || code == CodeFleetUnavailable
		err := error(&RegistryError{Code: code})
		if got := (&RegistryError{Code: code}).Retryable(); got != want {
			t.Errorf("%s: Retryable() = %v, want %v", name, got, want)
		}
		if got := IsRetryable(fmt.Errorf("wrapped: %w", err)); got != want {
			t.Errorf("%s: IsRetryable = %v, want %v", name, got, want)
		}
	}
	if (&RegistryError{Code: 99}).Retryable() || IsRetryable(ErrConnectionClosed) {
		t.Errorf("an unknown code or a transport error reads as retryable")
	}
}

// waits records the retry policy's waits instead of sleeping them.
type waits struct {
	mu        sync.Mutex
	durations []time.Duration
}

func (w *waits) option() Option {
	return func(o *options) {
		o.sleep = func(ctx context.Context, d time.Duration) bool {
			w.mu.Lock()
			w.durations = append(w.durations, d)
			w.mu.Unlock()
			return ctx.Err() == nil
		}
	}
}

func (w *waits) get() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Duration(nil), w.durations...)
}

// checkBackoff checks that wait n lies in [c/2, c] for c = min·2^(n-1), at most max.
func checkBackoff(t *testing.T, got []time.Duration, want int, min, max time.Duration) {
	t.Helper()
	if len(got) != want {
		t.Fatalf("%d waits %v, want %d", len(got), got, want)
	}
	ceiling := min
	for i, wait := range got {
		if wait < ceiling/2 || wait > ceiling {
			t.Errorf("wait %d is %v, want %v to %v", i+1, wait, ceiling/2, ceiling)
		}
		if ceiling *= 2; ceiling > max {
			ceiling = max
		}
	}
}

// refusing answers every request with code, counting the requests (hellos apart).
func refusing(code pb.ErrorCode, count *atomic.Int32) func(net.Conn) {
	return func(conn net.Conn) {
		for {
			request, err := readRequest(conn)
			if err != nil {
				return
			}
			if hello := request.GetHello(); hello != nil {
				writeResponse(conn, &pb.Response{Id: request.GetId(), Result: &pb.Response_Hello{Hello: &pb.HelloResult{ProtocolMajor: 1, ProtocolMinor: 1}}})
				continue
			}
			count.Add(1)
			if writeResponse(conn, &pb.Response{Id: request.GetId(), Result: &pb.Response_Error{Error: &pb.Error{Code: code, Message: "refused"}}}) != nil {
				return
			}
		}
	}
}

// A request refused with a retryable code is tried MaxAttempts times in all, with growing waits,
// then the refusal is returned; a request refused with another code is not tried again.
func TestRetryPolicyRetriesRetryableCodesOnly(t *testing.T) {
	policy := RetryPolicy{MaxAttempts: 5, MinBackoff: 10 * time.Millisecond, MaxBackoff: 30 * time.Millisecond}
	for _, test := range []struct {
		code     pb.ErrorCode
		attempts int32
	}{
		{CodeStorageFull, 5},
		{CodeShuttingDown, 5},
		{CodeFleetUnavailable, 5},
		{CodeInternal, 1},
		{CodeSimilarFaceRegistered, 1},
		{CodeMalformedRequest, 1},
	} {
		t.Run(CodeName(test.code), func(t *testing.T) {
			var requests atomic.Int32
			path := fakeDaemon(t, refusing(test.code, &requests))
			var recorded waits
			client, err := Dial(testContext(t), path, WithRetry(policy), recorded.option())
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			_, err = client.Register(testContext(t), &pb.RegisterRequest{Identifier: "alice", Face: VectorFace(AlgorithmArcFace, make([]float32, 128))})
			if !HasCode(err, test.code) {
				t.Fatalf("Register: %v, want %s", err, CodeName(test.code))
			}
			if got := requests.Load(); got != test.attempts {
				t.Fatalf("the daemon saw %d requests, want %d", got, test.attempts)
			}
			checkBackoff(t, recorded.get(), int(test.attempts-1), policy.MinBackoff, policy.MaxBackoff)
			if test.code == CodeShuttingDown && client.ConnectionsOpened() != uint64(test.attempts) {
				t.Errorf("%d connections for %d SHUTTING_DOWN answers: each retry should use a new one", client.ConnectionsOpened(), test.attempts)
			}
		})
	}
}

// Without WithRetry, nothing is retried.
func TestNoRetryByDefault(t *testing.T) {
	var requests atomic.Int32
	path := fakeDaemon(t, refusing(CodeStorageFull, &requests))
	client, err := Dial(testContext(t), path)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if _, err := client.Stats(testContext(t)); !HasCode(err, CodeStorageFull) || requests.Load() != 1 {
		t.Fatalf("Stats: %v after %d requests, want STORAGE_FULL after 1", err, requests.Load())
	}
}

// SHUTTING_DOWN, then the daemon is back: the retry goes to a new connection and succeeds.
func TestRetryAfterShuttingDownSucceeds(t *testing.T) {
	var connections, requests atomic.Int32
	path := fakeDaemon(t, func(conn net.Conn) {
		first := connections.Add(1) == 1
		for {
			request, err := readRequest(conn)
			if err != nil {
				return
			}
			requests.Add(1)
			if first {
				writeResponse(conn, &pb.Response{Id: request.GetId(), Result: &pb.Response_Error{Error: &pb.Error{Code: CodeShuttingDown}}})
				io.Copy(io.Discard, conn) // reads nothing more, as the daemon does
				return
			}
			writeResponse(conn, statsResponse(request.GetId(), "back"))
		}
	})
	var recorded waits
	client, err := Dial(testContext(t), path, WithoutHello(), WithRetry(RetryPolicy{MaxAttempts: 3, MinBackoff: time.Millisecond}), recorded.option())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	stats, err := client.Stats(testContext(t))
	if err != nil || stats.GetServerVersion() != "back" {
		t.Fatalf("Stats: %v, %v", stats, err)
	}
	if requests.Load() != 2 || client.ConnectionsOpened() != 2 || len(recorded.get()) != 1 {
		t.Fatalf("%d requests, %d connections, %d waits; want 2, 2, 1", requests.Load(), client.ConnectionsOpened(), len(recorded.get()))
	}
}

// TOO_MANY_CONNECTIONS twice, then room: Dial with a retry policy gets through on the third
// connection; without one it fails at once.
func TestDialRetriesTooManyConnections(t *testing.T) {
	var connections atomic.Int32
	path := fakeDaemon(t, func(conn net.Conn) {
		if connections.Add(1)%3 != 0 {
			writeResponse(conn, &pb.Response{Id: 0, Result: &pb.Response_Error{Error: &pb.Error{Code: CodeTooManyConnections}}})
			return
		}
		hello, err := readRequest(conn)
		if err != nil {
			return
		}
		writeResponse(conn, &pb.Response{Id: hello.GetId(), Result: &pb.Response_Hello{Hello: &pb.HelloResult{ProtocolMajor: 1, ProtocolMinor: 1, ServerVersion: "roomy"}}})
		echoStats(conn)
	})
	var recorded waits
	client, err := Dial(testContext(t), path, WithRetry(RetryPolicy{MaxAttempts: 3, MinBackoff: time.Millisecond}), recorded.option())
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	defer client.Close()
	if client.Server().GetServerVersion() != "roomy" || client.ConnectionsOpened() != 3 || len(recorded.get()) != 2 {
		t.Fatalf("server %v, %d connections, %d waits; want roomy, 3, 2", client.Server(), client.ConnectionsOpened(), len(recorded.get()))
	}
	if _, err := Dial(testContext(t), path); !HasCode(err, CodeTooManyConnections) {
		t.Fatalf("Dial without retry: %v, want TOO_MANY_CONNECTIONS", err)
	}
}

// No socket: a dial error the policy retries (the daemon may be restarting), MaxAttempts times; a
// socket that appears in time is reached.
func TestRetryPolicyRetriesDialFailures(t *testing.T) {
	path := filepath.Join(t.TempDir(), "later.sock")
	var recorded waits
	_, err := Dial(testContext(t), path, WithRetry(RetryPolicy{MaxAttempts: 4, MinBackoff: time.Millisecond}), recorded.option())
	var transportError *TransportError
	if !errors.As(err, &transportError) || transportError.Op != "dial" || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Dial: %v, want a dial error", err)
	}
	checkBackoff(t, recorded.get(), 3, time.Millisecond, DefaultMaxBackoff)

	listening := make(chan net.Listener, 1)
	go func() {
		time.Sleep(150 * time.Millisecond)
		listener, err := net.Listen("unix", path)
		if err != nil {
			t.Error(err)
			close(listening)
			return
		}
		listening <- listener
		if conn, err := listener.Accept(); err == nil {
			defer conn.Close()
			echoStats(conn)
		}
	}()
	client, err := Dial(testContext(t), path, WithoutHello(), WithRetry(RetryPolicy{MaxAttempts: 100, MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}))
	if err != nil {
		t.Fatalf("Dial while the socket appears: %v", err)
	}
	if _, err := client.Stats(testContext(t)); err != nil {
		t.Fatal(err)
	}
	client.Close()
	if listener, ok := <-listening; ok {
		listener.Close()
	}
}

// The context bounds the retries: no wait runs past its deadline or its cancellation, and the call
// returns the last attempt's error.
func TestRetryPolicyHonoursTheContext(t *testing.T) {
	var requests atomic.Int32
	path := fakeDaemon(t, refusing(CodeStorageFull, &requests))
	client, err := Dial(testContext(t), path, WithoutHello(), WithRetry(RetryPolicy{MaxAttempts: 10, MinBackoff: 10 * time.Second, MaxBackoff: 10 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	// A wait of 5 to 10 s would pass the deadline: no wait at all.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := client.Stats(ctx); !HasCode(err, CodeStorageFull) {
		t.Fatalf("Stats with a deadline: %v, want STORAGE_FULL", err)
	}
	if elapsed := time.Since(start); elapsed > time.Second || requests.Load() != 1 {
		t.Fatalf("%v and %d requests before giving up; want at once, 1", elapsed, requests.Load())
	}

	// No deadline: the wait ends when the context is cancelled.
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start = time.Now()
	if _, err := client.Stats(ctx); !HasCode(err, CodeStorageFull) {
		t.Fatalf("Stats cancelled while waiting: %v, want STORAGE_FULL", err)
	}
	if elapsed := time.Since(start); elapsed > 3*time.Second || requests.Load() != 2 {
		t.Fatalf("%v and %d requests in all; want about 200 ms, 2", elapsed, requests.Load())
	}
}
