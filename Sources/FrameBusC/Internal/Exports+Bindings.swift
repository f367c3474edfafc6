import CFrameBusABI
import FrameBus

// Functions for bindings whose every foreign call costs (Python's ctypes: a call, its argument conversions and a
// hand-off of the interpreter's lock each time): each does in one call what a pair of calls does, for the paths
// taken once per frame. include/framebus.h documents each.

// MARK: One call per frame (bindings)

/// `fb_subscriber_next_event_info`: `fb_subscriber_next_event`, and for a frame event its `fb_frame_get_info` in
/// the same call, for bindings whose every foreign call costs (Python's ctypes: a call, its argument conversions
/// and a hand-off of the interpreter's lock each time).
@_cdecl("fb_subscriber_next_event_info")
public func fbSubscriberNextEventInfo(
    _ subscriber: OpaquePointer?,
    _ timeoutNanoseconds: Int64,
    _ event: UnsafeMutablePointer<fb_event>?,
    _ info: UnsafeMutablePointer<fb_frame_info>?,
    _ error: UnsafeMutablePointer<fb_error>?
) -> fb_status {
    unsafe boundary(error) { () throws(ABIError) in
        let function = "fb_subscriber_next_event_info"
        guard let subscriber = unsafe subscriber else { throw .null("subscriber", in: function) }
        guard let event = unsafe event else { throw .null("event", in: function) }
        guard let info = unsafe info else { throw .null("info", in: function) }
        unsafe event.pointee = fb_event()
        let handle = unsafe Handle.borrow(subscriber, as: SubscriberHandle.self)
        let next = try handle.nextEvent(timeoutNanoseconds: timeoutNanoseconds).get()
        let made = try unsafe makeEvent(next, status: { handle.subscriber.publisherStatus })
        // The description the frame computed once when it was made (fb_frame_get_info's), copied before the
        // caller owns the frame: nothing else can have released it yet.
        if unsafe made.type == UInt32(FB_EVENT_FRAME.rawValue), let frame = unsafe made.frame {
            unsafe info.pointee = Handle.borrow(frame, as: FrameHandle.self).info
        }
        unsafe event.pointee = made
    }
}

// MARK: One call per buffer (bindings)

/// `fb_publisher_acquire_buffer_info`: `fb_publisher_acquire_buffer_timeout` and `fb_buffer_get_info` of the
/// buffer in one call, for bindings whose every foreign call costs (Python's ctypes).
@_cdecl("fb_publisher_acquire_buffer_info")
public func fbPublisherAcquireBufferInfo(
    _ publisher: OpaquePointer?,
    _ timeoutNanoseconds: Int64,
    _ outBuffer: UnsafeMutablePointer<OpaquePointer?>?,
    _ info: UnsafeMutablePointer<fb_buffer_info>?,
    _ error: UnsafeMutablePointer<fb_error>?
) -> fb_status {
    unsafe boundary(error) { () throws(ABIError) in
        let function = "fb_publisher_acquire_buffer_info"
        guard let publisher = unsafe publisher else { throw .null("publisher", in: function) }
        guard let outBuffer = unsafe outBuffer else { throw .null("out_buffer", in: function) }
        guard let info = unsafe info else { throw .null("info", in: function) }
        let handle = unsafe Handle.borrow(publisher, as: PublisherHandle.self)
        let buffer = try handle.acquire(timeoutNanoseconds: timeoutNanoseconds).get()
        let acquired = try BufferHandle(publisher: handle.publisher, buffer: buffer)
        unsafe info.pointee = acquired.info
        unsafe outBuffer.pointee = Handle.make(acquired)
    }
}
