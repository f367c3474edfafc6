#ifndef GST_FRAMEBUS_SINK_H
#define GST_FRAMEBUS_SINK_H

#include <gst/gst.h>
#include <gst/base/gstbasesink.h>
#include <gst/video/video.h>

#include "gstframebuspool.h"

G_BEGIN_DECLS

#define GST_TYPE_FRAMEBUS_SINK (gst_framebus_sink_get_type ())
G_DECLARE_FINAL_TYPE (GstFramebusSink, gst_framebus_sink, GST, FRAMEBUS_SINK, GstBaseSink)

/* Which formats the sink's publisher offers. */
typedef enum {
  GST_FRAMEBUS_COMPRESSION_OFF = 0,     /* only the raw format */
  GST_FRAMEBUS_COMPRESSION_OFFER = 1,   /* raw and its lossless compressed variant (encoded once, on demand) */
  GST_FRAMEBUS_COMPRESSION_ONLY = 2,    /* only the compressed variant: every frame is encoded */
} GstFramebusCompression;

/* What the sink publishes as a frame's presentation time. */
typedef enum {
  GST_FRAMEBUS_TIMESTAMP_CLOCK = 0,     /* the buffer's clock time, as CLOCK_MONOTONIC nanoseconds */
  GST_FRAMEBUS_TIMESTAMP_PTS = 1,       /* the buffer's PTS as it is (stream time, nanoseconds) */
} GstFramebusTimestampMode;

GST_ELEMENT_REGISTER_DECLARE (framebussink);

G_END_DECLS

#endif /* GST_FRAMEBUS_SINK_H */
