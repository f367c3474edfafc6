/*
 * GstFramebusPool: the buffer pool framebussink offers upstream in the allocation query. Its buffers are
 * FrameBus publisher buffers (sealed memfd surfaces) wrapped as GstMemory with a GstVideoMeta giving the real
 * plane offsets and strides, so an upstream element that writes into them through gst_video_frame_map
 * (videotestsrc, videoconvert, rtpvrawdepay, software decoders) writes straight into the surface the subscribers
 * will map: the sink then publishes it without a copy.
 *
 * Buffers are never recycled by GStreamer: a surface belongs to the FrameBus pool, which lends it again only
 * when no subscriber holds it. Acquiring takes a fresh FrameBus buffer; releasing a buffer that was not
 * published gives the surface back unpublished. When every surface is in use (upstream itself holds them, in a
 * queue for example), acquiring waits up to 200 ms, then hands out a stand-in in ordinary memory instead of
 * blocking longer; the sink copies it.
 */
#ifndef GST_FRAMEBUS_POOL_H
#define GST_FRAMEBUS_POOL_H

#include <gst/gst.h>
#include <gst/video/video.h>

#include "framebus.h"

G_BEGIN_DECLS

/* A publisher shared by the sink and by every buffer and pool that may outlive it. Reference-counted
 * (g_atomic_rc_box). Every call on `publisher` or on its buffers holds `lifetime` for reading (the library's
 * calls are thread-safe among themselves); closing holds it for writing, so that fb_publisher_destroy never runs
 * concurrently with another call (framebus.h's rule) and a wait for a free surface never blocks a publish. */
typedef struct {
  GRWLock lifetime;
  fb_publisher *publisher;      /* NULL once the sink stopped or reconfigured */
  GstVideoInfo info;            /* the pool's caps: format, size, default layout */
  GMutex lock;                  /* guards layout and has_layout */
  fb_buffer_info layout;        /* the surfaces' real layout, from the first buffer */
  gboolean has_layout;
} GstFramebusPublisher;

GstFramebusPublisher *gst_framebus_publisher_new (fb_publisher * publisher, const GstVideoInfo * info);
GstFramebusPublisher *gst_framebus_publisher_ref (GstFramebusPublisher * handle);
void gst_framebus_publisher_unref (GstFramebusPublisher * handle);
/* Stops the publisher (subscribers get END_OF_STREAM). Buffers still out are discarded when freed. */
void gst_framebus_publisher_close (GstFramebusPublisher * handle);

/* Takes a free FrameBus buffer (waiting up to timeout_ns for one; 0: not at all) and wraps it in a GstBuffer (one read-write GstMemory over the
 * planes, and a GstVideoMeta). Returns GST_FLOW_OK, or GST_FLOW_CUSTOM_SUCCESS when every surface is in use (*out
 * is NULL; nothing was reported to subscribers), GST_FLOW_FLUSHING when the publisher is closed, GST_FLOW_ERROR
 * with `error` filled otherwise. */
GstFlowReturn gst_framebus_publisher_wrap_new_buffer (GstFramebusPublisher * handle, GstBuffer ** out,
    gint64 timeout_ns, fb_error * error);

/* If `buffer` is one of `handle`'s wrapped buffers whose surface was not published yet, and nothing else can
 * see or write it (the buffer and its memory are referenced only by the caller), takes its FrameBus buffer out
 * (the GstBuffer keeps pointing at the memory but owns it no more) and returns it; else NULL. */
fb_buffer *gst_framebus_publisher_take_buffer (GstFramebusPublisher * handle, GstBuffer * buffer);

/* Takes a free FrameBus buffer for the sink to copy a frame into, waiting up to timeout_ns (0: not at all).
 * FB_ERROR_OUT_OF_BUFFERS (or FB_ERROR_TIMED_OUT) when every surface stays in use, FB_ERROR_CLOSED when the
 * publisher is closed. */
fb_status gst_framebus_publisher_acquire (GstFramebusPublisher * handle, fb_buffer ** out, fb_buffer_info * info,
    gint64 timeout_ns, fb_error * error);

/* Fills *statistics from the publisher; FALSE once it is closed. */
gboolean gst_framebus_publisher_get_statistics (GstFramebusPublisher * handle, fb_publisher_statistics * stats);

/* Publishes (or, once the publisher is closed, discards) a FrameBus buffer; the buffer is gone either way. */
fb_status gst_framebus_publisher_publish (GstFramebusPublisher * handle, fb_buffer * buffer,
    const fb_publish_info * info, guint64 * sequence, fb_error * error);

/* Gives a FrameBus buffer back unpublished. */
void gst_framebus_publisher_discard (GstFramebusPublisher * handle, fb_buffer * buffer);

/* Tells every subscriber that one frame was lost (outOfBuffers): the sink had no surface to put it in. */
void gst_framebus_publisher_report_lost_frame (GstFramebusPublisher * handle);

#define GST_TYPE_FRAMEBUS_POOL (gst_framebus_pool_get_type ())
G_DECLARE_FINAL_TYPE (GstFramebusPool, gst_framebus_pool, GST, FRAMEBUS_POOL, GstBufferPool)

GstBufferPool *gst_framebus_pool_new (GstFramebusPublisher * handle);

G_END_DECLS

#endif /* GST_FRAMEBUS_POOL_H */
