/*
 * Shared by the plugin's elements (framebussink, framebussrc, framebusenc, framebusdec): pixel formats, the
 * compressed caps, colour attachments and clocks, translated between GStreamer's vocabulary and FrameBus's
 * (include/framebus.h).
 */
#ifndef GST_FRAMEBUS_COMMON_H
#define GST_FRAMEBUS_COMMON_H

#include <gst/gst.h>
#include <gst/video/video.h>

#include "framebus.h"

G_BEGIN_DECLS

GST_DEBUG_CATEGORY_EXTERN (gst_framebus_debug);

/* The raw formats both elements speak, in GStreamer's caps spelling. */
#define GST_FRAMEBUS_VIDEO_FORMATS "{ NV12, P010_10LE, BGRA }"
/* FrameBus surfaces are at most 16384 pixels wide and high; 4:2:0 formats need even sizes (checked at caps). */
#define GST_FRAMEBUS_VIDEO_CAPS \
  "video/x-raw, format = (string) " GST_FRAMEBUS_VIDEO_FORMATS ", " \
  "width = (int) [ 1, 16384 ], height = (int) [ 1, 16384 ], framerate = (fraction) [ 0, MAX ]"

/* The lossless compressed layout (docs/COMPRESSED-LAYOUT.md) as a GStreamer media type of FrameBus's own: one
 * buffer per frame holding the compressed surface's bytes_used bytes, self-describing (its header names the base
 * format, width and height). `format` is the compressed FourCC; colorimetry and chroma-site, when present, are those
 * of the raw frames. '&' is no plain caps character: written by hand, the format needs quotes
 * (format=(string)"&8v0"). */
#define GST_FRAMEBUS_COMPRESSED_MEDIA_TYPE "video/x-framebus-compressed"
#define GST_FRAMEBUS_COMPRESSED_CAPS \
  GST_FRAMEBUS_COMPRESSED_MEDIA_TYPE ", " \
  "format = (string) { \"&8v0\", \"&8f0\", \"&xv0\", \"&xf0\", \"&BGA\" }, " \
  "width = (int) [ 1, 16384 ], height = (int) [ 1, 16384 ], framerate = (fraction) [ 0, MAX ]"

/* The socket path both elements use when no socket-path is set, by the rule every FrameBus client follows
 * (fb_default_socket_path) for the stream `name` (NULL: "framebus"): $XDG_RUNTIME_DIR/NAME.sock, else
 * ${TMPDIR:-/tmp}/framebus-UID/NAME.sock in a private directory (mode 0700) made when missing. NULL when there is
 * none; then *why (freed with g_free) says why. */
gchar *gst_framebus_default_socket_path (const gchar * name, gchar ** why);

/* The FrameBus base format for a GStreamer format and colour range (NV12 video range is 420v, full range 420f),
 * or 0 when FrameBus has none. */
guint32 gst_framebus_format_from_video_info (const GstVideoInfo * info);

/* The GStreamer format of a FrameBus format (a compressed format gives its base's), or UNKNOWN. */
GstVideoFormat gst_framebus_video_format (guint32 fourcc);

/* The compressed caps for frames of `info` (raw caps' format, size, rate, colorimetry, chroma siting), in FrameBus
 * format `compressed` (a compressed FourCC). */
GstCaps *gst_framebus_compressed_caps (guint32 compressed, const GstVideoInfo * info);

/* Whether a FourCC names one of FrameBus's compressed variants. */
gboolean gst_framebus_format_is_compressed (guint32 fourcc);

/* "420v", "&8v0": the FourCC as four printable characters (buffer of at least 5 bytes). */
const gchar *gst_framebus_fourcc_string (guint32 fourcc, gchar buffer[5]);

/* Parses "420v" (or "NV12"-style aliases are not accepted: FrameBus names only). Returns 0 when unknown. */
guint32 gst_framebus_fourcc_parse (const gchar * text);

/* GStreamer colorimetry and chroma siting to FrameBus colour attachments (0 where FrameBus has no code). */
fb_colorimetry gst_framebus_colorimetry_from_info (const GstVideoInfo * info);

/* FrameBus colour attachments (and the range the format implies) into a GstVideoInfo being built. */
void gst_framebus_colorimetry_to_info (fb_colorimetry colour, guint32 fourcc, GstVideoInfo * info);

/* CLOCK_MONOTONIC now, in nanoseconds. */
gint64 gst_framebus_monotonic_ns (void);

/* The offset that turns `clock`'s times into CLOCK_MONOTONIC times (monotonic = clock time + offset): exactly 0
 * for GStreamer's system clock in monotonic mode (the default pipeline clock), otherwise measured now. */
gint64 gst_framebus_clock_to_monotonic_offset (GstClock * clock);

/* Copies a raw GstVideoFrame's planes, row by row, into FrameBus planes of the same format and size. */
void gst_framebus_copy_frame_to_planes (const GstVideoFrame * frame, const fb_plane * planes,
    guint plane_count);

/* Copies FrameBus planes row by row into a GstVideoFrame of the same format and size. */
void gst_framebus_copy_planes_to_frame (const fb_plane * planes, guint plane_count, GstVideoFrame * frame);

/* Bytes of payload in each row of plane `plane` (width in elements times bytes per element). */
static inline gsize
gst_framebus_plane_row_bytes (const fb_plane * plane)
{
  return (gsize) plane->width * plane->bytes_per_element;
}

G_END_DECLS

#endif /* GST_FRAMEBUS_COMMON_H */
