import PixelBuffers
import SampleBuffers
import SurfaceCompression
import Surfaces

// The four states of a subscriber's connection (idle, awaiting WELCOME, active, closed), and what the machine keeps
// while it is subscribed.

extension SubscriberStateMachine {
    package enum State {
        /// Not connected.
        case idle
        /// HELLO sent, waiting for WELCOME or ERROR.
        case awaitingWelcome
        /// Subscribed.
        case active(Active)
        /// The connection ended; ``connected()`` starts the next one.
        case closed
    }

    package struct Active {
        var session: Subscriber.Session
        /// Most surfaces announced at once: WELCOME's `maximumAnnouncedSurfaces`, never more than our own limit.
        var maximumSurfaces: Int
        var surfaces: [UInt64: SurfaceRecord] = [:]
        var lastSequence: UInt64?
        var lastGeometry: SurfaceRecord?
        var pendingDiscontinuity: DiscontinuityFlags
    }

    /// What the machine remembers of an announced surface.
    package struct SurfaceRecord: Hashable, Sendable {
        /// Bytes of all its descriptors together (saturating), the most a FRAME's `bytesUsed` may say.
        var byteCount: UInt64
        var pixelFormat: UInt32
        var width: UInt32
        var height: UInt32
    }
}
