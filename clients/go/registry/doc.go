// Package registry is a client of registryd, the face template registry daemon: it speaks the
// length-prefixed protobuf protocol of PROTOCOL.md over the daemon's Unix socket.
//
// A [Client] holds one connection at a time. Its methods may be called from any number of goroutines
// at once: the requests are pipelined on the connection (each gets its own request id, responses come
// back in request order and are matched to their callers by a reader goroutine). When the daemon
// closes the connection (its idle timeout, a restart), the next call opens a new one; a request is
// sent again on a new connection only when it provably never reached the daemon. Every method takes a
// [context.Context]; its deadline or cancellation ends the wait (see [Client.Send] for what that means
// for a request already written).
//
//	client, err := registry.Dial(ctx, "", registry.WithClientName("door-kiosk/2.1"))
//	if err != nil { … }
//	defer client.Close()
//	result, err := client.Identify(ctx, &registrypb.IdentifyRequest{
//		Face: registry.VectorFace(registry.AlgorithmArcFace, vector),
//	})
//
// The methods take the operation's request message from package registrypb (generated from
// proto/registry.proto) and return its result message. Zero fields mean the protocol's defaults: an
// empty gallery is "default", IdentifyRequest.Safe and AutoEnrol are on unless set to Bool(false),
// a zero limit is the operation's default. A nil request is an empty one.
//
// Errors come in two kinds. When the daemon answers with an error, the method returns a
// *[RegistryError] with the code and the structured details of PROTOCOL.md §5 (use errors.As, or the
// predicates such as [IsSimilarFaceRegistered]). When it does not answer, the error is a
// *[TransportError] (dial, write, read or a protocol violation; errors.Is with [ErrConnectionClosed],
// [ErrClientClosed] or [ErrProtocol] tells which), a [context.Context] error, or a *[VersionError]
// when the daemon speaks another major protocol version.
//
// Templates are biometric data: no error this package returns has template values in its message.
package registry
