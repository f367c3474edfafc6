/*
 * framebus.h: the C ABI of FrameBus (libframebus).
 *
 * FrameBus moves video frames between processes without copying them: a publisher writes frames into
 * shared-memory surfaces (sealed memfds) taken from a pool, and subscribers in other processes map the same
 * memory read-only. Each pixel format also has a lossless compressed variant that only the codec reads.
 * The wire protocol is docs/PROTOCOL.md; this header is the contract of the C library that wraps the Swift
 * implementation. docs/C-ABI.md shows how to build the library and link a program.
 *
 * Conventions (they hold for every function below unless its comment says otherwise):
 *
 * - Handles are opaque pointers: fb_subscriber, fb_frame, fb_publisher, fb_buffer, fb_codec. Each is created
 *   by exactly one function and freed by exactly one function, named in its comment. Passing NULL where a
 *   handle is required returns FB_ERROR_INVALID_ARGUMENT (functions returning a value return 0/NULL); passing
 *   a freed or foreign pointer is undefined behaviour, as everywhere in C.
 * - Fallible functions return an fb_status (FB_OK is 0) and take a last parameter `fb_error *error`, which
 *   may be NULL. On failure, when it is not NULL, it receives the code again, the errno of a failed system
 *   call (0 if none) and a NUL-terminated, human-readable message. On success it is left untouched.
 *   No function aborts the process, raises a signal or leaves a Swift error or exception escaping into C,
 *   whatever arguments C passes (NULL pointers, zero or huge sizes, unknown codes): bad arguments return
 *   FB_ERROR_INVALID_ARGUMENT. Memory the caller passes must be valid for the sizes the caller states.
 * - Output parameters are written only on FB_OK, unless stated otherwise.
 * - Pixel formats are FourCC codes (FB_FORMAT_*), as CoreVideo spells them; the first character is the most
 *   significant byte.
 * - Times are fb_time values (CMTime: value / timescale seconds, with flags); helper fields give nanoseconds.
 *   Capture times are CLOCK_MONOTONIC unless the producer says otherwise.
 * - Thread safety is stated per function as one of:
 *     "thread-safe":            may be called from any thread, concurrently with any other call on the same
 *                               handle (except its destroy/release function).
 *     "one thread at a time":   calls on one handle must not overlap; different handles are independent, and
 *                               the handle may move between threads.
 *     "any thread":             the function may be called from any thread (for example a release callback
 *                               of another library), but not concurrently with another call on the same
 *                               handle.
 *   Destroy/release functions must not run concurrently with any other call on the same handle.
 * - The library starts no work at load time. It creates threads of its own (a subscriber's connection
 *   thread, a publisher's accept thread, Swift's concurrency pool, codec workers); callbacks into C run only
 *   where a function says so (fb_codec_decode_rows), on the calling thread.
 */
#ifndef FRAMEBUS_H
#define FRAMEBUS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Nullability annotations for clang (and Swift's importer); nothing for other compilers. */
#if defined(__clang__)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wnullability-extension"
#define FB_NONNULL _Nonnull
#define FB_NULLABLE _Nullable
#else
#define FB_NONNULL
#define FB_NULLABLE
#endif

/* ------------------------------------------------------------------------------------------------------------ */
/* Version                                                                                                      */
/* ------------------------------------------------------------------------------------------------------------ */

/** The ABI version this header describes. Incremented when a struct or signature changes incompatibly. Structs
 *  change only by appending fields (never by reordering or resizing one), but a struct the caller allocates and
 *  the library reads or fills grows with them, so appending to one is incompatible too: a program built against
 *  an older header must be rebuilt. Version 2 appended fb_subscriber_options.accepts_dma_buf. A compatible change
 *  (a function added, a reserved field given a meaning that reads 0 from older libraries, as
 *  fb_session.granted_queue_depth in library 0.3.0) keeps it and raises the library's minor version instead
 *  (libframebus.so.0.MINOR.0, the Version of framebus.pc). */
#define FB_ABI_VERSION 2

/** The ABI version of the loaded library; compare with FB_ABI_VERSION. Thread-safe. */
uint32_t fb_abi_version(void);

/* ------------------------------------------------------------------------------------------------------------ */
/* Errors                                                                                                       */
/* ------------------------------------------------------------------------------------------------------------ */

/** A result code: FB_OK or one of the FB_ERROR_* values. New codes may be added; treat unknown ones as errors. */
typedef int32_t fb_status;

#define FB_OK 0
/** An argument is NULL, out of range, or inconsistent (a size that does not fit a format, an unknown code). */
#define FB_ERROR_INVALID_ARGUMENT 1
/** A system call failed; fb_error.system_errno holds errno. */
#define FB_ERROR_SYSTEM_CALL 2
/** A live publisher already listens at the path. */
#define FB_ERROR_ADDRESS_IN_USE 3
/** The peer's user id is not allowed (SO_PEERCRED), or a file permission refused access. */
#define FB_ERROR_PERMISSION_DENIED 4
/** The publisher refused the subscription (no common format, too many subscribers, version mismatch). */
#define FB_ERROR_REFUSED 5
/** The peer broke the protocol; the connection was closed. */
#define FB_ERROR_PROTOCOL_VIOLATION 6
/** The publisher stopped or died. */
#define FB_ERROR_END_OF_STREAM 7
/** The time limit passed: no event within the timeout of fb_subscriber_next_event, or (as an end reason) no
 *  publisher answered within the connect timeout. */
#define FB_ERROR_TIMED_OUT 8
/** A surface the publisher sent was refused (not sealed, too small, bad layout). */
#define FB_ERROR_SURFACE_REJECTED 9
/** The handle's stream is over: the subscriber's events are exhausted, or the publisher was stopped. */
#define FB_ERROR_CLOSED 10
/** The publisher's pool is exhausted because subscribers hold its buffers; the frame was counted as dropped
 *  (outOfBuffers) and every subscriber was told. */
#define FB_ERROR_OUT_OF_BUFFERS 11
/** Memory or another resource could not be obtained (a surface could not be made). */
#define FB_ERROR_RESOURCE 12
/** Another call is already consuming this subscriber's events. */
#define FB_ERROR_BUSY 13
/** fb_subscriber_interrupt() was called; see there. */
#define FB_ERROR_INTERRUPTED 14
/** The pixel format is unknown, or not the one this operation needs (for example a compressed format where a
 *  base format is needed). */
#define FB_ERROR_FORMAT_MISMATCH 15
/** Compressed data is damaged: truncated, bad magic, bad header or table, checksum mismatch, corrupt payload. */
#define FB_ERROR_CORRUPT_DATA 16
/** Compressed data of a layout version this library does not decode. */
#define FB_ERROR_UNSUPPORTED_VERSION 17
/** A caller's buffer is too small (its capacity is reported in the message). */
#define FB_ERROR_BUFFER_TOO_SMALL 18
/** A callback passed to the library asked to stop. */
#define FB_ERROR_CANCELLED 19
/** A bug in the library; the message says where. */
#define FB_ERROR_INTERNAL 20

/** Size of fb_error.message, including the terminating NUL. */
#define FB_ERROR_MESSAGE_CAPACITY 256

/** Details of a failure. Caller-allocated (on the stack is fine); the library only writes into it. */
typedef struct fb_error {
    /** The same code the function returned. */
    fb_status code;
    /** errno of the failed system call, or 0. */
    int32_t system_errno;
    /** What failed, NUL-terminated, truncated to fit. */
    char message[FB_ERROR_MESSAGE_CAPACITY];
} fb_error;

/** A static, NUL-terminated name for a status ("FB_OK", "FB_ERROR_TIMED_OUT", ...; "unknown" for others).
 *  Never NULL; never free it. Thread-safe. */
const char *FB_NONNULL fb_status_name(fb_status status);

/* ------------------------------------------------------------------------------------------------------------ */
/* Pixel formats, time, colour                                                                                  */
/* ------------------------------------------------------------------------------------------------------------ */

#define FB_FOURCC(a, b, c, d) \
    ((uint32_t)(uint8_t)(a) << 24 | (uint32_t)(uint8_t)(b) << 16 | (uint32_t)(uint8_t)(c) << 8 | (uint32_t)(uint8_t)(d))

/** 4:2:0 8-bit, Y plane then interleaved CbCr plane, video range (DRM NV12). */
#define FB_FORMAT_420V FB_FOURCC('4', '2', '0', 'v')
/** As FB_FORMAT_420V, full range. */
#define FB_FORMAT_420F FB_FOURCC('4', '2', '0', 'f')
/** 4:2:0 10-bit in 16-bit little-endian words, MSB-aligned, two planes, video range (DRM P010). */
#define FB_FORMAT_X420 FB_FOURCC('x', '4', '2', '0')
/** As FB_FORMAT_X420, full range. */
#define FB_FORMAT_XF20 FB_FOURCC('x', 'f', '2', '0')
/** 8-bit B, G, R, A in one plane (DRM ARGB8888). */
#define FB_FORMAT_BGRA FB_FOURCC('B', 'G', 'R', 'A')
/** The lossless compressed variants of the five formats above: opaque, read only through the codec. */
#define FB_FORMAT_COMPRESSED_420V FB_FOURCC('&', '8', 'v', '0')
#define FB_FORMAT_COMPRESSED_420F FB_FOURCC('&', '8', 'f', '0')
#define FB_FORMAT_COMPRESSED_X420 FB_FOURCC('&', 'x', 'v', '0')
#define FB_FORMAT_COMPRESSED_XF20 FB_FOURCC('&', 'x', 'f', '0')
#define FB_FORMAT_COMPRESSED_BGRA FB_FOURCC('&', 'B', 'G', 'A')

/** The most planes any format has. */
#define FB_MAX_PLANES 4

/** What a pixel format is. */
typedef struct fb_format_info {
    /** The format itself. */
    uint32_t format;
    /** The base format (itself for a base format). */
    uint32_t base_format;
    /** The compressed variant (itself for a compressed format). */
    uint32_t compressed_format;
    /** The DRM fourcc of the base format (NV12, P010, AR24), little-endian as drm_fourcc.h defines it. */
    uint32_t drm_fourcc;
    /** CPU-visible planes: 0 for a compressed format, else 1 or 2. */
    uint32_t plane_count;
    /** Bits per sample: 8 or 10. */
    uint32_t bit_depth;
    /** 1 for a full-range format (and BGRA), 0 for video range. */
    uint32_t is_full_range;
    /** 1 for a compressed format. */
    uint32_t is_compressed;
    /** Per plane (valid below the base format's plane count): horizontal and vertical subsampling (1 or 2) and
     *  bytes per element (1, 2, 4). An element of plane 1 of a 4:2:0 format is one CbCr pair. */
    uint32_t horizontal_subsampling[FB_MAX_PLANES];
    uint32_t vertical_subsampling[FB_MAX_PLANES];
    uint32_t bytes_per_element[FB_MAX_PLANES];
} fb_format_info;

/** Describes `format`. Returns FB_ERROR_FORMAT_MISMATCH for an unknown FourCC. Thread-safe. */
fb_status fb_format_get_info(uint32_t format, fb_format_info *FB_NULLABLE info, fb_error *FB_NULLABLE error);

/** fb_time.flags: the time is valid. */
#define FB_TIME_FLAG_VALID 1u
/** fb_time.flags: the value was rounded. */
#define FB_TIME_FLAG_HAS_BEEN_ROUNDED 2u
/** fb_time.flags: +infinity. */
#define FB_TIME_FLAG_POSITIVE_INFINITY 4u
/** fb_time.flags: -infinity. */
#define FB_TIME_FLAG_NEGATIVE_INFINITY 8u
/** fb_time.flags: indefinite. */
#define FB_TIME_FLAG_INDEFINITE 16u

/** A rational time, as CMTime: value / timescale seconds. Invalid when flags lacks FB_TIME_FLAG_VALID
 *  (all zero is invalid: "no time"). A valid numeric time has timescale > 0. */
typedef struct fb_time {
    int64_t value;
    int32_t timescale;
    uint32_t flags;
} fb_time;

/** A nanosecond time that is absent or not numeric. */
#define FB_TIME_NONE INT64_MIN

/** Colour attachments, as the codes of docs/PROTOCOL.md section 5.7 (0 = not present):
 *  primaries 1 BT.709, 2 EBU 3213, 3 SMPTE C, 4 BT.2020, 5 P3 D65;
 *  transfer 1 BT.709, 2 SMPTE 240M, 3 sRGB, 4 linear, 5 PQ, 6 HLG;
 *  matrix 1 BT.709, 2 BT.601, 3 SMPTE 240M, 4 BT.2020;
 *  chroma location 1 left, 2 center, 3 top-left, 4 top, 5 bottom-left, 6 bottom, 7 DV 4:2:0.
 *  Unknown codes are treated as 0. */
typedef struct fb_colorimetry {
    uint8_t primaries;
    uint8_t transfer;
    uint8_t matrix;
    uint8_t chroma_location;
} fb_colorimetry;

/** Why frames were dropped (Apple's kCMSampleBufferDroppedFrameReason_*), as on the wire. */
typedef enum fb_drop_reason {
    /** A newer frame replaced one the consumer had not taken yet. */
    FB_DROP_FRAME_WAS_LATE = 1,
    /** A pool was exhausted because frames were held (publisher's pool, or this subscriber's held-frame limit). */
    FB_DROP_OUT_OF_BUFFERS = 2,
    /** The producer lost frames upstream, restarted or was reconfigured. */
    FB_DROP_DISCONTINUITY = 3,
    /** The work the publisher does for this subscriber's format (encoding its compressed variant, or decoding) fell
     *  behind, and it shed these frames (docs/PROTOCOL.md section 5.8). Only to a subscriber created with
     *  FB_SUBSCRIBER_SYSTEM_PRESSURE (any other gets FB_DROP_OUT_OF_BUFFERS for the same frames). Library 0.7.0. */
    FB_DROP_WORK_FELL_BEHIND = 4,
} fb_drop_reason;

/** One plane of a frame or buffer in shared memory. */
typedef struct fb_plane {
    /** The plane's first byte in this process's mapping. Read-only memory for a subscriber's frame (writing
     *  faults); writable for a publisher's buffer. */
    uint8_t *FB_NULLABLE data;
    /** The plane's byte offset inside the surface's file (the descriptor of fb_frame_dup_fd). */
    uint64_t offset;
    /** Bytes from one row to the next (the stride); at least width * bytes_per_element. */
    uint64_t bytes_per_row;
    /** Bytes of the plane: bytes_per_row * height. */
    uint64_t byte_count;
    /** Width in elements and height in rows of this plane (a 4:2:0 chroma plane is half the image size). */
    uint32_t width;
    uint32_t height;
    /** Bytes per element: 1 (Y of 420v), 2 (CbCr of 420v, Y of x420), 4 (CbCr of x420, BGRA). A 16-bit sample
     *  of x420/xf20 is little-endian, its 10 bits in the high bits (P010); BGRA's bytes are B, G, R, A in order. */
    uint32_t bytes_per_element;
    uint32_t reserved;
} fb_plane;

/* ------------------------------------------------------------------------------------------------------------ */
/* Subscriber                                                                                                   */
/* ------------------------------------------------------------------------------------------------------------ */

/** A subscription to one publisher. Created by fb_subscriber_create, freed by fb_subscriber_destroy. */
typedef struct fb_subscriber fb_subscriber;
/** A received frame, held (its surface pinned in the publisher's pool) until fb_frame_release. */
typedef struct fb_frame fb_frame;

/** How to subscribe. Fill with fb_subscriber_options_init, then set what you need. */
typedef struct fb_subscriber_options {
    /** The publisher's socket path (NUL-terminated, at most 107 bytes). Required. Copied. */
    const char *FB_NULLABLE path;
    /** Accepted formats, in order of preference: 1 to 16 FourCCs. Required. Copied. */
    const uint32_t *FB_NULLABLE accepted_formats;
    size_t accepted_format_count;
    /** 0 (default): latest-only delivery: at most one frame waits, a newer one replaces it and the replaced
     *  one is reported as a FB_DROP_FRAME_WAS_LATE drop. 1 to 64: a queue of that many frames. */
    uint32_t queue_depth;
    /** Keep reconnecting (every reconnect_interval_ns) after the stream ends, until destroyed (1), or end
     *  for good after the first connection (0, default). */
    uint32_t reconnects;
    /** How long the first connection waits for a publisher to appear and answer; then the stream ends with
     *  FB_ERROR_TIMED_OUT. Default 5 s. With reconnects it bounds each handshake only. Must be > 0. */
    int64_t connect_timeout_ns;
    /** Pause between connection attempts. Default 100 ms. Must be > 0. */
    int64_t reconnect_interval_ns;
    /** 1 (default): DMA-BUF surfaces are accepted (the HELLO's acceptsDMABuf, docs/PROTOCOL.md section 5.1).
     *  0: only sealed memfds, for a consumer that must not receive memory another process can write through its
     *  own descriptor (a sandboxed one, say): the publisher then sends no DMA-BUF frame to this subscriber
     *  (FB_EVENT_DROP with FB_DROP_OUT_OF_BUFFERS instead), and a DMA-BUF surface announced anyway ends the stream
     *  (FB_ERROR_PROTOCOL_VIOLATION). Added in ABI version 2. */
    uint32_t accepts_dma_buf;
    /** 0 (default): threads that wait in fb_subscriber_next_event keep their scheduler slice. 1 to 100000: each thread
     *  that waits there asks the kernel for a slice of that many microseconds (sched_setattr with sched_runtime, the
     *  EEVDF slice of Linux 6.12 and later; older kernels ignore it), once per thread; it stays set after the call
     *  returns. While a thread waits it reads the frames itself (one wake-up per frame: docs/C-ABI.md, "Waiting for
     *  events"), and a short slice lets that wake-up preempt the publisher on a busy CPU at once. 100 is a good value
     *  for a thread that does little per frame (the library's own connection thread asks for 100 while it delivers).
     *  Was reserved (0) before library 0.5.0, which an older library leaves unread. */
    uint32_t wait_slice_us;
} fb_subscriber_options;

/** Sets defaults: no path, no formats, latest-only, no reconnects, 5 s connect timeout, 100 ms interval,
 *  DMA-BUF surfaces accepted. Call it before setting fields: fields appended in later ABI versions get their
 *  defaults from it. Thread-safe. Does nothing for NULL. */
void fb_subscriber_options_init(fb_subscriber_options *FB_NULLABLE options);

/**
 * Starts subscribing and returns at once: the subscriber connects (waiting for the publisher to appear, up to
 * connect_timeout_ns) on its own thread. Whether it succeeds arrives as events (FB_EVENT_CONNECTED, or
 * FB_EVENT_END with the reason).
 *
 * Ownership: on FB_OK, *out_subscriber is yours; free it with fb_subscriber_destroy. `options` and what it
 * points to are copied and may be freed after the call.
 * Errors: FB_ERROR_INVALID_ARGUMENT (no path, no or too many formats, an unknown format, a queue depth over 64,
 * a non-positive timeout), FB_ERROR_SYSTEM_CALL.
 * Thread-safe.
 */
fb_status fb_subscriber_create(
    const fb_subscriber_options *FB_NULLABLE options,
    fb_subscriber *FB_NULLABLE *FB_NULLABLE out_subscriber,
    fb_error *FB_NULLABLE error
);

/** fb_subscriber_create_with_flags: subscribe deferred (the HELLO's deferred flag, docs/PROTOCOL.md section 5.1.1):
 *  the publisher connects us at once (FB_EVENT_CONNECTED) but sends frames only from its deferred start on, once its
 *  subscribers that are not deferred have their first frame or its producer says so. For consumers that can start
 *  late (recorders, analysis, compressed consumers), so that a preview's first frame does not wait for them. */
#define FB_SUBSCRIBER_DEFERRED 1u

/** fb_subscriber_create_with_flags: receive the publisher's system pressure (the HELLO's wantsStatus, docs/PROTOCOL.md
 *  section 5.13) as FB_EVENT_SYSTEM_PRESSURE events: the first right after FB_EVENT_CONNECTED, then one whenever the
 *  publisher's pressure level or factors change. With it, frames the publisher's encoder shed for this subscriber are
 *  reported as FB_DROP_WORK_FELL_BEHIND (without it, FB_DROP_OUT_OF_BUFFERS).
 *
 *  Why a flag: fb_event is allocated by the caller with the size of the header it was built with, so it cannot grow
 *  without breaking programs built before. The pressure event instead shares the storage of fb_event.drop (a union:
 *  the struct's size and layout are unchanged), and only a subscriber created with this flag ever gets the new event
 *  type, so a program built before it, which would not know FB_EVENT_SYSTEM_PRESSURE, never sees one. A library older
 *  than 0.7.0 refuses the flag with FB_ERROR_INVALID_ARGUMENT: create the subscriber again without it there.
 *  Library 0.7.0. */
#define FB_SUBSCRIBER_SYSTEM_PRESSURE 2u

/**
 * fb_subscriber_create, with flags: 0, or FB_SUBSCRIBER_DEFERRED and FB_SUBSCRIBER_SYSTEM_PRESSURE in any
 * combination. Other bits are FB_ERROR_INVALID_ARGUMENT.
 * Added in library 0.6.0 (a compatible addition: FB_ABI_VERSION stays 2); FB_SUBSCRIBER_SYSTEM_PRESSURE in 0.7.0.
 */
fb_status fb_subscriber_create_with_flags(
    const fb_subscriber_options *FB_NULLABLE options,
    uint32_t flags,
    fb_subscriber *FB_NULLABLE *FB_NULLABLE out_subscriber,
    fb_error *FB_NULLABLE error
);

/** The largest frame a subscriber accepts: its own size policy (docs/PROTOCOL.md section 8.2). A publisher whose
 *  surface is wider, taller or of more pixels ends the stream (FB_EVENT_END with FB_ERROR_SURFACE_REJECTED) before
 *  anything is mapped or decoded: a compressed frame of a few KB claiming 16384 x 16384 would otherwise make a
 *  decoding consumer fill a 384 MiB image every frame. Added in library 0.6.0. */
typedef struct fb_frame_size_limit {
    /** The widest and the tallest frame accepted, in pixels: 1 to 65536 each. */
    uint32_t maximum_width;
    uint32_t maximum_height;
    /** The most pixels (width * height) a frame may have; 0: maximum_width * maximum_height. */
    uint64_t maximum_pixel_count;
} fb_frame_size_limit;

/**
 * fb_subscriber_create with a size policy of the caller's: `limit` says the largest frame accepted; NULL accepts
 * any size the protocol allows (65536 x 65536). fb_subscriber_create itself uses the default limit, 8192 x 8192 and
 * at most 8192 x 4352 pixels (8K in either orientation). FB_ERROR_INVALID_ARGUMENT for a limit outside the ranges
 * above. `flags` as fb_subscriber_create_with_flags's (0, FB_SUBSCRIBER_DEFERRED, FB_SUBSCRIBER_SYSTEM_PRESSURE):
 * the one create function with both. Otherwise exactly as fb_subscriber_create. Added in library 0.6.0.
 */
fb_status fb_subscriber_create_with_limit(
    const fb_subscriber_options *FB_NULLABLE options,
    uint32_t flags,
    const fb_frame_size_limit *FB_NULLABLE limit,
    fb_subscriber *FB_NULLABLE *FB_NULLABLE out_subscriber,
    fb_error *FB_NULLABLE error
);

/**
 * Says goodbye to the publisher, closes the connection and frees the subscriber. Frames that waited unseen are
 * released; frames you still hold (fb_frame) stay valid and must still be released with fb_frame_release
 * (their memory stays mapped until then; their release is then a no-op towards the gone publisher).
 * NULL is ignored.
 * Thread safety: must not run concurrently with any other call on this subscriber; to stop a thread blocked
 * in fb_subscriber_next_event, call fb_subscriber_interrupt, wait for that thread to return, then destroy.
 */
void fb_subscriber_destroy(fb_subscriber *FB_NULLABLE subscriber);

/** What happened to a subscription. */
typedef enum fb_event_type {
    FB_EVENT_NONE = 0,
    /** A connection's handshake succeeded; fb_event.session says what the publisher granted. */
    FB_EVENT_CONNECTED = 1,
    /** A frame arrived; fb_event.frame is yours. */
    FB_EVENT_FRAME = 2,
    /** Frames were not delivered; fb_event.drop says which and why. */
    FB_EVENT_DROP = 3,
    /** The connection ended; fb_event.end_status says why (FB_ERROR_END_OF_STREAM when the publisher stopped
     *  or died; FB_ERROR_REFUSED, FB_ERROR_PERMISSION_DENIED, FB_ERROR_TIMED_OUT, FB_ERROR_PROTOCOL_VIOLATION
     *  or FB_ERROR_SURFACE_REJECTED otherwise). Without reconnects it is the last event. */
    FB_EVENT_END = 4,
    /** The publisher's system pressure changed (the first right after each FB_EVENT_CONNECTED);
     *  fb_event.system_pressure says what it is now. Only for a subscriber created with FB_SUBSCRIBER_SYSTEM_PRESSURE.
     *  Library 0.7.0. */
    FB_EVENT_SYSTEM_PRESSURE = 5,
} fb_event_type;

/** What a publisher granted a subscriber. */
typedef struct fb_session {
    /** The format frames arrive in. */
    uint32_t format;
    /** 1 if this is a reconnection (the next frame carries a discontinuity). */
    uint32_t is_reconnect;
    /** The publisher instance; a new value after a restart. */
    uint64_t stream_id;
    /** The publisher's number for this subscriber. */
    uint64_t subscriber_id;
    /** Frames this subscriber may hold at once before the publisher drops frames for it (outOfBuffers). */
    uint32_t maximum_held_frames;
    /** The queue depth the publisher granted (WELCOME's queueDepth): 1 for latest-only; in queue mode at most
     *  the depth asked for and at most maximum_held_frames (docs/PROTOCOL.md section 7.3). This was a reserved
     *  field (0) before: the struct's size and layout are unchanged, and a library from before it fills 0 here. */
    uint32_t granted_queue_depth;
} fb_session;

/** Frames that were not delivered. */
typedef struct fb_drop {
    /** An fb_drop_reason. */
    uint32_t reason;
    uint32_t reserved;
    /** First and last sequence numbers (inclusive). The range may be huge (0...UINT64_MAX): use frame_count. */
    uint64_t first_sequence;
    uint64_t last_sequence;
    /** Frames dropped (at most the range's length; less when non-contiguous reports were merged); saturates at
     *  UINT64_MAX. */
    uint64_t frame_count;
} fb_drop;

/** fb_system_pressure.level: how hard the publisher's system is pressed (AVCaptureDevice.SystemPressureState.Level;
 *  the STATUS level of docs/PROTOCOL.md section 5.13). */
typedef enum fb_system_pressure_level {
    /** Nothing to do. */
    FB_PRESSURE_NOMINAL = 0,
    /** Somewhat elevated: no action needed, but watch it. */
    FB_PRESSURE_FAIR = 1,
    /** Elevated: lower the frame rate or the work per frame. */
    FB_PRESSURE_SERIOUS = 2,
    /** Critically elevated: lower the frame rate (and work) drastically. */
    FB_PRESSURE_CRITICAL = 3,
    /** The system is about to throttle or stop everything: stop what can be stopped. */
    FB_PRESSURE_SHUTDOWN = 4,
} fb_system_pressure_level;

/** fb_system_pressure.factors: what drives the level (bits as on the wire). */
/** Tasks wait for a CPU (PSI cpu). */
#define FB_PRESSURE_FACTOR_CPU 0x01u
/** Tasks wait for memory (PSI memory). */
#define FB_PRESSURE_FACTOR_MEMORY 0x02u
/** Tasks wait for I/O (PSI io). */
#define FB_PRESSURE_FACTOR_IO 0x04u
/** A thermal zone nears or passes its trip points. */
#define FB_PRESSURE_FACTOR_THERMAL 0x08u
/** The stream itself: the publisher's cost per frame against the frame interval, and frames it shed. */
#define FB_PRESSURE_FACTOR_BUS 0x10u

/** The publisher's system pressure, as its STATUS said it (FB_EVENT_SYSTEM_PRESSURE). 32 bytes: it shares fb_event's
 *  storage with fb_drop (library 0.7.0). */
typedef struct fb_system_pressure {
    /** An fb_system_pressure_level. */
    uint32_t level;
    /** FB_PRESSURE_FACTOR_* bits (0 at nominal); unknown bits are cleared by the library. */
    uint32_t factors;
    /** The publisher's work per frame against the frame interval (1.0 = all of it: fan-out plus conversion, over the
     *  last second), or a negative value (-1) when it has not measured one yet. */
    double cost;
    /** The duration of the frames the publisher publishes now, nanoseconds (a producer that adapts its frame rate
     *  to pressure changes it), or FB_TIME_NONE when it does not say. */
    int64_t frame_duration_ns;
    /** Frames the publisher shed for this subscriber since it connected (FB_DROP_WORK_FELL_BEHIND). */
    uint64_t frames_shed;
} fb_system_pressure;

/** One event. Only the member that fb_event.type names is meaningful; the others are zero, except that drop and
 *  system_pressure share their storage (read the one the type names). */
typedef struct fb_event {
    /** An fb_event_type. */
    uint32_t type;
    /** FB_EVENT_END: why. */
    fb_status end_status;
    /** FB_EVENT_FRAME: the frame, owned by the caller: release it exactly once with fb_frame_release. */
    fb_frame *FB_NULLABLE frame;
    /** drop and system_pressure share their storage (an anonymous C11 union; the struct's layout is that of ABI
     *  version 2 before library 0.7.0). */
    union {
        /** FB_EVENT_DROP. */
        fb_drop drop;
        /** FB_EVENT_SYSTEM_PRESSURE (library 0.7.0, only with FB_SUBSCRIBER_SYSTEM_PRESSURE). */
        fb_system_pressure system_pressure;
    };
    /** FB_EVENT_CONNECTED. */
    fb_session session;
    /** FB_EVENT_END: a message about the end, NUL-terminated. */
    char end_message[FB_ERROR_MESSAGE_CAPACITY];
} fb_event;

/**
 * Waits for the next event, for up to `timeout_ns` nanoseconds (negative: wait without limit; 0: do not wait,
 * for polling: an event already waiting is returned at once).
 *
 * Returns FB_OK with *event filled (a frame event gives you an fb_frame to release); FB_ERROR_TIMED_OUT if
 * nothing happened in time (*event is then set to FB_EVENT_NONE, and no event is lost: it comes with the next
 * call); FB_ERROR_INTERRUPTED while the subscriber is interrupted (fb_subscriber_interrupt); FB_ERROR_CLOSED
 * once every event has been delivered and no more will come (after the final FB_EVENT_END); FB_ERROR_BUSY if
 * another thread is inside this function for the same subscriber. Events arrive in order; nothing is lost
 * silently: every frame the consumer did not get is covered by a FB_EVENT_DROP.
 *
 * Events wait in the subscriber's queue until a call takes them (latest-only replacement applies there), so an
 * event that arrives just after a call timed out or was interrupted comes with the next call. While it waits, the
 * calling thread reads the stream itself (the subscriber's own thread hands its loop over and parks), so the
 * publisher's wake-up lands on the caller: one thread wake-up per frame. Between calls the subscriber's thread
 * takes the loop back after 20 ms, so a caller that stops calling costs what a slow consumer costs (latest-only
 * replacement, drops with reasons), and a caller that loops over frames keeps the loop without waking anyone. If a
 * received frame cannot be locked for reading (a DMA-BUF sync failure), that frame is released and the call
 * returns the error. The call returns within the timeout (plus scheduling delay, and up to a millisecond more when
 * the wait goes through poll: a publisher that speaks protocol version 2, a full outbox) even when the publisher is silent
 * or gone.
 * Thread safety: one thread at a time (a second concurrent caller gets FB_ERROR_BUSY).
 */
fb_status fb_subscriber_next_event(
    fb_subscriber *FB_NULLABLE subscriber,
    int64_t timeout_ns,
    fb_event *FB_NULLABLE event,
    fb_error *FB_NULLABLE error
);

/**
 * Interrupts the subscriber: a thread blocked in fb_subscriber_next_event returns FB_ERROR_INTERRUPTED at once,
 * and so does every later call, until fb_subscriber_resume. Events are kept meanwhile (nothing is lost).
 * This is GStreamer's unlock / unlock_stop. Thread-safe (this is the one call meant to run concurrently with
 * fb_subscriber_next_event). NULL is ignored.
 */
void fb_subscriber_interrupt(fb_subscriber *FB_NULLABLE subscriber);

/** Ends an interruption: fb_subscriber_next_event waits for events again. Thread-safe. NULL is ignored. */
void fb_subscriber_resume(fb_subscriber *FB_NULLABLE subscriber);

/** The current (or last) session. Returns FB_ERROR_CLOSED before the first handshake. Thread-safe. */
fb_status fb_subscriber_get_session(
    fb_subscriber *FB_NULLABLE subscriber,
    fb_session *FB_NULLABLE session,
    fb_error *FB_NULLABLE error
);

/** 1 if the current connection is up, else 0 (also for NULL). Thread-safe. */
int32_t fb_subscriber_is_connected(fb_subscriber *FB_NULLABLE subscriber);

/** A subscriber's counters since it was created. */
typedef struct fb_subscriber_statistics {
    /** Frames handed to the consumer. */
    uint64_t delivered;
    /** Frames dropped, by reason (FB_DROP_FRAME_WAS_LATE, FB_DROP_OUT_OF_BUFFERS, FB_DROP_DISCONTINUITY). */
    uint64_t dropped_frame_was_late;
    uint64_t dropped_out_of_buffers;
    uint64_t dropped_discontinuity;
    /** Frames the consumer holds now (not yet released). */
    uint64_t held_now;
    /** Frames waiting in the queue now. */
    uint64_t queue_depth;
    /** Bytes of the frames delivered (bytes used). */
    uint64_t bytes_delivered;
    /** Latency from publish to delivery, nanoseconds: samples, median, 99th, 99.9th percentile, maximum. */
    uint64_t latency_count;
    uint64_t latency_p50_ns;
    uint64_t latency_p99_ns;
    uint64_t latency_p999_ns;
    uint64_t latency_max_ns;
} fb_subscriber_statistics;

/** Fills *statistics. Thread-safe. */
fb_status fb_subscriber_get_statistics(
    fb_subscriber *FB_NULLABLE subscriber,
    fb_subscriber_statistics *FB_NULLABLE statistics,
    fb_error *FB_NULLABLE error
);

/* Frames ------------------------------------------------------------------------------------------------------ */

/** fb_frame_info.flags: frames were lost, or the stream was reconfigured, before this frame. */
#define FB_FRAME_FLAG_DISCONTINUITY 1u

/** Everything about a received frame. Pointers in it stay valid until fb_frame_release. */
typedef struct fb_frame_info {
    /** The frame's sequence number (gaps are covered by drop events). */
    uint64_t sequence;
    /** Pixel format (FourCC), width and height in pixels. */
    uint32_t format;
    uint32_t width;
    uint32_t height;
    /** CPU-visible planes: 1 or 2 for a base format, 0 for a compressed format (use compressed_data). */
    uint32_t plane_count;
    /** The planes; entries at and after plane_count are zero. */
    fb_plane planes[FB_MAX_PLANES];
    /** For a compressed format: the start of the surface (read-only) and the bytes the codec wrote there
     *  (bytes_used); pass both to fb_codec_decompress. NULL for a base format. */
    const uint8_t *FB_NULLABLE compressed_data;
    /** Bytes used: for a compressed format those of compressed_data; for a base format the sum of the planes'
     *  byte_count (row padding included). */
    uint64_t bytes_used;
    /** Size of the whole surface (its file) in bytes. */
    uint64_t allocation_size;
    /** Presentation time and duration as the publisher sent them, and the same in nanoseconds (FB_TIME_NONE
     *  when absent or not numeric). */
    fb_time presentation_time;
    fb_time duration;
    int64_t presentation_time_ns;
    int64_t duration_ns;
    /** Publisher's CLOCK_MONOTONIC nanoseconds when it sent the frame (for latency on one host), or 0. */
    uint64_t publish_time_ns;
    /** FB_FRAME_FLAG_* bits. */
    uint32_t flags;
    /** Colour attachments. */
    fb_colorimetry colorimetry;
} fb_frame_info;

/**
 * Describes a frame. The plane pointers (and compressed_data) point into the publisher's memory, mapped
 * read-only into this process (a write through them faults); they stay valid (mapped) until fb_frame_release.
 * What they point to is not guaranteed unchanged: the reference publisher does not write a surface while a
 * subscriber holds a frame of it, but that is its promise, not the kernel's. A hostile or buggy publisher can
 * rewrite the bytes at any time through its own mapping (a memfd's write seal stops new writers, not the one
 * made before it), and so can, for a DMA-BUF surface, any process holding a writable descriptor of it and any
 * device attached to it. Treat the bytes as another process's: copy what you validate before you use it to bound
 * anything. fb_codec_decompress and fb_codec_decode_rows are safe on such memory (wrong pixels or an error,
 * never an out-of-bounds access).
 * Thread-safe (the frame's description is immutable).
 */
fb_status fb_frame_get_info(
    const fb_frame *FB_NULLABLE frame,
    fb_frame_info *FB_NULLABLE info,
    fb_error *FB_NULLABLE error
);

/**
 * A new file descriptor (close-on-exec) of the frame's surface, for handing the frame to another API (GStreamer's
 * fd memory, mmap, another process); the planes sit at fb_plane.offset in it. What it allows depends on the
 * surface (fb_frame_dup_fds reports which in is_dma_buf):
 * - a memfd: a read-only reopen (O_RDONLY) of a memfd sealed against shrinking, growing and new writes
 *   (F_SEAL_FUTURE_WRITE or F_SEAL_WRITE), so neither this descriptor nor a reopen of it can map it writable;
 *   the publisher's own mapping, made before the seal, can still write it;
 * - a DMA-BUF: a duplicate of the publisher's descriptor, which keeps the access mode its exporter chose (usually
 *   read-write: you, and whoever else holds one, can then map it writable) and carries no seals; bracket CPU reads
 *   of your mapping with DMA_BUF_IOCTL_SYNC.
 * The caller owns it and closes it; it stays valid after fb_frame_release, but after release the publisher may
 * write new frames into that memory (and a hostile one may write it at any time, see fb_frame_get_info). Returns -1 on
 * failure: FB_ERROR_SYSTEM_CALL, or FB_ERROR_FORMAT_MISMATCH when the surface is held by several descriptors
 * (a memfd or DMA-BUF per plane, which publishers may send): use fb_frame_dup_fds, which handles every surface.
 * Thread-safe.
 */
int32_t fb_frame_dup_fd(const fb_frame *FB_NULLABLE frame, fb_error *FB_NULLABLE error);

/** DRM_FORMAT_MOD_LINEAR (drm_fourcc.h): plain rows, the only layout FrameBus surfaces carry. */
#define FB_DRM_FORMAT_MOD_LINEAR 0ULL

/** One plane of a frame as a file descriptor (see fb_frame_dup_fds). */
typedef struct fb_frame_plane_fd {
    /** A new descriptor (close-on-exec) that the caller owns and must close: read-only for a memfd, the
     *  exporter's access mode for a DMA-BUF. Every entry has its own, even when several planes live in one buffer
     *  (they are then descriptors of the same buffer). */
    int32_t fd;
    uint32_t reserved;
    /** The plane's first byte in fd (0 for a compressed frame, whose opaque bytes start the buffer). */
    uint64_t offset;
    /** Bytes from one row to the next (0 for a compressed frame). */
    uint64_t bytes_per_row;
    /** Bytes of fd, from offset 0, that the surface uses: what to map. */
    uint64_t size;
} fb_frame_plane_fd;

/** A frame's memory as descriptors, for importing it into another API without a copy. */
typedef struct fb_frame_fds {
    /** Entries of planes[] filled: the frame's plane count, or 1 for a compressed frame. The rest hold fd -1. */
    uint32_t count;
    /** 1 when the descriptors are DMA-BUFs: bracket CPU reads of your own mapping with DMA_BUF_IOCTL_SYNC
     *  (DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ, then DMA_BUF_SYNC_END | DMA_BUF_SYNC_READ), and expect no seals:
     *  what the descriptor allows (read-only or read-write) is the exporter's choice. 0 for sealed memfds (the
     *  descriptors are read-only reopens: a writable mapping is refused). */
    uint32_t is_dma_buf;
    /** DRM format modifier of the buffers: FB_DRM_FORMAT_MOD_LINEAR (subscribers refuse any other). */
    uint64_t modifier;
    fb_frame_plane_fd planes[FB_MAX_PLANES];
} fb_frame_fds;

/**
 * Every plane of the frame's surface as a new descriptor with its offset, stride and size, and whether the
 * buffers are DMA-BUFs with their modifier: what EGL_EXT_image_dma_buf_import, Vulkan's
 * VK_EXT_external_memory_dma_buf or GStreamer's DMA-BUF allocator take. Works for every surface: one memfd, a
 * memfd per plane, one or several DMA-BUFs, a compressed frame. On FB_OK the caller owns every
 * planes[i].fd for i < count and closes each; on failure no descriptor is left open and *fds is untouched.
 * As with fb_frame_dup_fd, the memory may be rewritten by the publisher after fb_frame_release.
 * Returns FB_ERROR_INVALID_ARGUMENT for NULL frame or fds, FB_ERROR_SYSTEM_CALL (EMFILE, ...).
 * Thread-safe.
 */
fb_status fb_frame_dup_fds(
    const fb_frame *FB_NULLABLE frame,
    fb_frame_fds *FB_NULLABLE fds,
    fb_error *FB_NULLABLE error
);

/**
 * Releases a frame: the subscriber tells the publisher it may reuse the surface, and the plane pointers become
 * invalid. Call exactly once per FB_EVENT_FRAME. NULL is ignored.
 * Thread safety: any thread (for example GStreamer's buffer free function); frames are independent of each
 * other and of their subscriber, so this may run concurrently with calls on the subscriber or on other
 * frames, and after fb_subscriber_destroy.
 */
void fb_frame_release(fb_frame *FB_NULLABLE frame);

/* ------------------------------------------------------------------------------------------------------------ */
/* Publisher                                                                                                    */
/* ------------------------------------------------------------------------------------------------------------ */

/** A publisher with its pool of buffers. Created by fb_publisher_create, freed by fb_publisher_destroy. */
typedef struct fb_publisher fb_publisher;
/** A pool buffer being filled: from fb_publisher_acquire_buffer until fb_buffer_publish or fb_buffer_discard. */
typedef struct fb_buffer fb_buffer;

/** How to publish. Fill with fb_publisher_options_init, then set what you need. */
typedef struct fb_publisher_options {
    /** The socket path (NUL-terminated, at most 107 bytes); a stale socket file there is replaced. Required. */
    const char *FB_NULLABLE path;
    /** The pool's pixel format (a base format, FB_FORMAT_420V etc.), width and height (even for 4:2:0).
     *  Required. */
    uint32_t format;
    uint32_t width;
    uint32_t height;
    /** Formats offered to subscribers, 1 to 16, or none (NULL/0: `format` and its compressed variant).
     *  A subscriber granted the compressed variant gets frames the publisher encoded once, shared by all. */
    const uint32_t *FB_NULLABLE offered_formats;
    size_t offered_format_count;
    /** Buffers made up front (default 4) and the most that may exist at once (default 18, 1 to 1024; at least
     *  minimum_buffer_count). Subscribers together may hold maximum_buffer_count - 2 of them (the producer keeps
     *  2), under the holding policy of docs/PROTOCOL.md section 7.3: a subscriber gets its queue depth +
     *  extra_held_frames_per_subscriber (at least 3 for latest-only) while that budget has them after keeping
     *  min(3, (maximum_buffer_count - 2) / maximum_subscribers) for each subscriber still to come, else what is
     *  left. The defaults give the first of 4 subscribers 5 frames and every later one at least 3; a GStreamer
     *  source whose pipeline keeps several buffers needs that many. */
    uint32_t minimum_buffer_count;
    uint32_t maximum_buffer_count;
    /** Most subscribers at once (default 4; 1 to 1024). */
    uint32_t maximum_subscribers;
    /** Frames a subscriber may hold beyond its queue depth (default 4; up to 1024). */
    uint32_t extra_held_frames_per_subscriber;
    /** Mode of the socket file (default 0600; up to 0777). */
    uint32_t socket_mode;
    /** How hard the publisher's encoder searches when it makes an offered compressed variant:
     *  FB_CODEC_EFFORT_FAST (0, the default) for live streams, FB_CODEC_EFFORT_BEST (1) when the compressed
     *  subscribers are recorders and the frame interval leaves the time (a frame that cannot start in time is shed
     *  for them either way). Other values are refused. This field was `reserved` (0) before 0.7: a library from
     *  before ignores it. */
    uint32_t compression_effort;
} fb_publisher_options;

/** Sets defaults (see each field). Thread-safe. Does nothing for NULL. */
void fb_publisher_options_init(fb_publisher_options *FB_NULLABLE options);

/**
 * Makes the pool and starts listening at options->path (a thread of the publisher accepts subscribers and reads
 * their releases).
 * Ownership: on FB_OK, *out_publisher is yours; free it with fb_publisher_destroy. `options` is copied.
 * Errors: FB_ERROR_INVALID_ARGUMENT, FB_ERROR_FORMAT_MISMATCH, FB_ERROR_ADDRESS_IN_USE (a live publisher
 * listens there), FB_ERROR_RESOURCE (the pool), FB_ERROR_SYSTEM_CALL.
 * Thread-safe.
 */
fb_status fb_publisher_create(
    const fb_publisher_options *FB_NULLABLE options,
    fb_publisher *FB_NULLABLE *FB_NULLABLE out_publisher,
    fb_error *FB_NULLABLE error
);

/**
 * Stops (every subscriber gets END_OF_STREAM; the socket file is removed) and frees the publisher. Buffers
 * still acquired stay valid: they can only be discarded (fb_buffer_publish then returns FB_ERROR_CLOSED and
 * frees them too). NULL is ignored. Must not run concurrently with any other call on this publisher.
 */
void fb_publisher_destroy(fb_publisher *FB_NULLABLE publisher);

/**
 * Takes a free buffer from the pool for the next frame, locked for writing, without waiting.
 * When every buffer is in use (subscribers hold their share of the pool, or the caller holds acquired buffers),
 * returns FB_ERROR_OUT_OF_BUFFERS. A failed acquire uses no sequence number and tells no subscriber anything:
 * wait with fb_publisher_acquire_buffer_timeout, or, if you give up on the frame, say so with
 * fb_publisher_report_drops(publisher, FB_DROP_OUT_OF_BUFFERS, 1, ...).
 * Ownership: on FB_OK, *out_buffer is yours until you pass it to fb_buffer_publish or fb_buffer_discard
 * (exactly one of them, exactly once).
 * Thread-safe.
 */
fb_status fb_publisher_acquire_buffer(
    fb_publisher *FB_NULLABLE publisher,
    fb_buffer *FB_NULLABLE *FB_NULLABLE out_buffer,
    fb_error *FB_NULLABLE error
);

/**
 * As fb_publisher_acquire_buffer, but waits up to `timeout_ns` nanoseconds (0: do not wait; negative: without
 * limit) for a buffer to become free (subscribers release frames, or the caller publishes or discards one).
 * Returns FB_ERROR_TIMED_OUT when none became free in time (nothing is reported to subscribers). To make a
 * wait interruptible (GStreamer's unlock), wait in slices of a few tens of milliseconds and check your flag.
 * The wait never blocks the library's own threads. Thread-safe.
 */
fb_status fb_publisher_acquire_buffer_timeout(
    fb_publisher *FB_NULLABLE publisher,
    int64_t timeout_ns,
    fb_buffer *FB_NULLABLE *FB_NULLABLE out_buffer,
    fb_error *FB_NULLABLE error
);

/** A buffer to fill. */
typedef struct fb_buffer_info {
    /** Pixel format, width and height of the pool. */
    uint32_t format;
    uint32_t width;
    uint32_t height;
    uint32_t plane_count;
    /** The planes, writable (data) until the buffer is published or discarded. Write only inside each plane's
     *  rows: bytes_per_row * height bytes from data. */
    fb_plane planes[FB_MAX_PLANES];
    /** Size of the whole surface in bytes. */
    uint64_t allocation_size;
} fb_buffer_info;

/** Describes a buffer; the pointers stay valid until fb_buffer_publish or fb_buffer_discard. Any thread
 *  (one thread at a time per buffer). */
fb_status fb_buffer_get_info(
    const fb_buffer *FB_NULLABLE buffer,
    fb_buffer_info *FB_NULLABLE info,
    fb_error *FB_NULLABLE error
);

/** fb_publish_info.flags: the producer lost frames or was reconfigured before this frame. */
#define FB_PUBLISH_FLAG_DISCONTINUITY 1u

/** How a frame is published. Zero-initialise it (all zero: no times, no colour attachments, no flags). */
typedef struct fb_publish_info {
    /** Presentation time (capture time on CLOCK_MONOTONIC for live sources) and duration; all zero for none.
     *  A GStreamer PTS in ns is {pts, 1000000000, FB_TIME_FLAG_VALID}. */
    fb_time presentation_time;
    fb_time duration;
    /** FB_PUBLISH_FLAG_* bits. */
    uint32_t flags;
    /** Colour attachments (codes as in fb_colorimetry; 0 leaves one unset; codes out of range are an
     *  FB_ERROR_INVALID_ARGUMENT). */
    fb_colorimetry colorimetry;
} fb_publish_info;

/**
 * Publishes the buffer to every subscriber and gives it up: the buffer handle is freed whatever the result,
 * and its memory returns to the pool once no subscriber holds it. Do not touch its planes afterwards.
 * `info` may be NULL (no times, no attachments). On FB_OK, *out_sequence (if not NULL) receives the frame's
 * sequence number.
 * Errors: FB_ERROR_CLOSED after fb_publisher_destroy, FB_ERROR_INVALID_ARGUMENT (bad times, codes or flags; the frame
 * is then not published and the buffer is discarded).
 * Thread safety: any thread; publishes of one publisher are serialised by the library.
 */
fb_status fb_buffer_publish(
    fb_buffer *FB_NULLABLE buffer,
    const fb_publish_info *FB_NULLABLE info,
    uint64_t *FB_NULLABLE out_sequence,
    fb_error *FB_NULLABLE error
);

/**
 * Gives a buffer back to the pool unpublished, and frees the handle (no sequence number is used; report the
 * lost frame with fb_publisher_report_drops if it counts as one). NULL is ignored. Any thread.
 */
void fb_buffer_discard(fb_buffer *FB_NULLABLE buffer);

/**
 * Records that `count` frames (1 to 2^32) were lost before they could be published (for example upstream drops
 * or gaps), and tells every subscriber with a drop of `reason`. For FB_DROP_DISCONTINUITY the next published
 * frame also carries the discontinuity flag. Contiguous drops of one reason reach subscribers as one range
 * (sent within 100 ms). On FB_OK the sequence numbers used go to *out_first and *out_last (each may be NULL).
 * Thread-safe.
 */
fb_status fb_publisher_report_drops(
    fb_publisher *FB_NULLABLE publisher,
    uint32_t reason,
    uint64_t count,
    uint64_t *FB_NULLABLE out_first,
    uint64_t *FB_NULLABLE out_last,
    fb_error *FB_NULLABLE error
);

/** A publisher's counters since it was created. */
typedef struct fb_publisher_statistics {
    /** Sequence numbers used: frames published plus frames dropped before fan-out. */
    uint64_t published;
    /** Frames dropped at the source, by reason. */
    uint64_t dropped_at_source_frame_was_late;
    uint64_t dropped_at_source_out_of_buffers;
    uint64_t dropped_at_source_discontinuity;
    /** Totals over every subscriber, past and present: frames delivered, dropped by reason, held now. */
    uint64_t delivered;
    uint64_t dropped_frame_was_late;
    uint64_t dropped_out_of_buffers;
    uint64_t dropped_discontinuity;
    uint64_t held_now;
    /** Subscribers connected now (handshake done). */
    uint64_t subscriber_count;
    /** Frames encoded or decoded for subscribers of another format. */
    uint64_t conversions;
} fb_publisher_statistics;

/** Fills *statistics. Thread-safe. */
fb_status fb_publisher_get_statistics(
    fb_publisher *FB_NULLABLE publisher,
    fb_publisher_statistics *FB_NULLABLE statistics,
    fb_error *FB_NULLABLE error
);

/* ------------------------------------------------------------------------------------------------------------ */
/* One call per frame, for bindings                                                                             */
/* ------------------------------------------------------------------------------------------------------------ */

/* What a pair of the calls above does, in one call: for bindings whose every foreign call costs (Python's ctypes,
 * where a call, its argument conversions and a hand-off of the interpreter's lock cost microseconds), on the paths
 * taken once per frame. Compatible additions (FB_ABI_VERSION stays 2): look them up before use to support older
 * libraries. */

/**
 * fb_subscriber_next_event and, when the event is a frame, fb_frame_get_info of that frame, in one call. Waits and
 * returns exactly as fb_subscriber_next_event (same statuses, same *event); when *event is FB_EVENT_FRAME, *info holds the frame's
 * description as fb_frame_get_info gives it (its pointers valid until fb_frame_release); for any other outcome
 * *info is left as it was. `info` may not be NULL (FB_ERROR_INVALID_ARGUMENT, nothing waited for).
 * Thread safety: as fb_subscriber_next_event.
 */
fb_status fb_subscriber_next_event_info(
    fb_subscriber *FB_NULLABLE subscriber,
    int64_t timeout_ns,
    fb_event *FB_NULLABLE event,
    fb_frame_info *FB_NULLABLE info,
    fb_error *FB_NULLABLE error
);

/**
 * fb_publisher_acquire_buffer_timeout and fb_buffer_get_info of the buffer in one call. Waits and returns as
 * fb_publisher_acquire_buffer_timeout (0: do not wait; negative: without limit); on FB_OK, *out_buffer is yours as
 * there and *info describes it as fb_buffer_get_info does; on failure neither is written. `info` may not be NULL
 * (FB_ERROR_INVALID_ARGUMENT, nothing acquired). Thread-safe.
 */
fb_status fb_publisher_acquire_buffer_info(
    fb_publisher *FB_NULLABLE publisher,
    int64_t timeout_ns,
    fb_buffer *FB_NULLABLE *FB_NULLABLE out_buffer,
    fb_buffer_info *FB_NULLABLE info,
    fb_error *FB_NULLABLE error
);

/* ------------------------------------------------------------------------------------------------------------ */
/* Codec                                                                                                        */
/* ------------------------------------------------------------------------------------------------------------ */

/** A reusable lossless codec with its workspace. Created by fb_codec_create or fb_codec_create_with_options,
 *  freed by fb_codec_destroy. */
typedef struct fb_codec fb_codec;

/** An image in the caller's memory: planes of a base format, each `bytes_per_row` apart (at least the plane's
 *  width in bytes). Plane geometry follows the format (fb_format_get_info): for 4:2:0, plane 1 has
 *  height / 2 rows of width / 2 CbCr pairs. The caller owns the memory; the library reads or writes it only
 *  during the call. */
typedef struct fb_image_plane {
    /** The plane's first byte. */
    void *FB_NULLABLE data;
    /** Bytes from one row to the next. */
    uint64_t bytes_per_row;
} fb_image_plane;

typedef struct fb_image {
    uint32_t format;
    uint32_t width;
    uint32_t height;
    uint32_t reserved;
    /** Planes 0 ..< the format's plane count; the others are ignored. */
    fb_image_plane planes[FB_MAX_PLANES];
} fb_image;

/**
 * Makes a codec with the default options: `thread_count` worker threads per call (0 uses every online processor,
 * 1 runs on the calling thread, at most 256) and the default tile size (full-width bands of 64 rows). The same as
 * fb_codec_create_with_options with fb_codec_options_init's options and this thread_count.
 * Ownership: on FB_OK, *out_codec is yours; free it with fb_codec_destroy. Thread-safe.
 */
fb_status fb_codec_create(
    uint32_t thread_count,
    fb_codec *FB_NULLABLE *FB_NULLABLE out_codec,
    fb_error *FB_NULLABLE error
);

/** How to make a codec. Fill with fb_codec_options_init, then set what you need. */
typedef struct fb_codec_options {
    /** Worker threads per call: 0 (default) uses every online processor, 1 runs on the calling thread. At most
     *  256. */
    uint32_t thread_count;
    /** The tile width in pixels the encoder writes (docs/COMPRESSED-LAYOUT.md section 4): even and at least 2,
     *  or 0 (default) for tiles as wide as the image (full-width bands). Smaller tiles give finer random access
     *  and usually a lower ratio. The decoder reads the tile size from the data, whatever this says. */
    uint32_t tile_width;
    /** The tile height in pixels: even and at least 2, or 0 (default) for 64. A tile row is the fewest rows
     *  fb_codec_decode_rows hands over at once. When both are set, tile_width x tile_height must be at most
     *  4194304 (2^22, the layout's limit), checked as given. Either is clamped to the image's width or height
     *  rounded up to even, as every FrameBus encoder does (so the bytes equal Swift's for the same tile size); a
     *  full-width tile whose clamped area is over 2^22 makes fb_codec_compress fail (FB_ERROR_INVALID_ARGUMENT). */
    uint32_t tile_height;
    /** How hard the encoder searches: FB_CODEC_EFFORT_FAST (0, the default) for live streams, FB_CODEC_EFFORT_BEST
     *  (1) for offline encoding (smaller on screen content, several times slower to encode). Both write
     *  the same layout; the decoder does not care. Other values are refused. */
    uint32_t effort;
    /** Set to 0 (fb_codec_options_init does); reserved for fields to come, refused when not 0. */
    uint32_t reserved[4];
} fb_codec_options;

/** Values of fb_codec_options.effort. */
enum {
    FB_CODEC_EFFORT_FAST = 0,
    FB_CODEC_EFFORT_BEST = 1,
};

/** Sets defaults: every online processor, full-width bands of 64 rows, effort fast, reserved fields 0. Call it before setting
 *  fields. Thread-safe. Does nothing for NULL. */
void fb_codec_options_init(fb_codec_options *FB_NULLABLE options);

/**
 * Makes a codec with `options` (NULL: the defaults of fb_codec_options_init), which are copied.
 * Ownership: on FB_OK, *out_codec is yours; free it with fb_codec_destroy.
 * Errors: FB_ERROR_INVALID_ARGUMENT (thread_count over 256; a tile width or height that is odd or 1; both set and
 * their product over 2^22; an effort other than FB_CODEC_EFFORT_FAST or FB_CODEC_EFFORT_BEST; a reserved field not 0),
 * with a message, and nothing is made.
 * Thread-safe.
 */
fb_status fb_codec_create_with_options(
    const fb_codec_options *FB_NULLABLE options,
    fb_codec *FB_NULLABLE *FB_NULLABLE out_codec,
    fb_error *FB_NULLABLE error
);

/** Frees a codec. NULL is ignored. Not concurrently with another call on it. */
void fb_codec_destroy(fb_codec *FB_NULLABLE codec);

/** The most bytes compressing a `width` x `height` image of `format` (base or compressed) can produce: the
 *  capacity to give fb_codec_compress of a codec with the default tile size (fb_codec_create). For another tile
 *  size use fb_codec_compressed_capacity: smaller tiles need more. Thread-safe. */
fb_status fb_codec_maximum_compressed_size(
    uint32_t format,
    uint32_t width,
    uint32_t height,
    uint64_t *FB_NULLABLE out_size,
    fb_error *FB_NULLABLE error
);

/** The most bytes `codec`'s fb_codec_compress can produce for a `width` x `height` image of `format` (base or
 *  compressed), with the codec's tile size: the capacity to give it. FB_ERROR_INVALID_ARGUMENT when the codec's
 *  tile size does not fit this image (a full-width tile over 2^22 pixels). Thread-safe. */
fb_status fb_codec_compressed_capacity(
    fb_codec *FB_NULLABLE codec,
    uint32_t format,
    uint32_t width,
    uint32_t height,
    uint64_t *FB_NULLABLE out_size,
    fb_error *FB_NULLABLE error
);

/**
 * Compresses `source` (a base-format image) losslessly into `destination` (`capacity` bytes; give it
 * fb_codec_compressed_capacity bytes, which is fb_codec_maximum_compressed_size for the default tile size). On
 * FB_OK *out_bytes_used receives the bytes written: the compressed image, which fb_codec_decompress turns back
 * into `source` bit for bit, with the codec's tile size in its header.
 * Errors: FB_ERROR_INVALID_ARGUMENT, FB_ERROR_FORMAT_MISMATCH, FB_ERROR_BUFFER_TOO_SMALL.
 * Thread safety: thread-safe (calls on one codec are serialised; use one codec per thread for parallelism).
 */
fb_status fb_codec_compress(
    fb_codec *FB_NULLABLE codec,
    const fb_image *FB_NULLABLE source,
    void *FB_NULLABLE destination,
    uint64_t capacity,
    uint64_t *FB_NULLABLE out_bytes_used,
    fb_error *FB_NULLABLE error
);

/**
 * Decompresses a whole compressed image (`source`, `source_size` bytes: a frame's compressed_data and
 * bytes_used, or fb_codec_compress's output) into `destination`, whose format is the base format (or the
 * compressed format itself; the base is used) and whose width and height are the image's.
 * The source is treated as hostile memory (another process may write it meanwhile): damaged data gives
 * FB_ERROR_CORRUPT_DATA or FB_ERROR_UNSUPPORTED_VERSION, never a crash; the destination's contents are then
 * unspecified. FB_ERROR_FORMAT_MISMATCH if the data is of another format or size.
 * The destination's planes are checked before anything is written (bytes_per_row at least a row, the bytes spanned
 * addressable; else FB_ERROR_INVALID_ARGUMENT); only the image's samples are written, never the padding after a
 * row. When every plane's data and bytes_per_row are multiples of the format's element size (2 bytes for
 * 420v/420f, 4 for x420/xf20 and BGRA: a CbCr pair, a pixel) the codec decodes straight into them; otherwise
 * through a private buffer, which costs one more copy of the image.
 * Thread safety: thread-safe (serialised per codec).
 */
fb_status fb_codec_decompress(
    fb_codec *FB_NULLABLE codec,
    const void *FB_NULLABLE source,
    uint64_t source_size,
    const fb_image *FB_NULLABLE destination,
    fb_error *FB_NULLABLE error
);

/** The height in rows of one tile row of compressed data of `format`, `width` x `height` (the header is
 *  validated): the fewest rows fb_codec_decode_rows needs. Thread-safe (serialised per codec). */
fb_status fb_codec_tile_row_height(
    fb_codec *FB_NULLABLE codec,
    const void *FB_NULLABLE source,
    uint64_t source_size,
    uint32_t format,
    uint32_t width,
    uint32_t height,
    uint32_t *FB_NULLABLE out_rows,
    fb_error *FB_NULLABLE error
);

/**
 * Called by fb_codec_decode_rows for each band: the image rows first_row ..< first_row + row_count are in the
 * first row_count rows of the band buffer. Return 0 to go on, non-zero to stop (fb_codec_decode_rows then
 * returns FB_ERROR_CANCELLED). Runs on the thread that called fb_codec_decode_rows.
 */
typedef int32_t (*fb_rows_callback)(void *FB_NULLABLE context, uint32_t first_row, uint32_t row_count);

/**
 * Decodes compressed data band by band into `band`, a caller's image as wide as the image and at least one
 * tile row high (fb_codec_tile_row_height; more rows decode more tile rows per call, in parallel), calling
 * `callback` after each band, top to bottom: the whole raw frame never has to exist in memory.
 * `band->format` is the base format (or the compressed one), `band->height` its rows; the image's height is
 * `image_height`. Errors as fb_codec_decompress, FB_ERROR_INVALID_ARGUMENT for a band too low,
 * FB_ERROR_CANCELLED when the callback stopped. Bands delivered before an error were correct.
 * Thread safety: thread-safe (serialised per codec); do not call this codec from inside the callback.
 */
fb_status fb_codec_decode_rows(
    fb_codec *FB_NULLABLE codec,
    const void *FB_NULLABLE source,
    uint64_t source_size,
    uint32_t image_height,
    const fb_image *FB_NULLABLE band,
    fb_rows_callback FB_NULLABLE callback,
    void *FB_NULLABLE context,
    fb_error *FB_NULLABLE error
);

/* ------------------------------------------------------------------------------------------------------------ */
/* Socket paths                                                                                                 */
/* ------------------------------------------------------------------------------------------------------------ */

/**
 * The conventional socket path of the stream called `name` (NULL: "framebus"), as every FrameBus client computes
 * it (the CLI, Swift's SocketPath.default, the GStreamer elements, Python's default_socket_path):
 * "$XDG_RUNTIME_DIR/NAME.sock", or, when XDG_RUNTIME_DIR is unset or not an absolute path (containers, CI, ssh,
 * services), "${TMPDIR:-/tmp}/framebus-UID/NAME.sock". That fallback directory is created with mode 0700 when it
 * is missing, and refused (FB_ERROR_PERMISSION_DENIED) when it is a symbolic link, not a directory, another user's,
 * or open to group or others: in a shared /tmp another user could otherwise receive our subscribers or pose as our
 * publisher.
 * `name`: 1...64 bytes of UTF-8, no '/', not starting with '.', no control characters (else
 * FB_ERROR_INVALID_ARGUMENT). The path and its NUL are written to `buffer` (`capacity` bytes; 108 always suffice
 * for a usable socket path); FB_ERROR_BUFFER_TOO_SMALL if they do not fit (nothing is written then).
 * Errors also: FB_ERROR_SYSTEM_CALL when the fallback directory cannot be made or examined. Thread-safe.
 */
fb_status fb_default_socket_path(
    const char *FB_NULLABLE name,
    char *FB_NULLABLE buffer,
    size_t capacity,
    fb_error *FB_NULLABLE error
);

/* ------------------------------------------------------------------------------------------------------------ */
/* Logging                                                                                                      */
/* ------------------------------------------------------------------------------------------------------------ */

/** Severity of a library log message, lowest first (swift-log's levels). */
typedef int32_t fb_log_level;

#define FB_LOG_TRACE 0
#define FB_LOG_DEBUG 1
#define FB_LOG_INFO 2
#define FB_LOG_NOTICE 3
#define FB_LOG_WARNING 4
#define FB_LOG_ERROR 5
#define FB_LOG_CRITICAL 6
/** For fb_set_log_level only: no message at all. */
#define FB_LOG_OFF 7

/**
 * Receives one log message of the library: `level` (FB_LOG_TRACE...FB_LOG_CRITICAL), `label` (the logger, for
 * example "framebus.subscriber") and `message` (one line of UTF-8, metadata appended as " key=value"), both
 * NUL-terminated and valid only during the call. Calls come from the library's own threads as well as the caller's,
 * one at a time (they are serialised). The callback must return promptly and must not call fb_set_log_handler or
 * fb_set_log_level (such a call returns FB_ERROR_BUSY); it may call any other function.
 */
typedef void (*fb_log_function)(void *FB_NULLABLE user_data, fb_log_level level, const char *FB_NONNULL label,
                                const char *FB_NONNULL message);

/**
 * Routes the library's log messages (warnings such as "subscription ended", protocol errors of peers) to
 * `function`, called with `user_data`; NULL restores the default, one line per message on standard error. It
 * applies at once to every publisher and subscriber, also those made before. When it returns, the previous
 * function is not running and is never called again, so its user_data may be freed.
 * Errors: FB_ERROR_BUSY when called from inside a log function. Thread-safe.
 */
fb_status fb_set_log_handler(fb_log_function FB_NULLABLE function, void *FB_NULLABLE user_data,
                             fb_error *FB_NULLABLE error);

/**
 * Messages below `minimum` are dropped, whichever way they go (default FB_LOG_INFO); FB_LOG_OFF silences the
 * library. Errors: FB_ERROR_INVALID_ARGUMENT for a level outside FB_LOG_TRACE...FB_LOG_OFF, FB_ERROR_BUSY from
 * inside a log function. Thread-safe.
 */
fb_status fb_set_log_level(fb_log_level minimum, fb_error *FB_NULLABLE error);

/* ------------------------------------------------------------------------------------------------------------ */
/* Recorder                                                                                                     */
/* ------------------------------------------------------------------------------------------------------------ */

/**
 * A recorder: a queue-mode subscriber that writes every frame it receives, raw or in the compressed layout exactly
 * as it arrives, to a Matroska file (docs/RECORDING.md), with O_DIRECT from one I/O thread behind an in-memory
 * backlog, a checkpoint at least every second, and a drop log of every frame that did not reach the disk. The same
 * recorder as `framebus record`. Created by fb_recorder_create, stopped by fb_recorder_stop, freed by
 * fb_recorder_destroy.
 */
typedef struct fb_recorder fb_recorder;

/** How to make a recorder. Fill with fb_recorder_options_init, then set what you need. */
typedef struct fb_recorder_options {
    /** The publisher's socket path (required), NUL-terminated; copied. */
    const char *FB_NULLABLE path;
    /** The recording's path (required; created or truncated), NUL-terminated; copied. */
    const char *FB_NULLABLE output_path;
    /** 1: record the lossless compressed variant the publisher offers (`framebus publish --compressed`); 0
     *  (default): the base formats. */
    uint32_t compressed;
    /** 1: write through the page cache (sync_file_range and POSIX_FADV_DONTNEED at each checkpoint) instead of
     *  O_DIRECT; 0 (default): O_DIRECT where the file system allows it. */
    uint32_t buffered;
    /** The in-memory backlog that absorbs disk stalls, in bytes: 0 (default) for 256 MiB; at least 1 MiB. */
    uint64_t backlog_bytes;
    /** The queue depth asked of the publisher, 1...64; 0 (default) for 16. */
    uint32_t queue_depth;
    /** Milliseconds between checkpoints (cluster padded to 4 KiB, then fdatasync), 10...1000; 0 (default) for
     *  1000: after a crash, everything up to the last checkpoint reads back bit-exact. */
    uint32_t checkpoint_ms;
    /** Milliseconds to wait for the publisher's socket to appear and accept; 0 (default) for 5000. */
    uint32_t connect_timeout_ms;
    /** Writes kept in flight at disjoint offsets of the file, 1...16; 0 (default) for 2. Added after library
     *  0.7.0, in what was reserved[0]: an older library refuses a value here. */
    uint32_t writes_in_flight;
    /** Set to 0 (fb_recorder_options_init does); reserved for fields to come, refused when not 0. */
    uint32_t reserved[4];
} fb_recorder_options;

/** Sets defaults (every field 0: see each field). Call it before setting fields. Thread-safe. Does nothing for
 *  NULL. */
void fb_recorder_options_init(fb_recorder_options *FB_NULLABLE options);

/**
 * Opens the recording, connects to the publisher and starts recording; returns at once (the recorder connects
 * and records on threads of its own).
 * Ownership: on FB_OK, *out_recorder is yours; stop it with fb_recorder_stop and free it with fb_recorder_destroy.
 * Errors: FB_ERROR_INVALID_ARGUMENT (a NULL or empty path, an option out of range, a reserved field not 0);
 * FB_ERROR_SYSTEM_CALL when the file cannot be created (system_errno says why: ENOSPC, EIO, EACCES...); the
 * subscriber's errors (for example FB_ERROR_INVALID_ARGUMENT for a socket path too long). A publisher that is not
 * there yet is not an error here: the recorder waits connect_timeout_ms for it, then its status shows the end.
 * Thread-safe.
 */
fb_status fb_recorder_create(
    const fb_recorder_options *FB_NULLABLE options,
    fb_recorder *FB_NULLABLE *FB_NULLABLE out_recorder,
    fb_error *FB_NULLABLE error
);

/** Why frames did not reach the disk: the index into fb_recorder_status.drops (the recording's drop log uses
 *  the same numbers, docs/RECORDING.md). */
typedef enum fb_recording_drop_reason {
    /** The bus replaced a frame the recorder had not taken yet. */
    FB_RECORDING_DROP_BUS_FRAME_WAS_LATE = 1,
    /** The publisher's pool was exhausted: the recorder held all it was granted. */
    FB_RECORDING_DROP_BUS_OUT_OF_BUFFERS = 2,
    /** The publisher lost frames upstream or restarted. */
    FB_RECORDING_DROP_BUS_DISCONTINUITY = 3,
    /** The in-memory backlog was full: the disk did not keep up. */
    FB_RECORDING_DROP_BACKLOG_FULL = 4,
    /** The file system ran out of space. */
    FB_RECORDING_DROP_DISK_FULL = 5,
    /** A write or a sync failed. */
    FB_RECORDING_DROP_IO_ERROR = 6,
    /** The frame's format or size differs from the recording's track. */
    FB_RECORDING_DROP_FORMAT_CHANGE = 7,
    /** The publisher's work for the recorder's format (its compressed encoder) fell behind. */
    FB_RECORDING_DROP_BUS_WORK_FELL_BEHIND = 8,
} fb_recording_drop_reason;

/** Bits of fb_recorder_status.busy_reasons: why the recorder is busy right now. */
enum {
    /** A write to the disk has been in flight for more than 100 ms. */
    FB_RECORDER_BUSY_WRITE_STALL = 1u << 0,
    /** A checkpoint's fdatasync is in flight. */
    FB_RECORDER_BUSY_SYNCING = 1u << 1,
    /** Space is being reserved ahead (fallocate). */
    FB_RECORDER_BUSY_RESERVING = 1u << 2,
    /** The backlog is more than half full: the disk is not keeping up. */
    FB_RECORDER_BUSY_BACKLOG_FILLING = 1u << 3,
    /** O_DIRECT was refused (or not asked for), so writes go through the page cache. */
    FB_RECORDER_BUSY_BUFFERED_WRITES = 1u << 4,
};

/** A recorder's state, as Apple's storage reports it: what was written, what remains, why it is busy. */
typedef struct fb_recorder_status {
    /** Frames taken from the bus into the backlog. */
    uint64_t frames_accepted;
    /** Frames wholly written to the file. */
    uint64_t frames_written;
    /** Bytes written to the file, and of those, bytes made durable by a checkpoint. */
    uint64_t bytes_written;
    uint64_t bytes_durable;
    /** Frames that did not reach the disk, in all. */
    uint64_t dropped_frames;
    /** The same by reason: drops[FB_RECORDING_DROP_...]; drops[0] and the entries past the last reason are 0. */
    uint64_t drops[16];
    /** The backlog now, its capacity, and its peak since the start, in bytes. */
    uint64_t backlog_bytes;
    uint64_t backlog_capacity;
    uint64_t backlog_peak_bytes;
    /** Free space left on the file system for the recording, in bytes. */
    uint64_t remaining_bytes;
    /** Seconds left at the current rate; negative when not known yet (no rate). */
    double remaining_seconds;
    /** The write rate over the last seconds, bytes per second. */
    double bytes_per_second;
    /** Write latency percentiles of the I/O thread's writes, microseconds. */
    uint64_t write_latency_p50_us;
    uint64_t write_latency_p99_us;
    /** FB_RECORDER_BUSY_... bits. */
    uint32_t busy_reasons;
    /** 1 if the file is written with O_DIRECT. */
    uint32_t uses_direct_io;
    /** 1 once the bus stream ended (the publisher stopped or went away, or never came): call fb_recorder_stop. */
    uint32_t stream_ended;
    /** 1 once the file is closed (fb_recorder_stop returned, or the recording failed). */
    uint32_t closed;
    /** FB_OK, or why the recording stopped writing: FB_ERROR_SYSTEM_CALL with failure_errno ENOSPC (disk full),
     *  EIO or another errno (I/O error). The file is readable up to its last checkpoint either way. */
    fb_status failure;
    int32_t failure_errno;
    /** Set to 0; reserved for fields to come. */
    uint64_t reserved[8];
} fb_recorder_status;

/** A snapshot of the recorder's state into *status. Errors: FB_ERROR_INVALID_ARGUMENT for NULL. Thread-safe. */
fb_status fb_recorder_get_status(
    fb_recorder *FB_NULLABLE recorder,
    fb_recorder_status *FB_NULLABLE status,
    fb_error *FB_NULLABLE error
);

/**
 * Waits until the publisher's stream ended (status.stream_ended: it stopped, went away, or never came) or the
 * recorder was stopped, for up to `timeout_ns` nanoseconds (negative: without limit), then fills *status if not NULL.
 * A wait on the event, not a poll. Returns FB_OK when the stream ended, FB_ERROR_TIMED_OUT otherwise (the status is
 * filled either way). Errors: FB_ERROR_INVALID_ARGUMENT for a NULL recorder. Thread-safe; any number of threads
 * may wait.
 */
fb_status fb_recorder_wait(
    fb_recorder *FB_NULLABLE recorder,
    int64_t timeout_ns,
    fb_recorder_status *FB_NULLABLE status,
    fb_error *FB_NULLABLE error
);

/**
 * Stops recording: no frame is taken after this; the backlog is written, the last cluster checkpointed, and the
 * file closed with its duration, cues and drop log. Waits for the I/O thread (bounded by the backlog's size over
 * the disk's speed). Fills *final_status if not NULL. Idempotent. Errors: FB_ERROR_INVALID_ARGUMENT for a NULL
 * recorder. Thread-safe.
 */
fb_status fb_recorder_stop(
    fb_recorder *FB_NULLABLE recorder,
    fb_recorder_status *FB_NULLABLE final_status,
    fb_error *FB_NULLABLE error
);

/** Stops the recorder if it runs (as fb_recorder_stop) and frees it. NULL is ignored. Not concurrently with
 *  another call on it. */
void fb_recorder_destroy(fb_recorder *FB_NULLABLE recorder);

#ifdef __cplusplus
}
#endif

#if defined(__clang__)
#pragma clang diagnostic pop
#endif

#endif /* FRAMEBUS_H */
