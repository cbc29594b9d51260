import Glibc
import NIOCore
import RegistryCore

/// What reaches a connection's async reader: a frame it must start itself, or a request the event
/// loop already decoded and checked.
enum InboundRequest: Sendable {
    case frame(ByteBuffer)
    case pending(RequestDispatcher.Pending)
}

/// Answers on the event loop the requests that need no waiting — authentications that write
/// nothing, and refusals — and passes everything else on to the connection's async reader.
///
/// Most traffic is authentication: a few dot products under a read lock, microseconds of work.
/// Answering it here saves two task switches per request. Requests that scan a gallery or write
/// (identify, register, admin) still run off the event loops. Replies stay in request order: a
/// request is answered here only when nothing passed on earlier is still unanswered.
final class FastPathHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = InboundRequest
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let dispatcher: RequestDispatcher
    private var peer: Peer?
    /// False until the peer's credentials are read; requests meanwhile go the async way.
    private var peerKnown = false
    /// Requests passed on whose reply has not been written yet.
    private var unanswered = 0
    private var closing = false

    init(dispatcher: RequestDispatcher) {
        self.dispatcher = dispatcher
    }

    func channelActive(context: ChannelHandlerContext) {
        if let provider = context.channel as? any SocketOptionProvider {
            // On the event loop this completes at once.
            provider.unsafeGetSocketOption(level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED))
                .whenComplete { (result: Result<PeerCredentials, any Error>) in
                    self.peer = (try? result.get()).map(Peer.init(credentials:))
                    self.peerKnown = true
                }
        }
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = self.unwrapInboundIn(data)
        guard !self.closing else { return }
        guard self.peerKnown && self.unanswered == 0 else {
            self.unanswered += 1
            context.fireChannelRead(self.wrapInboundOut(.frame(frame)))
            return
        }
        switch self.dispatcher.begin(frame, from: self.peer) {
        case .reply(let reply):
            if reply.closeConnection {
                self.closing = true
                context.writeAndFlush(self.wrapOutboundOut(reply.frame)).whenComplete { _ in context.close(promise: nil) }
            } else {
                // Flushed at the end of the read burst, so pipelined requests share a write.
                context.write(self.wrapOutboundOut(reply.frame), promise: nil)
            }
        case .pending(let pending):
            self.unanswered += 1
            context.fireChannelRead(self.wrapInboundOut(.pending(pending)))
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.flush()
        context.fireChannelReadComplete()
    }

    /// A reply from the async side: one fewer request outstanding.
    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if self.unanswered > 0 { self.unanswered -= 1 }
        context.write(data, promise: promise)
    }
}

@available(*, unavailable)
extension FastPathHandler: Sendable {}
