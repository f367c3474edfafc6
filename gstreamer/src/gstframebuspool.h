/*
 * GstFramebusPool: the buffer pool framebussink offers upstream in the allocation query. Its buffers are
 * FrameBus publisher buffers (sealed memfd surfaces) wrapped as GstMemory with a GstVideoMeta giving the real
 * plane offsets and strides, so an upstream element that writes into them (videotestsrc, v4l2src with
 * io-mode=dmabuf-import... any element that maps frames with gst_video_frame_map) writes straight into the
 * surface the subscribers will map: the sink then publishes it without a copy.
 *
 * Buffers are never recycled by GStreamer: a surface belongs to the FrameBus pool, which lends it again only
 * when no subscriber holds it. Acquiring takes a fresh FrameBus buffer; releasing a buffer that was not
 * published gives the surface back unpublished.
 */
#ifndef GST_FRAMEBUS_POOL_H
#define GST_FRAMEBUS_POOL_H

#include <gst/gst.h>
#include <gst/video/video.h>

#include "framebus.h"

G_BEGIN_DECLS

/* A publisher shared by the sink and by every buffer and pool that may outlive it. Reference-counted
 * (g_atomic_rc_box); `lock` serialises every call on `publisher` so that fb_publisher_destroy never runs
 * concurrently with another call on it (framebus.h's rule). */
typedef struct {
  GMutex lock;
  fb_publisher *publisher;      /* NULL once the sink stopped or reconfigured */
  GstVideoInfo info;            /* the pool's caps: format, size, default layout */
  fb_buffer_info layout;        /* the surfaces' real layout, from the first buffer */
  gboolean has_layout;
} GstFramebusPublisher;

GstFramebusPublisher *gst_framebus_publisher_new (fb_publisher * publisher, const GstVideoInfo * info);
GstFramebusPublisher *gst_framebus_publisher_ref (GstFramebusPublisher * handle);
void gst_framebus_publisher_unref (GstFramebusPublisher * handle);
/* Stops the publisher (subscribers get END_OF_STREAM). Buffers still out are discarded when freed. */
void gst_framebus_publisher_close (GstFramebusPublisher * handle);

/* Takes a FrameBus buffer and wraps it in a GstBuffer (one read-write GstMemory over the planes, and a
 * GstVideoMeta). Returns GST_FLOW_OK, or GST_FLOW_CUSTOM_SUCCESS when the FrameBus pool was exhausted (the
 * frame was counted as an outOfBuffers drop by the library and *out is NULL), GST_FLOW_FLUSHING when the
 * publisher is closed, GST_FLOW_ERROR with `error` filled otherwise. */
GstFlowReturn gst_framebus_publisher_wrap_new_buffer (GstFramebusPublisher * handle, GstBuffer ** out,
    fb_error * error);

/* If `buffer` is one of `handle`'s wrapped buffers whose surface was not published yet, and nothing else can
 * see or write it (the buffer and its memory are referenced only by the caller), takes its FrameBus buffer out
 * (the GstBuffer keeps pointing at the memory but owns it no more) and returns it; else NULL. */
fb_buffer *gst_framebus_publisher_take_buffer (GstFramebusPublisher * handle, GstBuffer * buffer);

/* Takes a FrameBus buffer for the sink to copy a frame into. FB_ERROR_OUT_OF_BUFFERS when subscribers hold every
 * surface (the library counted the frame as dropped), FB_ERROR_CLOSED when the publisher is closed. */
fb_status gst_framebus_publisher_acquire (GstFramebusPublisher * handle, fb_buffer ** out, fb_buffer_info * info,
    fb_error * error);

/* Publishes (or, once the publisher is closed, discards) a FrameBus buffer; the buffer is gone either way. */
fb_status gst_framebus_publisher_publish (GstFramebusPublisher * handle, fb_buffer * buffer,
    const fb_publish_info * info, guint64 * sequence, fb_error * error);

/* Whether `buffer` is a stand-in the pool handed out when the FrameBus pool was exhausted (that frame was
 * already counted as dropped; publishing it would count it twice). */
gboolean gst_framebus_buffer_is_stand_in (GstBuffer * buffer);

#define GST_TYPE_FRAMEBUS_POOL (gst_framebus_pool_get_type ())
G_DECLARE_FINAL_TYPE (GstFramebusPool, gst_framebus_pool, GST, FRAMEBUS_POOL, GstBufferPool)

GstBufferPool *gst_framebus_pool_new (GstFramebusPublisher * handle);

G_END_DECLS

#endif /* GST_FRAMEBUS_POOL_H */
