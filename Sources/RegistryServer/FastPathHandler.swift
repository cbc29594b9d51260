import Glibc
import NIOCore
import RegistryEngine
import RegistryModel
import RegistryProtocol

/// What reaches a connection's async reader: a frame it must start itself, or a request the event
/// loop already decoded and checked (with the size of its frame, charged to the connection's account
/// until its reply is written).
enum InboundRequest: Sendable {
    case frame(ByteBuffer)
    case pending(RequestDispatcher.Pending, frameBytes: Int)

    var frameBytes: Int {
        switch self {
        case .frame(let frame): frame.readableBytes
        case .pending(_, let bytes): bytes
        }
    }
}

/// Splits the connection's bytes into frames, answers on the event loop the requests that need no
/// waiting — authentications that write nothing, and refusals — and passes everything else on to
/// the connection's async reader.
///
/// It splits the frames itself (with ``FrameDecoder/nextFrame(_:)``) rather than behind a
/// `ByteToMessageHandler`: one handler less for every request to pass. A frame announcing more than
/// the maximum reaches the reader as ``FrameTooLargeError`` after the frames before it, and nothing
/// after it is read; a partial frame left when the input ends is dropped (no whole request to answer).
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
    private let account: ConnectionAccount
    private let decoder: FrameDecoder
    /// The start of a frame whose end has not arrived yet.
    private var partial: ByteBuffer?
    /// A frame was too large: nothing more is read as frames.
    private var broken = false
    private var peer: Peer?
    /// False until the peer's credentials are read; requests meanwhile go the async way.
    private var peerKnown = false
    /// Requests passed on whose reply has not been written yet.
    private var unanswered = 0
    private var closing = false
    /// Whether this read burst passed a request on to the async reader (which then needs the
    /// read-complete event to take it).
    private var passedOn = false

    init(dispatcher: RequestDispatcher, account: ConnectionAccount, maximumFrameBytes: Int) {
        self.dispatcher = dispatcher
        self.account = account
        self.decoder = FrameDecoder(maximumFrameLength: maximumFrameBytes)
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
        guard !self.broken else { return }
        var bytes = self.unwrapInboundIn(data)
        if var partial = self.partial {
            self.partial = nil
            partial.writeBuffer(&bytes)
            bytes = partial
        }
        do {
            while let frame = try self.decoder.nextFrame(&bytes) {
                self.handle(frame, context: context)
            }
        } catch {
            self.broken = true
            context.fireErrorCaught(error)
            return
        }
        if bytes.readableBytes > 0 { self.partial = bytes }
    }

    private func handle(_ frame: ByteBuffer, context: ChannelHandlerContext) {
        // After a reply that closes the connection nothing more is run or answered.
        guard !self.closing else { return }
        // Held until the reply is written (the connection's writer releases it); a reply given here
        // is handed to the channel at once, whose write buffer bounds it.
        self.account.charge(frame.readableBytes)
        guard self.peerKnown && self.unanswered == 0 else {
            self.unanswered += 1
            self.passedOn = true
            context.fireChannelRead(self.wrapInboundOut(.frame(frame)))
            return
        }
        let start = self.dispatcher.begin(frame, from: self.peer)
        if case .reply = start { self.account.release(frame.readableBytes) }
        switch start {
        case .reply(let reply):
            if reply.closeConnection {
                self.closing = true
                context.writeAndFlush(self.wrapOutboundOut(reply.framed)).whenComplete { _ in context.close(promise: nil) }
            } else {
                // Flushed at the end of the read burst, so pipelined requests share a write.
                context.write(self.wrapOutboundOut(reply.framed), promise: nil)
            }
        case .pending(let pending):
            self.unanswered += 1
            self.passedOn = true
            context.fireChannelRead(self.wrapInboundOut(.pending(pending, frameBytes: frame.readableBytes)))
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.flush()
        // A burst answered here entirely gives the async reader nothing to take: skipping the event
        // saves its handler's work on every fast-path request.
        if self.passedOn {
            self.passedOn = false
            context.fireChannelReadComplete()
        }
    }

    /// A reply from the async side: one fewer request outstanding.
    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if self.unanswered > 0 { self.unanswered -= 1 }
        context.write(data, promise: promise)
    }
}

@available(*, unavailable)
extension FastPathHandler: Sendable {}
