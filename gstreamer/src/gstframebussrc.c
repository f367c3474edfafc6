/*
 * framebussrc: subscribes to a FrameBus publisher and pushes its frames into a pipeline.
 *
 * Zero-copy: each raw frame becomes a GstBuffer whose read-only GstMemory wraps the subscriber's mapping of the
 * surface, with a GstVideoMeta giving the real plane offsets and strides; the frame goes back to the publisher
 * (fb_frame_release) when GStreamer frees the memory. A frame is copied instead when downstream cannot read
 * video meta and the surface's layout is not GStreamer's default one, when downstream already holds as many
 * frames as the publisher lets this subscriber hold, or when `copy` is set. Compressed frames are decoded into
 * ordinary buffers, or, when downstream takes video/x-framebus-compressed (framebusdec, a payloader, a muxer) rather
 * than the raw format or `decode` is off, pushed as they are: the surface's compressed bytes, wrapped like a raw
 * frame's planes. Drops on the bus become a GAP event and a DISCONT buffer; the latency query is answered
 * from the frames' capture times.
 */
#include "gstframebussrc.h"
#include "gstframebuscommon.h"

#include <gst/allocators/allocators.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define GST_CAT_DEFAULT gst_framebus_debug

enum {
  PROP_0,
  PROP_SOCKET_PATH,
  PROP_SOCKET_NAME,
  PROP_ACCEPT,
  PROP_QUEUE_DEPTH,
  PROP_CONNECT_TIMEOUT,
  PROP_RECONNECT,
  PROP_COPY,
  PROP_FD_MEMORY,
  PROP_DECODE_THREADS,
  PROP_DECODE,
  PROP_STATS,
  PROP_WAIT_SLICE,
  PROP_DEFERRED,
};

#define DEFAULT_QUEUE_DEPTH 0
#define DEFAULT_CONNECT_TIMEOUT (5 * GST_SECOND)
#define DEFAULT_RECONNECT FALSE
#define DEFAULT_COPY FALSE
#define DEFAULT_FD_MEMORY FALSE
#define DEFAULT_DECODE_THREADS 0
#define DEFAULT_DECODE TRUE
#define DEFAULT_WAIT_SLICE 0
/* How long one wait for an event lasts before the loop looks again (fb_subscriber_interrupt ends it anyway). */
#define EVENT_WAIT_NS (500 * GST_MSECOND)
/* Capture times further than this from now are not CLOCK_MONOTONIC times of this host: timestamp on arrival. */
#define PLAUSIBLE_CAPTURE_DELAY (60 * GST_SECOND)
#define LATENCY_WINDOW 64

/* Frames this element has handed downstream and not yet got back; shared with the buffers, which may outlive
 * the element. */
typedef struct {
  _Atomic gint64 outstanding;
} HeldFrames;

struct _GstFramebusSrc {
  GstPushSrc parent;

  /* properties, with the object lock */
  gchar *socket_path;
  gchar *socket_name;
  gchar *accept;
  guint queue_depth;
  guint64 connect_timeout;
  gboolean reconnect;
  gboolean copy;
  gboolean fd_memory;
  guint decode_threads;
  gboolean decode;
  guint wait_slice;
  gboolean deferred;

  /* fd-backed memories: GstFdMemory for memfds, GstDmaBufMemory for DMA-BUFs */
  GstAllocator *fd_allocator, *dmabuf_allocator;

  /* streaming thread */
  fb_subscriber *subscriber;
  fb_codec *codec;
  HeldFrames *held;
  fb_session session;
  gboolean have_session;
  GstCaps *frame_caps;          /* caps of the frames now arriving; negotiate() sets them */
  GstVideoInfo frame_info;
  guint32 frame_format;
  gboolean downstream_video_meta;
  gboolean passthrough;         /* the frames now arriving are compressed and leave as they are */
  gboolean pending_discont;
  GstClockTime last_end;        /* running time where the last pushed buffer ends */
  GstClockTime last_pushed_pts; /* the PTS of the last buffer pushed: each next one is later */

  /* with the object lock */
  GstClockTime pending_gap_start, pending_gap_duration;
  GstClockTime delays[LATENCY_WINDOW];  /* capture-to-push delays of recent frames */
  guint delay_count, delay_next;
  GstClockTime frame_duration;   /* from the frames' durations, else measured between their timestamps */
  GstClockTime last_pts;
  GstClockTime reported_latency;

  /* counters: streaming thread writes, anyone reads */
  _Atomic guint64 frames, zero_copy, fd_memories, dmabuf_memories, copied, decoded, passed_through, corrupt, gaps,
      disconts;
  _Atomic guint64 dropped_late, dropped_out_of_buffers, dropped_discontinuity;
};

static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src", GST_PAD_SRC, GST_PAD_ALWAYS,
    GST_STATIC_CAPS (GST_FRAMEBUS_VIDEO_CAPS "; " GST_FRAMEBUS_COMPRESSED_CAPS));

G_DEFINE_TYPE (GstFramebusSrc, gst_framebus_src, GST_TYPE_PUSH_SRC);
GST_ELEMENT_REGISTER_DEFINE (framebussrc, "framebussrc", GST_RANK_NONE, GST_TYPE_FRAMEBUS_SRC);

static GstStructure *gst_framebus_src_make_stats (GstFramebusSrc * self);

static void
counter_add (_Atomic guint64 * counter, guint64 amount)
{
  guint64 old = atomic_load_explicit (counter, memory_order_relaxed);
  guint64 sum = old + amount < old ? G_MAXUINT64 : old + amount;
  atomic_store_explicit (counter, sum, memory_order_relaxed);
}

/* ---- frames handed downstream ------------------------------------------------------------------------------ */

typedef struct {
  fb_frame *frame;
  HeldFrames *held;
  gint memories;                /* memories still wrapping the frame */
} HeldFrame;

static void
held_frame_unref (gpointer data)
{
  HeldFrame *held = data;
  if (!g_atomic_int_dec_and_test (&held->memories))
    return;
  /* Any thread (GStreamer frees buffers wherever the last reference goes); framebus.h allows it, also after
   * the subscriber is destroyed. */
  fb_frame_release (held->frame);
  atomic_fetch_sub (&held->held->outstanding, 1);
  g_atomic_rc_box_release (held->held);
  g_free (held);
}

/* Whether the planes' pointers are as far apart as their offsets in the surface: one mapping of one file. */
static gboolean
planes_share_one_mapping (const fb_frame_info * info)
{
  for (guint p = 1; p < info->plane_count; p++)
    if ((gint64) (info->planes[p].data - info->planes[0].data)
        != (gint64) (info->planes[p].offset - info->planes[0].offset))
      return FALSE;
  return TRUE;
}

/* Whether the frame's planes sit exactly where GStreamer's default layout for `video` puts them. */
static gboolean
layout_is_default (const fb_frame_info * info, const GstVideoInfo * video)
{
  if (info->plane_count != GST_VIDEO_INFO_N_PLANES (video) || !planes_share_one_mapping (info))
    return FALSE;
  for (guint p = 0; p < info->plane_count; p++) {
    if ((gsize) (info->planes[p].data - info->planes[0].data) != GST_VIDEO_INFO_PLANE_OFFSET (video, p))
      return FALSE;
    if (info->planes[p].bytes_per_row != (guint64) GST_VIDEO_INFO_PLANE_STRIDE (video, p))
      return FALSE;
  }
  return TRUE;
}

static GQuark held_frame_quark;

/* The frame as fd-backed memories (as PipeWire's pool hands out its buffers): GstDmaBufMemory for DMA-BUFs, so that
 * downstream (a GPU upload, an encoder, v4l2) can import the frame by descriptor instead of copying it, GstFdMemory
 * for memfds. Planes in one file share one memory; planes in different files (a memfd or DMA-BUF per plane) get one
 * each. Every memory holds the frame until it is freed. NULL (nothing taken) if the descriptors cannot be had. */
static GstBuffer *
gst_framebus_src_wrap_fds (GstFramebusSrc * self, fb_frame * frame, const fb_frame_info * info)
{
  fb_frame_fds fds;
  fb_error error;
  if (fb_frame_dup_fds (frame, &fds, &error) != FB_OK) {
    GST_WARNING_OBJECT (self, "no descriptors for the frame (%s): wrapping its mapping", error.message);
    return NULL;
  }
  gsize offsets[GST_VIDEO_MAX_PLANES] = { 0 };
  gint strides[GST_VIDEO_MAX_PLANES] = { 0 };
  GstMemory *memories[FB_MAX_PLANES] = { NULL };
  /* For each memory: the first and last byte of its planes in its file, and where it starts in the buffer. */
  guint64 first[FB_MAX_PLANES] = { 0 }, end[FB_MAX_PLANES] = { 0 };
  gsize starts[FB_MAX_PLANES] = { 0 };
  struct stat files[FB_MAX_PLANES];
  guint memory_count = 0, memory_of_plane[FB_MAX_PLANES] = { 0 };
  gboolean ok = fds.count == info->plane_count && fds.count <= GST_VIDEO_MAX_PLANES;
  for (guint p = 0; ok && p < fds.count; p++) {
    const fb_frame_plane_fd *plane = &fds.planes[p];
    ok = fstat (plane->fd, &files[p]) == 0 && plane->offset + info->planes[p].byte_count <= plane->size;
    guint shared = p;
    for (guint q = 0; ok && q < p; q++)
      if (files[q].st_dev == files[p].st_dev && files[q].st_ino == files[p].st_ino)
        shared = q;
    if (ok && shared != p) {
      memory_of_plane[p] = memory_of_plane[shared];
    } else if (ok) {
      GstMemory *memory = fds.is_dma_buf
          ? gst_dmabuf_allocator_alloc (self->dmabuf_allocator, plane->fd, (gsize) plane->size)
          : gst_fd_allocator_alloc (self->fd_allocator, plane->fd, (gsize) plane->size, GST_FD_MEMORY_FLAG_NONE);
      ok = memory != NULL;
      if (ok) {
        fds.planes[p].fd = -1;  /* the memory owns it now */
        GST_MINI_OBJECT_FLAG_SET (memory, GST_MEMORY_FLAG_READONLY);
        memory_of_plane[p] = memory_count;
        first[memory_count] = plane->offset;
        memories[memory_count++] = memory;
      }
    }
    if (ok) {
      guint m = memory_of_plane[p];
      first[m] = MIN (first[m], plane->offset);
      end[m] = MAX (end[m], plane->offset + info->planes[p].byte_count);
    }
  }
  /* Each memory covers its planes' bytes only (a buffer's size is what downstream reads or writes to a file). */
  gsize position = 0;
  for (guint m = 0; ok && m < memory_count; m++) {
    gst_memory_resize (memories[m], (gssize) first[m], (gsize) (end[m] - first[m]));
    starts[m] = position;
    position += (gsize) (end[m] - first[m]);
  }
  for (guint p = 0; ok && p < fds.count; p++) {
    offsets[p] = starts[memory_of_plane[p]] + (gsize) (fds.planes[p].offset - first[memory_of_plane[p]]);
    strides[p] = (gint) fds.planes[p].bytes_per_row;
  }
  for (guint p = 0; p < fds.count && p < FB_MAX_PLANES; p++)
    if (fds.planes[p].fd >= 0)
      close (fds.planes[p].fd);
  if (!ok) {
    for (guint m = 0; m < memory_count; m++)
      gst_memory_unref (memories[m]);
    GST_WARNING_OBJECT (self, "the frame's descriptors cannot be wrapped: wrapping its mapping");
    return NULL;
  }
  HeldFrame *held = g_new0 (HeldFrame, 1);
  held->frame = frame;
  held->held = g_atomic_rc_box_acquire (self->held);
  held->memories = (gint) memory_count;
  atomic_fetch_add (&self->held->outstanding, 1);
  GstBuffer *buffer = gst_buffer_new ();
  for (guint m = 0; m < memory_count; m++) {
    gst_mini_object_set_qdata (GST_MINI_OBJECT (memories[m]), held_frame_quark, held, held_frame_unref);
    gst_buffer_append_memory (buffer, memories[m]);
  }
  gst_buffer_add_video_meta_full (buffer, GST_VIDEO_FRAME_FLAG_NONE,
      GST_VIDEO_INFO_FORMAT (&self->frame_info), info->width, info->height, info->plane_count, offsets, strides);
  counter_add (&self->fd_memories, 1);
  if (fds.is_dma_buf)
    counter_add (&self->dmabuf_memories, 1);
  return buffer;
}

static GstBuffer *
gst_framebus_src_wrap (GstFramebusSrc * self, fb_frame * frame, const fb_frame_info * info)
{
  GST_OBJECT_LOCK (self);
  gboolean fd_memory = self->fd_memory;
  GST_OBJECT_UNLOCK (self);
  if (fd_memory) {
    GstBuffer *buffer = gst_framebus_src_wrap_fds (self, frame, info);
    if (buffer != NULL)
      return buffer;
  }
  gsize offsets[GST_VIDEO_MAX_PLANES] = { 0 };
  gint strides[GST_VIDEO_MAX_PLANES] = { 0 };
  GstBuffer *buffer = gst_buffer_new ();
  HeldFrame *held = g_new0 (HeldFrame, 1);
  held->frame = frame;
  held->held = g_atomic_rc_box_acquire (self->held);
  atomic_fetch_add (&self->held->outstanding, 1);

  if (planes_share_one_mapping (info)) {
    /* One read-only memory from the first plane's first byte to the last plane's last. */
    const guint8 *start = info->planes[0].data, *end = info->planes[0].data;
    for (guint p = 0; p < info->plane_count; p++) {
      if (info->planes[p].data < start)
        start = info->planes[p].data;
      if (info->planes[p].data + info->planes[p].byte_count > end)
        end = info->planes[p].data + info->planes[p].byte_count;
    }
    for (guint p = 0; p < info->plane_count; p++) {
      offsets[p] = (gsize) (info->planes[p].data - start);
      strides[p] = (gint) info->planes[p].bytes_per_row;
    }
    held->memories = 1;
    gst_buffer_append_memory (buffer, gst_memory_new_wrapped (GST_MEMORY_FLAG_READONLY, (gpointer) start,
            (gsize) (end - start), 0, (gsize) (end - start), held, held_frame_unref));
  } else {
    /* Planes in different descriptors (a multi-fd DMA-BUF): one memory each, back to back in the buffer. */
    gsize position = 0;
    held->memories = (gint) info->plane_count;
    for (guint p = 0; p < info->plane_count; p++) {
      offsets[p] = position;
      strides[p] = (gint) info->planes[p].bytes_per_row;
      gsize size = (gsize) info->planes[p].byte_count;
      gst_buffer_append_memory (buffer, gst_memory_new_wrapped (GST_MEMORY_FLAG_READONLY,
              info->planes[p].data, size, 0, size, held, held_frame_unref));
      position += size;
    }
  }
  gst_buffer_add_video_meta_full (buffer, GST_VIDEO_FRAME_FLAG_NONE,
      GST_VIDEO_INFO_FORMAT (&self->frame_info), info->width, info->height, info->plane_count, offsets, strides);
  return buffer;
}

/* A compressed frame's bytes as they are, for downstream's framebusdec, payloader or muxer: wrapped read-only (the
 * frame is released when the buffer is freed), or copied when `copy` is set or downstream holds too many frames.
 * The bytes are the publisher's and not validated here: whoever decodes them treats them as hostile (framebusdec
 * and fb_codec_decompress do). NULL (the frame released) when the frame has no bytes. */
static GstBuffer *
gst_framebus_src_pass_through (GstFramebusSrc * self, fb_frame * frame, const fb_frame_info * info, gboolean wrap)
{
  if (info->compressed_data == NULL || info->bytes_used == 0 || info->bytes_used > info->allocation_size
      || info->bytes_used > G_MAXSSIZE) {
    fb_frame_release (frame);
    return NULL;
  }
  gsize size = (gsize) info->bytes_used;
  GstBuffer *buffer;
  if (wrap) {
    HeldFrame *held = g_new0 (HeldFrame, 1);
    held->frame = frame;
    held->held = g_atomic_rc_box_acquire (self->held);
    held->memories = 1;
    atomic_fetch_add (&self->held->outstanding, 1);
    buffer = gst_buffer_new ();
    gst_buffer_append_memory (buffer, gst_memory_new_wrapped (GST_MEMORY_FLAG_READONLY,
            (gpointer) info->compressed_data, size, 0, size, held, held_frame_unref));
    counter_add (&self->zero_copy, 1);
  } else {
    buffer = gst_buffer_new_memdup (info->compressed_data, size);
    fb_frame_release (frame);
    counter_add (&self->copied, 1);
  }
  counter_add (&self->passed_through, 1);
  return buffer;
}

static GstFlowReturn
gst_framebus_src_new_output_buffer (GstFramebusSrc * self, GstBuffer ** out)
{
  GstBufferPool *pool = gst_base_src_get_buffer_pool (GST_BASE_SRC_CAST (self));
  GstFlowReturn result;
  if (pool != NULL) {
    result = gst_buffer_pool_acquire_buffer (pool, out, NULL);
    gst_object_unref (pool);
    return result;
  }
  *out = gst_buffer_new_allocate (NULL, GST_VIDEO_INFO_SIZE (&self->frame_info), NULL);
  return *out ? GST_FLOW_OK : GST_FLOW_ERROR;
}

/* Copies a raw frame, or decodes a compressed one, into a buffer of our own; the frame is released either way.
 * GST_FLOW_CUSTOM_SUCCESS: the compressed data was damaged and the frame is skipped. */
static GstFlowReturn
gst_framebus_src_copy (GstFramebusSrc * self, fb_frame * frame, const fb_frame_info * info, GstBuffer ** out)
{
  GstBuffer *buffer = NULL;
  GstVideoFrame video;
  GstFlowReturn result = gst_framebus_src_new_output_buffer (self, &buffer);
  if (result != GST_FLOW_OK) {
    fb_frame_release (frame);
    return result;
  }
  if (!gst_video_frame_map (&video, &self->frame_info, buffer, GST_MAP_WRITE)) {
    fb_frame_release (frame);
    gst_buffer_unref (buffer);
    GST_ELEMENT_ERROR (self, RESOURCE, WRITE, ("Could not map an output buffer"), (NULL));
    return GST_FLOW_ERROR;
  }

  if (info->plane_count > 0) {
    gst_framebus_copy_planes_to_frame (info->planes, info->plane_count, &video);
    counter_add (&self->copied, 1);
  } else {
    fb_error error = { 0 };
    fb_status status = FB_OK;
    if (self->codec == NULL) {
      GST_OBJECT_LOCK (self);
      guint threads = self->decode_threads;
      GST_OBJECT_UNLOCK (self);
      status = fb_codec_create (threads, &self->codec, &error);
    }
    if (status == FB_OK) {
      fb_image image;
      memset (&image, 0, sizeof image);
      image.format = info->format;
      image.width = info->width;
      image.height = info->height;
      for (guint p = 0; p < GST_VIDEO_FRAME_N_PLANES (&video) && p < FB_MAX_PLANES; p++) {
        image.planes[p].data = GST_VIDEO_FRAME_PLANE_DATA (&video, p);
        image.planes[p].bytes_per_row = (guint64) GST_VIDEO_FRAME_PLANE_STRIDE (&video, p);
      }
      status = fb_codec_decompress (self->codec, info->compressed_data, info->bytes_used, &image, &error);
    }
    /* FB_ERROR_INVALID_ARGUMENT: the publisher's bytes_used (0, say) is the only argument not ours. */
    if (status == FB_ERROR_CORRUPT_DATA || status == FB_ERROR_UNSUPPORTED_VERSION
        || status == FB_ERROR_FORMAT_MISMATCH || status == FB_ERROR_INVALID_ARGUMENT) {
      /* Another process's memory: damage costs this frame only. */
      GST_ELEMENT_WARNING (self, STREAM, DECODE, ("A compressed frame could not be decoded; skipped"),
          ("frame %" G_GUINT64_FORMAT ": %s: %s", info->sequence, fb_status_name (status), error.message));
      counter_add (&self->corrupt, 1);
      result = GST_FLOW_CUSTOM_SUCCESS;
    } else if (status != FB_OK) {
      GST_ELEMENT_ERROR (self, STREAM, DECODE, ("Could not decode a compressed frame"), ("%s: %s",
              fb_status_name (status), error.message));
      result = GST_FLOW_ERROR;
    } else {
      counter_add (&self->decoded, 1);
    }
  }
  gst_video_frame_unmap (&video);
  fb_frame_release (frame);
  if (result != GST_FLOW_OK) {
    gst_buffer_unref (buffer);
    return result;
  }
  *out = buffer;
  return GST_FLOW_OK;
}

/* ---- caps -------------------------------------------------------------------------------------------------- */

static gboolean
gst_framebus_src_negotiate (GstBaseSrc * src)
{
  GstFramebusSrc *self = GST_FRAMEBUS_SRC (src);
  /* The caps are the frames': nothing to decide before the first frame says what it is. */
  if (self->frame_caps == NULL)
    return TRUE;
  return gst_base_src_set_caps (src, self->frame_caps);
}

/* Whether compressed frames of `format` leave as they are: downstream takes their compressed caps, and either does
 * not take the raw caps `raw` (which decoding would give) or `decode` is off. */
static gboolean
gst_framebus_src_passes_through (GstFramebusSrc * self, GstCaps * raw, guint32 format, const GstVideoInfo * video)
{
  GST_OBJECT_LOCK (self);
  gboolean decode = self->decode;
  GST_OBJECT_UNLOCK (self);
  GstCaps *compressed = gst_framebus_compressed_caps (format, video);
  GstCaps *allowed = gst_pad_peer_query_caps (GST_BASE_SRC_PAD (self), NULL);
  gboolean takes_compressed = allowed == NULL || gst_caps_can_intersect (allowed, compressed);
  gboolean takes_raw = allowed == NULL || gst_caps_can_intersect (allowed, raw);
  if (allowed != NULL)
    gst_caps_unref (allowed);
  gst_caps_unref (compressed);
  return takes_compressed && (!decode || !takes_raw);
}

/* Makes the caps for a frame; renegotiates when they differ from the current ones. */
static gboolean
gst_framebus_src_update_caps (GstFramebusSrc * self, const fb_frame_info * info)
{
  GstVideoFormat format = gst_framebus_video_format (info->format);
  GstVideoInfo video;
  gst_video_info_init (&video);
  if (format == GST_VIDEO_FORMAT_UNKNOWN || !gst_video_info_set_format (&video, format, info->width, info->height))
    return FALSE;
  gst_framebus_colorimetry_to_info (info->colorimetry, info->format, &video);
  if (info->duration_ns != FB_TIME_NONE && info->duration_ns > 0)
    gst_video_guess_framerate ((GstClockTime) info->duration_ns, &video.fps_n, &video.fps_d);
  else {
    video.fps_n = 0;
    video.fps_d = 1;
  }
  GstCaps *caps = gst_video_info_to_caps (&video);
  /* Asked again (a caps query downstream) only when the frames change format or size. */
  gboolean same_frames = self->frame_caps != NULL && info->format == self->frame_format
      && info->width == (guint32) GST_VIDEO_INFO_WIDTH (&self->frame_info)
      && info->height == (guint32) GST_VIDEO_INFO_HEIGHT (&self->frame_info);
  gboolean passthrough = gst_framebus_format_is_compressed (info->format)
      && (same_frames ? self->passthrough : gst_framebus_src_passes_through (self, caps, info->format, &video));
  if (passthrough) {
    gst_caps_unref (caps);
    caps = gst_framebus_compressed_caps (info->format, &video);
  }
  self->passthrough = passthrough;
  if (self->frame_caps != NULL && gst_caps_is_equal (caps, self->frame_caps)) {
    gst_caps_unref (caps);
    return TRUE;
  }
  GST_INFO_OBJECT (self, "frames are now %" GST_PTR_FORMAT, caps);
  gst_caps_replace (&self->frame_caps, caps);
  gst_caps_unref (caps);
  self->frame_info = video;
  self->frame_format = info->format;
  if (info->duration_ns != FB_TIME_NONE && info->duration_ns > 0) {
    GST_OBJECT_LOCK (self);
    self->frame_duration = (GstClockTime) info->duration_ns;
    GST_OBJECT_UNLOCK (self);
  }
  return gst_base_src_negotiate (GST_BASE_SRC_CAST (self));
}

static gboolean
gst_framebus_src_decide_allocation (GstBaseSrc * src, GstQuery * query)
{
  GstFramebusSrc *self = GST_FRAMEBUS_SRC (src);
  GstCaps *caps = NULL;
  GstVideoInfo info;
  GstBufferPool *pool = NULL;
  guint size = 0, min = 0, max = 0;
  gboolean update;

  gst_query_parse_allocation (query, &caps, NULL);
  if (caps == NULL)
    return TRUE;                /* before the first frame: nothing to decide yet (negotiate() deferred) */
  if (gst_structure_has_name (gst_caps_get_structure (caps, 0), GST_FRAMEBUS_COMPRESSED_MEDIA_TYPE))
    return TRUE;                /* compressed frames bring their own memory (or a copy of it) */
  if (!gst_video_info_from_caps (&info, caps))
    return FALSE;
  self->downstream_video_meta = gst_query_find_allocation_meta (query, GST_VIDEO_META_API_TYPE, NULL);

  /* The pool only serves copies and decoded frames; zero-copy frames bring their own memory. */
  update = gst_query_get_n_allocation_pools (query) > 0;
  if (update)
    gst_query_parse_nth_allocation_pool (query, 0, &pool, &size, &min, &max);
  if (pool == NULL)
    pool = gst_video_buffer_pool_new ();
  size = MAX (size, (guint) GST_VIDEO_INFO_SIZE (&info));

  GstStructure *config = gst_buffer_pool_get_config (pool);
  gst_buffer_pool_config_set_params (config, caps, size, min, max);
  if (gst_buffer_pool_has_option (pool, GST_BUFFER_POOL_OPTION_VIDEO_META))
    gst_buffer_pool_config_add_option (config, GST_BUFFER_POOL_OPTION_VIDEO_META);
  if (!gst_buffer_pool_set_config (pool, config)) {
    config = gst_buffer_pool_get_config (pool);
    if (!gst_buffer_pool_config_validate_params (config, caps, size, min, max)
        || !gst_buffer_pool_set_config (pool, config)) {
      gst_object_unref (pool);
      /* A pool of our own then. */
      pool = gst_video_buffer_pool_new ();
      config = gst_buffer_pool_get_config (pool);
      gst_buffer_pool_config_set_params (config, caps, GST_VIDEO_INFO_SIZE (&info), 0, 0);
      if (!gst_buffer_pool_set_config (pool, config)) {
        gst_object_unref (pool);
        return FALSE;
      }
      size = GST_VIDEO_INFO_SIZE (&info);
      min = max = 0;
    }
  }
  if (update)
    gst_query_set_nth_allocation_pool (query, 0, pool, size, min, max);
  else
    gst_query_add_allocation_pool (query, pool, size, min, max);
  gst_object_unref (pool);
  return TRUE;
}

/* ---- timing ------------------------------------------------------------------------------------------------ */

/* The buffer's PTS: the frame's capture time (CLOCK_MONOTONIC) as running time of this pipeline, or, when the
 * frame carries no plausible capture time of this host or was captured before this pipeline started (its base
 * time: the frame a live publisher had waiting when we subscribed), the running time of its arrival. Every PTS is
 * later than the one before (gst_framebus_src_handle_frame): several frames captured before the start all had PTS 0,
 * and an encoder fed equal timestamps hands mp4mux buffers without any ("Buffer has no PTS"). */
static GstClockTime
gst_framebus_src_timestamp (GstFramebusSrc * self, const fb_frame_info * info)
{
  GstClock *clock = gst_element_get_clock (GST_ELEMENT_CAST (self));
  if (clock == NULL)
    return GST_CLOCK_TIME_NONE;
  GstClockTime base = gst_element_get_base_time (GST_ELEMENT_CAST (self));
  gint64 now = gst_framebus_monotonic_ns ();
  gint64 offset = gst_framebus_clock_to_monotonic_offset (clock);
  GstClockTime result;

  if (info->presentation_time_ns != FB_TIME_NONE && info->presentation_time_ns <= now
      && now - info->presentation_time_ns < (gint64) PLAUSIBLE_CAPTURE_DELAY) {
    gint64 delay = now - info->presentation_time_ns;
    gint64 clock_time = info->presentation_time_ns - offset;
    if (clock_time < (gint64) base) {
      GstClockTime clock_now = gst_clock_get_time (clock);
      gst_object_unref (clock);
      return clock_now > base ? clock_now - base : 0;
    }
    result = (GstClockTime) (clock_time - (gint64) base);
    GST_OBJECT_LOCK (self);
    self->delays[self->delay_next] = (GstClockTime) delay;
    self->delay_next = (self->delay_next + 1) % LATENCY_WINDOW;
    self->delay_count = MIN (self->delay_count + 1, LATENCY_WINDOW);
    GST_OBJECT_UNLOCK (self);
  } else {
    GstClockTime clock_now = gst_clock_get_time (clock);
    result = clock_now > base ? clock_now - base : 0;
  }
  gst_object_unref (clock);
  return result;
}

/* Minimum latency: how late a frame arrives after its capture time, at worst over the recent frames, and at
 * least one frame duration (a frame exists only once it is captured). */
static GstClockTime
gst_framebus_src_latency_locked (GstFramebusSrc * self)
{
  GstClockTime latency = self->frame_duration;
  for (guint i = 0; i < self->delay_count; i++)
    latency = MAX (latency, self->delays[i]);
  return latency;
}

static gboolean
gst_framebus_src_query (GstBaseSrc * src, GstQuery * query)
{
  GstFramebusSrc *self = GST_FRAMEBUS_SRC (src);
  if (GST_QUERY_TYPE (query) == GST_QUERY_LATENCY) {
    GST_OBJECT_LOCK (self);
    GstClockTime min = gst_framebus_src_latency_locked (self);
    /* Frames wait in the subscriber's queue: one in latest-only mode, queue-depth otherwise; a frame interval
     * of 1/30 s is assumed until the frames tell. */
    guint depth = MAX (self->queue_depth, 1);
    GstClockTime interval = self->frame_duration > 0 ? self->frame_duration : GST_SECOND / 30;
    GstClockTime max = min + depth * interval;
    self->reported_latency = min;
    GST_OBJECT_UNLOCK (self);
    GST_DEBUG_OBJECT (self, "latency: live, min %" GST_TIME_FORMAT " max %" GST_TIME_FORMAT,
        GST_TIME_ARGS (min), GST_TIME_ARGS (max));
    gst_query_set_latency (query, TRUE, min, max);
    return TRUE;
  }
  return GST_BASE_SRC_CLASS (gst_framebus_src_parent_class)->query (src, query);
}

/* Posts a latency message when frames arrive later than the latency last reported (plus 1 ms), so that the
 * pipeline asks again and sinks wait long enough. */
static void
gst_framebus_src_check_latency (GstFramebusSrc * self)
{
  GST_OBJECT_LOCK (self);
  GstClockTime latency = gst_framebus_src_latency_locked (self);
  gboolean grew = latency > self->reported_latency + GST_MSECOND;
  if (grew)
    self->reported_latency = latency;
  GST_OBJECT_UNLOCK (self);
  if (grew) {
    GST_INFO_OBJECT (self, "latency grew to %" GST_TIME_FORMAT, GST_TIME_ARGS (latency));
    gst_element_post_message (GST_ELEMENT_CAST (self), gst_message_new_latency (GST_OBJECT_CAST (self)));
  }
}

/* A GAP event must travel before the buffer that follows the gap, from the streaming thread but outside
 * create() (GstBaseSrc may hold its live lock there): a buffer probe on our pad sends it. */
static GstPadProbeReturn
gst_framebus_src_gap_probe (GstPad * pad, GstPadProbeInfo * probe, gpointer data)
{
  GstFramebusSrc *self = GST_FRAMEBUS_SRC (data);
  GST_OBJECT_LOCK (self);
  GstClockTime start = self->pending_gap_start, duration = self->pending_gap_duration;
  self->pending_gap_start = self->pending_gap_duration = GST_CLOCK_TIME_NONE;
  GST_OBJECT_UNLOCK (self);
  if (GST_CLOCK_TIME_IS_VALID (start) && GST_CLOCK_TIME_IS_VALID (duration)) {
    GST_DEBUG_OBJECT (self, "gap of %" GST_TIME_FORMAT " at %" GST_TIME_FORMAT, GST_TIME_ARGS (duration),
        GST_TIME_ARGS (start));
    gst_pad_push_event (pad, gst_event_new_gap (start, duration));
  }
  return GST_PAD_PROBE_OK;
}

/* At end of stream, the counters go on the bus as an element message (gst-launch-1.0 -m prints it). */
static GstPadProbeReturn
gst_framebus_src_eos_probe (GstPad * pad, GstPadProbeInfo * probe, gpointer data)
{
  GstFramebusSrc *self = GST_FRAMEBUS_SRC (data);
  if (GST_EVENT_TYPE (GST_PAD_PROBE_INFO_EVENT (probe)) == GST_EVENT_EOS)
    gst_element_post_message (GST_ELEMENT_CAST (self), gst_message_new_element (GST_OBJECT_CAST (self),
            gst_framebus_src_make_stats (self)));
  return GST_PAD_PROBE_OK;
}

/* ---- the loop ---------------------------------------------------------------------------------------------- */

/* The publisher's system pressure changed (and once after each connection): a framebussrc-system-pressure element
 * message with level (string), factors (comma-separated string, "" at nominal), cost (double, -1 before the publisher
 * measured one), frame-duration (guint64 ns, GST_CLOCK_TIME_NONE when unknown) and frames-shed (guint64). */
static void
gst_framebus_src_post_system_pressure (GstFramebusSrc * self, const fb_system_pressure * pressure)
{
  static const gchar *const levels[] = { "nominal", "fair", "serious", "critical", "shutdown" };
  static const struct {
    guint32 bit;
    const gchar *name;
  } factor_names[] = {
    {FB_PRESSURE_FACTOR_CPU, "cpu"}, {FB_PRESSURE_FACTOR_MEMORY, "memory"}, {FB_PRESSURE_FACTOR_IO, "io"},
    {FB_PRESSURE_FACTOR_THERMAL, "thermal"}, {FB_PRESSURE_FACTOR_BUS, "bus"},
  };
  const gchar *level = pressure->level < G_N_ELEMENTS (levels) ? levels[pressure->level] : "shutdown";
  GString *factors = g_string_new (NULL);
  for (gsize index = 0; index < G_N_ELEMENTS (factor_names); index++) {
    if (pressure->factors & factor_names[index].bit) {
      if (factors->len > 0)
        g_string_append_c (factors, ',');
      g_string_append (factors, factor_names[index].name);
    }
  }
  guint64 duration = pressure->frame_duration_ns > 0 ? (guint64) pressure->frame_duration_ns : GST_CLOCK_TIME_NONE;
  GST_INFO_OBJECT (self, "system pressure %s [%s], cost %.2f", level, factors->str, pressure->cost);
  GstStructure *structure = gst_structure_new ("framebussrc-system-pressure",
      "level", G_TYPE_STRING, level,
      "factors", G_TYPE_STRING, factors->str,
      "cost", G_TYPE_DOUBLE, pressure->cost < 0 ? -1.0 : pressure->cost,
      "frame-duration", G_TYPE_UINT64, duration,
      "frames-shed", G_TYPE_UINT64, (guint64) pressure->frames_shed, NULL);
  g_string_free (factors, TRUE);
  gst_element_post_message (GST_ELEMENT_CAST (self), gst_message_new_element (GST_OBJECT_CAST (self), structure));
}

static GstFlowReturn
gst_framebus_src_handle_frame (GstFramebusSrc * self, fb_frame * frame, GstBuffer ** out)
{
  fb_frame_info info;
  fb_error error = { 0 };
  if (fb_frame_get_info (frame, &info, &error) != FB_OK) {
    fb_frame_release (frame);
    GST_ELEMENT_ERROR (self, STREAM, FAILED, ("A frame could not be read"), ("%s", error.message));
    return GST_FLOW_ERROR;
  }
  if (!gst_framebus_src_update_caps (self, &info)) {
    fb_frame_release (frame);
    gchar name[5];
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, ("Downstream does not take the bus's frames"),
        ("%ux%u %s", info.width, info.height, gst_framebus_fourcc_string (info.format, name)));
    return GST_FLOW_NOT_NEGOTIATED;
  }

  GstClockTime pts = gst_framebus_src_timestamp (self, &info);
  GstBuffer *buffer = NULL;
  GstFlowReturn result = GST_FLOW_OK;

  GST_OBJECT_LOCK (self);
  gboolean always_copy = self->copy;
  GST_OBJECT_UNLOCK (self);
  gint64 outstanding = atomic_load (&self->held->outstanding);
  /* The publisher lets this subscriber hold maximum_held_frames, counting the frames waiting in its queue:
   * keep room for those, or the publisher starts dropping frames for us while downstream sits on buffers. */
  gint64 queued = MAX (self->queue_depth, 1);
  gboolean under_budget = !self->have_session || self->session.maximum_held_frames == 0
      || outstanding + queued < (gint64) self->session.maximum_held_frames;
  gboolean readable = self->downstream_video_meta || layout_is_default (&info, &self->frame_info);

  if (self->passthrough) {
    buffer = gst_framebus_src_pass_through (self, frame, &info, !always_copy && under_budget);
    if (buffer == NULL) {
      counter_add (&self->corrupt, 1);
      self->pending_discont = TRUE;
      GST_WARNING_OBJECT (self, "compressed frame %" G_GUINT64_FORMAT " has no bytes; skipped", info.sequence);
      return GST_FLOW_CUSTOM_SUCCESS;
    }
  } else if (info.plane_count > 0 && !always_copy && under_budget && readable) {
    buffer = gst_framebus_src_wrap (self, frame, &info);
    counter_add (&self->zero_copy, 1);
  } else {
    if (info.plane_count > 0 && !under_budget)
      GST_LOG_OBJECT (self, "downstream holds %" G_GINT64_FORMAT " frames: copying", outstanding);
    result = gst_framebus_src_copy (self, frame, &info, &buffer);
    if (result == GST_FLOW_CUSTOM_SUCCESS) {
      self->pending_discont = TRUE;
      return result;
    }
    if (result != GST_FLOW_OK)
      return result;
  }

  /* Strictly increasing: a frame timed on arrival may come right after one timed by its (earlier) capture. */
  if (GST_CLOCK_TIME_IS_VALID (pts) && GST_CLOCK_TIME_IS_VALID (self->last_pushed_pts)
      && pts <= self->last_pushed_pts)
    pts = self->last_pushed_pts + 1;
  if (GST_CLOCK_TIME_IS_VALID (pts))
    self->last_pushed_pts = pts;
  GST_BUFFER_PTS (buffer) = pts;
  GST_BUFFER_DTS (buffer) = GST_CLOCK_TIME_NONE;
  if (info.duration_ns != FB_TIME_NONE && info.duration_ns > 0)
    GST_BUFFER_DURATION (buffer) = (GstClockTime) info.duration_ns;
  GST_BUFFER_OFFSET (buffer) = info.sequence;
  GST_BUFFER_OFFSET_END (buffer) = info.sequence + 1;

  if (self->pending_discont || (info.flags & FB_FRAME_FLAG_DISCONTINUITY)) {
    GST_BUFFER_FLAG_SET (buffer, GST_BUFFER_FLAG_DISCONT);
    counter_add (&self->disconts, 1);
    if (GST_CLOCK_TIME_IS_VALID (self->last_end) && GST_CLOCK_TIME_IS_VALID (pts) && pts > self->last_end) {
      GST_OBJECT_LOCK (self);
      self->pending_gap_start = self->last_end;
      self->pending_gap_duration = pts - self->last_end;
      GST_OBJECT_UNLOCK (self);
      counter_add (&self->gaps, 1);
    }
    self->pending_discont = FALSE;
  }
  if (GST_CLOCK_TIME_IS_VALID (pts))
    self->last_end = pts + (GST_BUFFER_DURATION_IS_VALID (buffer) ? GST_BUFFER_DURATION (buffer) : 0);
  if (!GST_BUFFER_DURATION_IS_VALID (buffer) && GST_CLOCK_TIME_IS_VALID (pts)) {
    /* No durations on the bus: the frame interval is what the publisher's timestamps say (a moving average, so
     * one late frame does not swing it; not across a discontinuity, where frames are missing). */
    gboolean contiguous = !GST_BUFFER_FLAG_IS_SET (buffer, GST_BUFFER_FLAG_DISCONT);
    GST_OBJECT_LOCK (self);
    if (contiguous && GST_CLOCK_TIME_IS_VALID (self->last_pts) && pts > self->last_pts
        && pts - self->last_pts < GST_SECOND)
      self->frame_duration = self->frame_duration == 0 ? pts - self->last_pts
          : (self->frame_duration * 7 + (pts - self->last_pts)) / 8;
    self->last_pts = pts;
    GST_OBJECT_UNLOCK (self);
  }
  counter_add (&self->frames, 1);
  gst_framebus_src_check_latency (self);
  *out = buffer;
  return GST_FLOW_OK;
}

static GstFlowReturn
gst_framebus_src_create (GstPushSrc * src, GstBuffer ** out)
{
  GstFramebusSrc *self = GST_FRAMEBUS_SRC (src);

  for (;;) {
    fb_event event;
    fb_error error = { 0 };
    fb_status status = fb_subscriber_next_event (self->subscriber, EVENT_WAIT_NS, &event, &error);
    if (status == FB_ERROR_TIMED_OUT)
      continue;
    if (status == FB_ERROR_INTERRUPTED)
      return GST_FLOW_FLUSHING;
    if (status == FB_ERROR_CLOSED)
      return GST_FLOW_EOS;
    if (status != FB_OK) {
      GST_ELEMENT_ERROR (self, RESOURCE, READ, ("FrameBus subscriber failed"), ("%s: %s",
              fb_status_name (status), error.message));
      return GST_FLOW_ERROR;
    }

    switch (event.type) {
      case FB_EVENT_CONNECTED:{
        gchar name[5];
        GST_INFO_OBJECT (self, "connected: %s, up to %u frames held%s",
            gst_framebus_fourcc_string (event.session.format, name), event.session.maximum_held_frames,
            event.session.is_reconnect ? ", reconnected" : "");
        if (self->have_session && event.session.is_reconnect)
          self->pending_discont = TRUE;
        self->session = event.session;
        self->have_session = TRUE;
        break;
      }
      case FB_EVENT_DROP:
        GST_DEBUG_OBJECT (self, "dropped %" G_GUINT64_FORMAT " frames (%" G_GUINT64_FORMAT "...%"
            G_GUINT64_FORMAT ", reason %u)", event.drop.frame_count, event.drop.first_sequence,
            event.drop.last_sequence, event.drop.reason);
        self->pending_discont = TRUE;
        if (event.drop.reason == FB_DROP_FRAME_WAS_LATE)
          counter_add (&self->dropped_late, event.drop.frame_count);
        else if (event.drop.reason == FB_DROP_OUT_OF_BUFFERS || event.drop.reason == FB_DROP_WORK_FELL_BEHIND)
          counter_add (&self->dropped_out_of_buffers, event.drop.frame_count);
        else
          counter_add (&self->dropped_discontinuity, event.drop.frame_count);
        break;
      case FB_EVENT_END:{
        GST_OBJECT_LOCK (self);
        gboolean reconnect = self->reconnect;
        GST_OBJECT_UNLOCK (self);
        if (reconnect) {
          /* The library connects again by itself; the next frame follows a discontinuity. */
          GST_INFO_OBJECT (self, "connection ended (%s: %s); reconnecting", fb_status_name (event.end_status),
              event.end_message);
          self->pending_discont = TRUE;
          break;
        }
        if (event.end_status == FB_ERROR_END_OF_STREAM) {
          GST_INFO_OBJECT (self, "the publisher ended the stream: %s", event.end_message);
          return GST_FLOW_EOS;
        }
        GST_ELEMENT_ERROR (self, RESOURCE, READ, ("The subscription ended: %s", event.end_message),
            ("%s", fb_status_name (event.end_status)));
        return GST_FLOW_ERROR;
      }
      case FB_EVENT_SYSTEM_PRESSURE:
        gst_framebus_src_post_system_pressure (self, &event.system_pressure);
        break;
      case FB_EVENT_FRAME:{
        GstFlowReturn result = gst_framebus_src_handle_frame (self, event.frame, out);
        if (result == GST_FLOW_CUSTOM_SUCCESS)
          break;                /* skipped (damaged); wait for the next */
        return result;
      }
      default:
        break;
    }
  }
}

/* ---- start, stop, unlock ----------------------------------------------------------------------------------- */

/* The formats to ask for, in order of preference: raw ones first (zero-copy), then compressed ones (decoded here,
 * or passed through), keeping only those whose raw form or compressed form downstream can take. */
static gsize
gst_framebus_src_formats_from_downstream (GstFramebusSrc * self, guint32 * formats, gsize capacity)
{
  static const struct {
    const gchar *name;
    guint32 raw[2];
  } families[] = {
    {"NV12", {FB_FORMAT_420V, FB_FORMAT_420F}},
    {"P010_10LE", {FB_FORMAT_X420, FB_FORMAT_XF20}},
    {"BGRA", {FB_FORMAT_BGRA, 0}},
  };
  GstCaps *allowed = gst_pad_peer_query_caps (GST_BASE_SRC_PAD (self), NULL);
  gboolean take[G_N_ELEMENTS (families)], take_compressed[G_N_ELEMENTS (families)];
  for (gsize i = 0; i < G_N_ELEMENTS (families); i++) {
    GstCaps *family = gst_caps_new_simple ("video/x-raw", "format", G_TYPE_STRING, families[i].name, NULL);
    take[i] = allowed == NULL || gst_caps_can_intersect (allowed, family);
    gst_caps_unref (family);
    take_compressed[i] = FALSE;
    for (int r = 0; r < 2 && families[i].raw[r] != 0; r++) {
      fb_format_info format;
      gchar name[5];
      if (fb_format_get_info (families[i].raw[r], &format, NULL) != FB_OK)
        continue;
      GstCaps *compressed = gst_caps_new_simple (GST_FRAMEBUS_COMPRESSED_MEDIA_TYPE, "format", G_TYPE_STRING,
          gst_framebus_fourcc_string (format.compressed_format, name), NULL);
      take_compressed[i] |= allowed == NULL || gst_caps_can_intersect (allowed, compressed);
      gst_caps_unref (compressed);
    }
  }
  if (allowed != NULL)
    gst_caps_unref (allowed);
  gsize count = 0;
  for (int compressed = 0; compressed < 2; compressed++)
    for (gsize i = 0; i < G_N_ELEMENTS (families); i++)
      for (int r = 0; r < 2 && (take[i] || (compressed && take_compressed[i])); r++) {
        guint32 raw = families[i].raw[r];
        fb_format_info format;
        if (raw == 0 || count == capacity || fb_format_get_info (raw, &format, NULL) != FB_OK)
          continue;
        formats[count++] = compressed ? format.compressed_format : raw;
      }
  return count;
}

static gboolean
gst_framebus_src_start (GstBaseSrc * src)
{
  GstFramebusSrc *self = GST_FRAMEBUS_SRC (src);
  guint32 formats[16];
  gsize count = 0;

  GST_OBJECT_LOCK (self);
  gchar *why = NULL;
  gchar *path = self->socket_path ? g_strdup (self->socket_path) : gst_framebus_default_socket_path (self->socket_name, &why);
  gchar *accept = g_strdup (self->accept);
  fb_subscriber_options options;
  fb_subscriber_options_init (&options);
  options.queue_depth = self->queue_depth;
  options.reconnects = self->reconnect ? 1 : 0;
  options.connect_timeout_ns = (int64_t) MIN (self->connect_timeout, (guint64) G_MAXINT64);
  options.wait_slice_us = self->wait_slice;
  /* The publisher's system pressure comes as FB_EVENT_SYSTEM_PRESSURE, posted as a framebussrc-system-pressure
   * element message. */
  guint32 create_flags = (self->deferred ? FB_SUBSCRIBER_DEFERRED : 0) | FB_SUBSCRIBER_SYSTEM_PRESSURE;
  GST_OBJECT_UNLOCK (self);

  if (path == NULL) {
    GST_ELEMENT_ERROR (self, RESOURCE, NOT_FOUND, ("No socket path: set socket-path"), ("%s", why));
    g_free (why);
    g_free (accept);
    return FALSE;
  }
  if (accept != NULL && accept[0] != '\0') {
    gchar **names = g_strsplit (accept, ",", -1);
    for (gchar ** name = names; *name != NULL; name++) {
      guint32 code = gst_framebus_fourcc_parse (g_strstrip (*name));
      if (code == 0 || count == G_N_ELEMENTS (formats)) {
        GST_ELEMENT_ERROR (self, RESOURCE, SETTINGS, ("Unknown FrameBus format \"%s\" in accept", *name),
            ("known: 420v 420f x420 xf20 BGRA &8v0 &8f0 &xv0 &xf0 &BGA"));
        g_strfreev (names);
        g_free (accept);
        g_free (path);
        return FALSE;
      }
      formats[count++] = code;
    }
    g_strfreev (names);
  } else {
    count = gst_framebus_src_formats_from_downstream (self, formats, G_N_ELEMENTS (formats));
  }
  g_free (accept);
  if (count == 0) {
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, ("Downstream takes none of NV12, P010_10LE, BGRA, "
            GST_FRAMEBUS_COMPRESSED_MEDIA_TYPE), (NULL));
    g_free (path);
    return FALSE;
  }

  options.path = path;
  options.accepted_formats = formats;
  options.accepted_format_count = count;
  fb_error error = { 0 };
  fb_status status = fb_subscriber_create_with_flags (&options, create_flags, &self->subscriber, &error);
  if (status == FB_ERROR_INVALID_ARGUMENT) {
    /* A library older than 0.7.0 does not know the pressure flag: subscribe without it (no pressure messages). */
    GST_INFO_OBJECT (self, "subscribing without system pressure: %s", error.message);
    status = fb_subscriber_create_with_flags (&options, create_flags & ~FB_SUBSCRIBER_SYSTEM_PRESSURE,
        &self->subscriber, &error);
  }
  if (status != FB_OK) {
    GST_ELEMENT_ERROR (self, RESOURCE, OPEN_READ, ("Could not subscribe at %s", path), ("%s: %s",
            fb_status_name (status), error.message));
    g_free (path);
    return FALSE;
  }
  GST_INFO_OBJECT (self, "subscribing at %s (%" G_GSIZE_FORMAT " formats accepted)", path, count);
  g_free (path);

  self->held = g_atomic_rc_box_new0 (HeldFrames);
  self->have_session = FALSE;
  self->pending_discont = FALSE;
  self->last_end = GST_CLOCK_TIME_NONE;
  self->last_pushed_pts = GST_CLOCK_TIME_NONE;
  GST_OBJECT_LOCK (self);
  self->pending_gap_start = self->pending_gap_duration = GST_CLOCK_TIME_NONE;
  self->delay_count = self->delay_next = 0;
  self->frame_duration = 0;
  self->last_pts = GST_CLOCK_TIME_NONE;
  self->reported_latency = 0;
  GST_OBJECT_UNLOCK (self);
  return TRUE;
}

static gboolean
gst_framebus_src_stop (GstBaseSrc * src)
{
  GstFramebusSrc *self = GST_FRAMEBUS_SRC (src);
  /* Frames downstream still holds stay valid; each is released when GStreamer frees it. */
  fb_subscriber_destroy (self->subscriber);
  self->subscriber = NULL;
  fb_codec_destroy (self->codec);
  self->codec = NULL;
  if (self->held != NULL) {
    g_atomic_rc_box_release (self->held);
    self->held = NULL;
  }
  gst_caps_replace (&self->frame_caps, NULL);
  return TRUE;
}

static gboolean
gst_framebus_src_unlock (GstBaseSrc * src)
{
  fb_subscriber_interrupt (GST_FRAMEBUS_SRC (src)->subscriber);
  return TRUE;
}

static gboolean
gst_framebus_src_unlock_stop (GstBaseSrc * src)
{
  fb_subscriber_resume (GST_FRAMEBUS_SRC (src)->subscriber);
  return TRUE;
}

/* ---- GObject ----------------------------------------------------------------------------------------------- */

static GstStructure *
gst_framebus_src_make_stats (GstFramebusSrc * self)
{
  GstStructure *stats = gst_structure_new ("framebussrc-stats",
      "frames", G_TYPE_UINT64, (guint64) atomic_load (&self->frames),
      "zero-copy", G_TYPE_UINT64, (guint64) atomic_load (&self->zero_copy),
      "fd-memory", G_TYPE_UINT64, (guint64) atomic_load (&self->fd_memories),
      "dmabuf-memory", G_TYPE_UINT64, (guint64) atomic_load (&self->dmabuf_memories),
      "copied", G_TYPE_UINT64, (guint64) atomic_load (&self->copied),
      "decoded", G_TYPE_UINT64, (guint64) atomic_load (&self->decoded),
      "passed-through", G_TYPE_UINT64, (guint64) atomic_load (&self->passed_through),
      "corrupt", G_TYPE_UINT64, (guint64) atomic_load (&self->corrupt),
      "dropped-frame-was-late", G_TYPE_UINT64, (guint64) atomic_load (&self->dropped_late),
      "dropped-out-of-buffers", G_TYPE_UINT64, (guint64) atomic_load (&self->dropped_out_of_buffers),
      "dropped-discontinuity", G_TYPE_UINT64, (guint64) atomic_load (&self->dropped_discontinuity),
      "discontinuities", G_TYPE_UINT64, (guint64) atomic_load (&self->disconts),
      "gaps", G_TYPE_UINT64, (guint64) atomic_load (&self->gaps), NULL);
  GST_OBJECT_LOCK (self);
  gst_structure_set (stats, "latency", G_TYPE_UINT64, (guint64) gst_framebus_src_latency_locked (self), NULL);
  GST_OBJECT_UNLOCK (self);
  return stats;
}

static void
gst_framebus_src_set_property (GObject * object, guint id, const GValue * value, GParamSpec * spec)
{
  GstFramebusSrc *self = GST_FRAMEBUS_SRC (object);
  GST_OBJECT_LOCK (self);
  switch (id) {
    case PROP_SOCKET_PATH:
      g_free (self->socket_path);
      self->socket_path = g_value_dup_string (value);
      break;
    case PROP_SOCKET_NAME:
      g_free (self->socket_name);
      self->socket_name = g_value_dup_string (value);
      break;
    case PROP_ACCEPT:
      g_free (self->accept);
      self->accept = g_value_dup_string (value);
      break;
    case PROP_QUEUE_DEPTH:
      self->queue_depth = g_value_get_uint (value);
      break;
    case PROP_CONNECT_TIMEOUT:
      self->connect_timeout = g_value_get_uint64 (value);
      break;
    case PROP_RECONNECT:
      self->reconnect = g_value_get_boolean (value);
      break;
    case PROP_COPY:
      self->copy = g_value_get_boolean (value);
      break;
    case PROP_FD_MEMORY:
      self->fd_memory = g_value_get_boolean (value);
      break;
    case PROP_DECODE_THREADS:
      self->decode_threads = g_value_get_uint (value);
      break;
    case PROP_DECODE:
      self->decode = g_value_get_boolean (value);
      break;
    case PROP_WAIT_SLICE:
      self->wait_slice = g_value_get_uint (value);
      break;
    case PROP_DEFERRED:
      self->deferred = g_value_get_boolean (value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, id, spec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_framebus_src_get_property (GObject * object, guint id, GValue * value, GParamSpec * spec)
{
  GstFramebusSrc *self = GST_FRAMEBUS_SRC (object);
  if (id == PROP_STATS) {
    g_value_take_boxed (value, gst_framebus_src_make_stats (self));
    return;
  }
  GST_OBJECT_LOCK (self);
  switch (id) {
    case PROP_SOCKET_PATH:
      g_value_set_string (value, self->socket_path);
      break;
    case PROP_SOCKET_NAME:
      g_value_set_string (value, self->socket_name);
      break;
    case PROP_ACCEPT:
      g_value_set_string (value, self->accept);
      break;
    case PROP_QUEUE_DEPTH:
      g_value_set_uint (value, self->queue_depth);
      break;
    case PROP_CONNECT_TIMEOUT:
      g_value_set_uint64 (value, self->connect_timeout);
      break;
    case PROP_RECONNECT:
      g_value_set_boolean (value, self->reconnect);
      break;
    case PROP_COPY:
      g_value_set_boolean (value, self->copy);
      break;
    case PROP_FD_MEMORY:
      g_value_set_boolean (value, self->fd_memory);
      break;
    case PROP_DECODE_THREADS:
      g_value_set_uint (value, self->decode_threads);
      break;
    case PROP_DECODE:
      g_value_set_boolean (value, self->decode);
      break;
    case PROP_WAIT_SLICE:
      g_value_set_uint (value, self->wait_slice);
      break;
    case PROP_DEFERRED:
      g_value_set_boolean (value, self->deferred);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, id, spec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_framebus_src_finalize (GObject * object)
{
  GstFramebusSrc *self = GST_FRAMEBUS_SRC (object);
  g_free (self->socket_path);
  g_free (self->socket_name);
  g_free (self->accept);
  gst_caps_replace (&self->frame_caps, NULL);
  gst_clear_object (&self->fd_allocator);
  gst_clear_object (&self->dmabuf_allocator);
  G_OBJECT_CLASS (gst_framebus_src_parent_class)->finalize (object);
}

static void
gst_framebus_src_class_init (GstFramebusSrcClass * klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);
  GstBaseSrcClass *base_class = GST_BASE_SRC_CLASS (klass);
  GstPushSrcClass *push_class = GST_PUSH_SRC_CLASS (klass);
  const GParamFlags flags = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY;

  object_class->set_property = gst_framebus_src_set_property;
  object_class->get_property = gst_framebus_src_get_property;
  object_class->finalize = gst_framebus_src_finalize;

  g_object_class_install_property (object_class, PROP_SOCKET_PATH,
      g_param_spec_string ("socket-path", "Socket path",
          "Path of the publisher's socket. NULL: $XDG_RUNTIME_DIR/framebus.sock, else "
          "${TMPDIR:-/tmp}/framebus-UID/framebus.sock (a private directory)", NULL, flags));
  g_object_class_install_property (object_class, PROP_SOCKET_NAME,
      g_param_spec_string ("socket-name", "Socket name",
          "The stream's name when socket-path is not set: the socket is $XDG_RUNTIME_DIR/NAME.sock, else "
          "${TMPDIR:-/tmp}/framebus-UID/NAME.sock, as `framebus publish --name NAME` and fb_default_socket_path "
          "name it. NULL: framebus", NULL, flags));
  g_object_class_install_property (object_class, PROP_ACCEPT,
      g_param_spec_string ("accept", "Accepted formats",
          "FrameBus formats to ask for, in order of preference, comma-separated (420v, 420f, x420, xf20, BGRA, "
          "and the compressed &8v0, &8f0, &xv0, &xf0, &BGA, decoded here or passed through: see decode). NULL: the "
          "raw formats downstream can take, then the compressed variants of those it takes raw or compressed",
          NULL, flags));
  g_object_class_install_property (object_class, PROP_QUEUE_DEPTH,
      g_param_spec_uint ("queue-depth", "Queue depth",
          "0: latest-only delivery (a newer frame replaces one not yet taken: a frameWasLate drop). 1-64: a queue "
          "of that many frames", 0, 64, DEFAULT_QUEUE_DEPTH, flags));
  g_object_class_install_property (object_class, PROP_CONNECT_TIMEOUT,
      g_param_spec_uint64 ("connect-timeout", "Connect timeout",
          "Nanoseconds to wait for the publisher to appear and answer before failing (with reconnect: per "
          "attempt)", 1, G_MAXINT64, DEFAULT_CONNECT_TIMEOUT, flags));
  g_object_class_install_property (object_class, PROP_RECONNECT,
      g_param_spec_boolean ("reconnect", "Reconnect",
          "Keep reconnecting when the publisher stops or is not there yet, instead of ending the stream (EOS) "
          "or failing; the first frame after a reconnection is DISCONT", DEFAULT_RECONNECT, flags));
  g_object_class_install_property (object_class, PROP_COPY,
      g_param_spec_boolean ("copy", "Copy",
          "Copy every frame into GStreamer memory and hand it back to the publisher at once, instead of "
          "wrapping the shared memory (for pipelines that keep many buffers, e.g. long queues)", DEFAULT_COPY,
          flags));
  g_object_class_install_property (object_class, PROP_FD_MEMORY,
      g_param_spec_boolean ("fd-memory", "Descriptor-backed memory",
          "Zero-copy frames as fd-backed memory: GstDmaBufMemory for DMA-BUF surfaces (downstream can import them "
          "instead of copying), GstFdMemory for memfds; each memory maps its descriptor when first read",
          DEFAULT_FD_MEMORY, flags));
  g_object_class_install_property (object_class, PROP_DECODE_THREADS,
      g_param_spec_uint ("decode-threads", "Decode threads",
          "Threads that decode a compressed frame (0: one per processor)", 0, 256, DEFAULT_DECODE_THREADS,
          flags));
  g_object_class_install_property (object_class, PROP_DECODE,
      g_param_spec_boolean ("decode", "Decode",
          "Decode compressed frames into raw video when downstream takes raw video. Either way, compressed frames "
          "leave as they are (video/x-framebus-compressed: the publisher's bytes, for framebusdec, rtpgstpay, "
          "srtsink...) when downstream takes that and not the raw format; false: also when it takes both",
          DEFAULT_DECODE, flags));
  g_object_class_install_property (object_class, PROP_WAIT_SLICE,
      g_param_spec_uint ("wait-slice", "Wait slice",
          "Microseconds of scheduler slice the streaming thread asks for while it waits for frames (it reads the "
          "stream itself: one wake-up per frame), so a frame's wake-up preempts the publisher on a busy CPU; "
          "Linux 6.12+, stays set on the thread. 0: the thread keeps its slice", 0, 100000, DEFAULT_WAIT_SLICE,
          flags));
  g_object_class_install_property (object_class, PROP_DEFERRED,
      g_param_spec_boolean ("deferred", "Deferred",
          "Subscribe deferred: the publisher sends frames only once its subscribers that are not deferred have "
          "their first frame, or when its producer runs deferred start (for recorders and analysis)", FALSE, flags));
  g_object_class_install_property (object_class, PROP_STATS,
      g_param_spec_boxed ("stats", "Statistics",
          "framebussrc-stats: frames (pushed), zero-copy (wrapping the shared memory), fd-memory (of those, as "
          "fd-backed memory), dmabuf-memory (of those, as GstDmaBufMemory), copied, decoded "
          "(compressed frames), passed-through (compressed frames pushed as they are; also counted as zero-copy "
          "or copied), corrupt (compressed frames skipped), dropped-frame-was-late, "
          "dropped-out-of-buffers, dropped-discontinuity (frames the bus did not deliver), discontinuities "
          "(DISCONT buffers), gaps (GAP events), latency (ns, as the latency query reports). Also posted as an "
          "element message at end of stream",
          GST_TYPE_STRUCTURE, G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));

  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_set_static_metadata (element_class, "FrameBus source", "Source/Video",
      "Subscribes to a FrameBus publisher: raw frames arrive zero-copy (the buffer wraps the shared memory and "
      "releases the frame when freed); compressed frames are decoded, or passed through as "
      "video/x-framebus-compressed", "FrameBus maintainers");

  base_class->negotiate = GST_DEBUG_FUNCPTR (gst_framebus_src_negotiate);
  base_class->decide_allocation = GST_DEBUG_FUNCPTR (gst_framebus_src_decide_allocation);
  base_class->start = GST_DEBUG_FUNCPTR (gst_framebus_src_start);
  base_class->stop = GST_DEBUG_FUNCPTR (gst_framebus_src_stop);
  base_class->unlock = GST_DEBUG_FUNCPTR (gst_framebus_src_unlock);
  base_class->unlock_stop = GST_DEBUG_FUNCPTR (gst_framebus_src_unlock_stop);
  base_class->query = GST_DEBUG_FUNCPTR (gst_framebus_src_query);
  push_class->create = GST_DEBUG_FUNCPTR (gst_framebus_src_create);
  held_frame_quark = g_quark_from_static_string ("framebus-held-frame");
}

static void
gst_framebus_src_init (GstFramebusSrc * self)
{
  self->queue_depth = DEFAULT_QUEUE_DEPTH;
  self->connect_timeout = DEFAULT_CONNECT_TIMEOUT;
  self->reconnect = DEFAULT_RECONNECT;
  self->copy = DEFAULT_COPY;
  self->fd_memory = DEFAULT_FD_MEMORY;
  self->decode_threads = DEFAULT_DECODE_THREADS;
  self->decode = DEFAULT_DECODE;
  self->wait_slice = DEFAULT_WAIT_SLICE;
  self->fd_allocator = gst_fd_allocator_new ();
  self->dmabuf_allocator = gst_dmabuf_allocator_new ();
  self->last_end = GST_CLOCK_TIME_NONE;
  self->pending_gap_start = self->pending_gap_duration = GST_CLOCK_TIME_NONE;
  gst_base_src_set_live (GST_BASE_SRC (self), TRUE);
  gst_base_src_set_format (GST_BASE_SRC (self), GST_FORMAT_TIME);
  gst_pad_add_probe (GST_BASE_SRC_PAD (self), GST_PAD_PROBE_TYPE_BUFFER, gst_framebus_src_gap_probe, self,
      NULL);
  gst_pad_add_probe (GST_BASE_SRC_PAD (self), GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM, gst_framebus_src_eos_probe,
      self, NULL);
}
