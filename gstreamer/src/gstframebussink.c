/*
 * framebussink: publishes a pipeline's raw video onto a FrameBus socket.
 *
 * Zero-copy: the sink offers its own buffer pool (GstFramebusPool) in the allocation query. When upstream
 * writes into one of those buffers (a FrameBus surface) and hands it to the sink with nothing else holding it,
 * the sink publishes that surface as it is. Any other buffer is copied once, row by row, into a surface taken
 * from the FrameBus pool. The `stats` property and the messages the sink posts say which happened.
 */
#include "gstframebussink.h"
#include "gstframebuscommon.h"

#include <stdatomic.h>
#include <string.h>

#define GST_CAT_DEFAULT gst_framebus_debug

enum {
  PROP_0,
  PROP_SOCKET_PATH,
  PROP_SOCKET_NAME,
  PROP_COMPRESSION,
  PROP_MIN_BUFFERS,
  PROP_MAX_BUFFERS,
  PROP_MAX_SUBSCRIBERS,
  PROP_SOCKET_MODE,
  PROP_TIMESTAMP_MODE,
  PROP_STATS,
};

#define DEFAULT_COMPRESSION GST_FRAMEBUS_COMPRESSION_OFFER
#define DEFAULT_MIN_BUFFERS 4
#define DEFAULT_MAX_BUFFERS 18
#define DEFAULT_MAX_SUBSCRIBERS 4
#define DEFAULT_SOCKET_MODE 0600
#define DEFAULT_TIMESTAMP_MODE GST_FRAMEBUS_TIMESTAMP_CLOCK
/* How long render waits for a free surface to copy a frame into before it drops the frame. */
#define RENDER_WAIT_NS (20 * GST_MSECOND)

struct _GstFramebusSink {
  GstBaseSink parent;

  /* properties, with the object lock */
  gchar *socket_path;
  gchar *socket_name;
  GstFramebusCompression compression;
  guint min_buffers;
  guint max_buffers;
  guint max_subscribers;
  guint socket_mode;
  GstFramebusTimestampMode timestamp_mode;

  /* streaming state (streaming thread; `handle` is also read by propose_allocation under the object lock) */
  GstFramebusPublisher *handle;
  GstVideoInfo info;
  guint32 fourcc;
  fb_colorimetry colour;
  gboolean published_any;
  gint last_path;               /* -1 none yet, 0 copy, 1 zero-copy: to post a message when it changes */

  /* counters: written by the streaming thread, read by anyone (the stats property) */
  _Atomic guint64 published;
  _Atomic guint64 zero_copy;
  _Atomic guint64 copied;
  _Atomic guint64 dropped;
};

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink", GST_PAD_SINK, GST_PAD_ALWAYS,
    GST_STATIC_CAPS (GST_FRAMEBUS_VIDEO_CAPS));

G_DEFINE_TYPE (GstFramebusSink, gst_framebus_sink, GST_TYPE_BASE_SINK);
GST_ELEMENT_REGISTER_DEFINE (framebussink, "framebussink", GST_RANK_NONE, GST_TYPE_FRAMEBUS_SINK);

static GType
gst_framebus_compression_get_type (void)
{
  static GType type;
  static const GEnumValue values[] = {
    {GST_FRAMEBUS_COMPRESSION_OFF, "Offer only the raw format", "off"},
    {GST_FRAMEBUS_COMPRESSION_OFFER,
        "Offer the raw format and its lossless compressed variant (encoded once per frame, only while a "
          "subscriber takes it)", "offer"},
    {GST_FRAMEBUS_COMPRESSION_ONLY, "Offer only the lossless compressed variant (every frame is encoded)",
        "only"},
    {0, NULL, NULL},
  };
  if (g_once_init_enter (&type))
    g_once_init_leave (&type, g_enum_register_static ("GstFramebusCompression", values));
  return type;
}

static GType
gst_framebus_timestamp_mode_get_type (void)
{
  static GType type;
  static const GEnumValue values[] = {
    {GST_FRAMEBUS_TIMESTAMP_CLOCK,
        "Clock time of the buffer (running time + base time) as CLOCK_MONOTONIC nanoseconds, the bus's "
          "convention for capture times", "clock"},
    {GST_FRAMEBUS_TIMESTAMP_PTS, "The buffer's PTS unchanged, in nanoseconds", "pts"},
    {0, NULL, NULL},
  };
  if (g_once_init_enter (&type))
    g_once_init_leave (&type, g_enum_register_static ("GstFramebusTimestampMode", values));
  return type;
}

/* ---- statistics -------------------------------------------------------------------------------------------- */

static GstStructure *
gst_framebus_sink_make_stats (GstFramebusSink * self, const gchar * name)
{
  gchar fourcc[5];
  GstStructure *stats = gst_structure_new (name,
      "published", G_TYPE_UINT64, (guint64) atomic_load (&self->published),
      "zero-copy", G_TYPE_UINT64, (guint64) atomic_load (&self->zero_copy),
      "copied", G_TYPE_UINT64, (guint64) atomic_load (&self->copied),
      "dropped", G_TYPE_UINT64, (guint64) atomic_load (&self->dropped), NULL);

  GST_OBJECT_LOCK (self);
  GstFramebusPublisher *handle = self->handle ? gst_framebus_publisher_ref (self->handle) : NULL;
  guint32 format = self->fourcc;
  GST_OBJECT_UNLOCK (self);
  if (handle != NULL) {
    fb_publisher_statistics bus = { 0 };
    gboolean have = gst_framebus_publisher_get_statistics (handle, &bus);
    gst_framebus_publisher_unref (handle);
    gst_structure_set (stats, "format", G_TYPE_STRING, gst_framebus_fourcc_string (format, fourcc), NULL);
    if (have)
      gst_structure_set (stats,
          "subscribers", G_TYPE_UINT64, (guint64) bus.subscriber_count,
          "delivered", G_TYPE_UINT64, (guint64) bus.delivered,
          "held", G_TYPE_UINT64, (guint64) bus.held_now,
          "conversions", G_TYPE_UINT64, (guint64) bus.conversions,
          "subscriber-drops", G_TYPE_UINT64, (guint64) (bus.dropped_frame_was_late + bus.dropped_out_of_buffers
              + bus.dropped_discontinuity), NULL);
  }
  return stats;
}

static void
counter_add (_Atomic guint64 * counter)
{
  atomic_fetch_add_explicit (counter, 1, memory_order_relaxed);
}

static void
gst_framebus_sink_note_path (GstFramebusSink * self, gboolean zero_copy, const gchar * reason)
{
  if (self->last_path == (zero_copy ? 1 : 0))
    return;
  self->last_path = zero_copy ? 1 : 0;
  GST_INFO_OBJECT (self, "publishing %s (%s)", zero_copy ? "zero-copy" : "with one copy", reason);
  gst_element_post_message (GST_ELEMENT_CAST (self),
      gst_message_new_element (GST_OBJECT_CAST (self), gst_structure_new ("framebussink-path",
              "zero-copy", G_TYPE_BOOLEAN, zero_copy, "reason", G_TYPE_STRING, reason, NULL)));
}

/* ---- caps and the publisher -------------------------------------------------------------------------------- */

static void
gst_framebus_sink_close (GstFramebusSink * self)
{
  GST_OBJECT_LOCK (self);
  GstFramebusPublisher *handle = self->handle;
  self->handle = NULL;
  GST_OBJECT_UNLOCK (self);
  if (handle != NULL) {
    gst_framebus_publisher_close (handle);
    gst_framebus_publisher_unref (handle);
  }
}

static gboolean
gst_framebus_sink_set_caps (GstBaseSink * sink, GstCaps * caps)
{
  GstFramebusSink *self = GST_FRAMEBUS_SINK (sink);
  GstVideoInfo info;

  if (!gst_video_info_from_caps (&info, caps)) {
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, (NULL), ("caps %" GST_PTR_FORMAT " are not raw video", caps));
    return FALSE;
  }
  guint32 fourcc = gst_framebus_format_from_video_info (&info);
  fb_format_info format;
  if (fourcc == 0 || fb_format_get_info (fourcc, &format, NULL) != FB_OK) {
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, (NULL), ("FrameBus has no format for %" GST_PTR_FORMAT, caps));
    return FALSE;
  }
  guint width = GST_VIDEO_INFO_WIDTH (&info), height = GST_VIDEO_INFO_HEIGHT (&info);
  if (format.horizontal_subsampling[1] == 2 && (width % 2 != 0 || height % 2 != 0)) {
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, ("4:2:0 frames must have an even width and height"),
        ("%ux%u", width, height));
    return FALSE;
  }

  fb_colorimetry colour = gst_framebus_colorimetry_from_info (&info);
  if (self->handle != NULL && self->fourcc == fourcc && GST_VIDEO_INFO_WIDTH (&self->info) == (gint) width
      && GST_VIDEO_INFO_HEIGHT (&self->info) == (gint) height) {
    /* Same surfaces: only the attachments (or the frame rate) changed. */
    self->info = info;
    self->colour = colour;
    return TRUE;
  }

  /* A new format or size needs a new pool, and a subscriber's granted format is fixed per connection: start a
   * new publisher (subscribers of the old one see the end of its stream). */
  gst_framebus_sink_close (self);

  GST_OBJECT_LOCK (self);
  gchar *why = NULL;
  gchar *path = self->socket_path ? g_strdup (self->socket_path) : gst_framebus_default_socket_path (self->socket_name, &why);
  fb_publisher_options options;
  fb_publisher_options_init (&options);
  options.format = fourcc;
  options.width = width;
  options.height = height;
  guint32 offered[2] = { fourcc, format.compressed_format };
  switch (self->compression) {
    case GST_FRAMEBUS_COMPRESSION_OFF:
      options.offered_formats = offered;
      options.offered_format_count = 1;
      break;
    case GST_FRAMEBUS_COMPRESSION_ONLY:
      options.offered_formats = &offered[1];
      options.offered_format_count = 1;
      break;
    default:
      options.offered_formats = offered;
      options.offered_format_count = 2;
      break;
  }
  options.minimum_buffer_count = self->min_buffers;
  options.maximum_buffer_count = MAX (self->max_buffers, self->min_buffers);
  options.maximum_subscribers = self->max_subscribers;
  options.socket_mode = self->socket_mode;
  GST_OBJECT_UNLOCK (self);

  if (path == NULL) {
    GST_ELEMENT_ERROR (self, RESOURCE, NOT_FOUND, ("No socket path: set socket-path"), ("%s", why));
    g_free (why);
    return FALSE;
  }
  options.path = path;

  fb_publisher *publisher = NULL;
  fb_error error = { 0 };
  fb_status status = fb_publisher_create (&options, &publisher, &error);
  if (status != FB_OK) {
    if (status == FB_ERROR_ADDRESS_IN_USE)
      GST_ELEMENT_ERROR (self, RESOURCE, BUSY, ("A FrameBus publisher already listens at %s", path),
          ("%s", error.message));
    else
      GST_ELEMENT_ERROR (self, RESOURCE, OPEN_WRITE, ("Could not publish at %s", path),
          ("%s: %s", fb_status_name (status), error.message));
    g_free (path);
    return FALSE;
  }
  GST_INFO_OBJECT (self, "publishing %ux%u %s at %s", width, height,
      gst_framebus_fourcc_string (fourcc, (gchar[5]) { 0 }), path);
  g_free (path);

  GstFramebusPublisher *handle = gst_framebus_publisher_new (publisher, &info);
  GST_OBJECT_LOCK (self);
  self->handle = handle;
  self->info = info;
  self->fourcc = fourcc;
  self->colour = colour;
  GST_OBJECT_UNLOCK (self);
  return TRUE;
}

static gboolean
gst_framebus_sink_propose_allocation (GstBaseSink * sink, GstQuery * query)
{
  GstFramebusSink *self = GST_FRAMEBUS_SINK (sink);
  GstCaps *caps = NULL;
  gboolean need_pool = FALSE;
  GstVideoInfo info;

  gst_query_parse_allocation (query, &caps, &need_pool);
  /* Our buffers carry the surfaces' real strides and offsets, and so do copies we read from. */
  gst_query_add_allocation_meta (query, GST_VIDEO_META_API_TYPE, NULL);
  if (!need_pool || caps == NULL || !gst_video_info_from_caps (&info, caps))
    return TRUE;

  GST_OBJECT_LOCK (self);
  GstFramebusPublisher *handle = self->handle ? gst_framebus_publisher_ref (self->handle) : NULL;
  GST_OBJECT_UNLOCK (self);
  if (handle == NULL)
    return TRUE;
  if (GST_VIDEO_INFO_FORMAT (&info) != GST_VIDEO_INFO_FORMAT (&handle->info)
      || GST_VIDEO_INFO_WIDTH (&info) != GST_VIDEO_INFO_WIDTH (&handle->info)
      || GST_VIDEO_INFO_HEIGHT (&info) != GST_VIDEO_INFO_HEIGHT (&handle->info)) {
    gst_framebus_publisher_unref (handle);
    return TRUE;
  }

  /* Learn the surfaces' layout once (one buffer taken and given back unpublished: no sequence number is used). */
  g_mutex_lock (&handle->lock);
  gboolean known = handle->has_layout;
  g_mutex_unlock (&handle->lock);
  if (!known) {
    GstBuffer *probe = NULL;
    fb_error error = { 0 };
    if (gst_framebus_publisher_wrap_new_buffer (handle, &probe, 0, &error) == GST_FLOW_OK)
      gst_buffer_unref (probe);
  }
  gsize size = GST_VIDEO_INFO_SIZE (&info);
  g_mutex_lock (&handle->lock);
  if (handle->has_layout) {
    const fb_buffer_info *layout = &handle->layout;
    guint last = layout->plane_count - 1;
    size = (gsize) (layout->planes[last].data - layout->planes[0].data) + layout->planes[last].byte_count;
  }
  g_mutex_unlock (&handle->lock);

  GstBufferPool *pool = gst_framebus_pool_new (handle);
  GstStructure *config = gst_buffer_pool_get_config (pool);
  gst_buffer_pool_config_set_params (config, caps, size, 0, 0);
  gst_buffer_pool_config_add_option (config, GST_BUFFER_POOL_OPTION_VIDEO_META);
  if (gst_buffer_pool_set_config (pool, config)) {
    gst_query_add_allocation_pool (query, pool, size, 0, 0);
    GST_DEBUG_OBJECT (self, "offering the FrameBus pool (%" G_GSIZE_FORMAT " bytes per buffer)", size);
  }
  gst_object_unref (pool);
  gst_framebus_publisher_unref (handle);
  return TRUE;
}

/* ---- frames ------------------------------------------------------------------------------------------------ */

static fb_publish_info
gst_framebus_sink_publish_info (GstFramebusSink * self, GstBuffer * buffer)
{
  GstBaseSink *sink = GST_BASE_SINK_CAST (self);
  fb_publish_info info;
  memset (&info, 0, sizeof info);

  GstClockTime pts = GST_BUFFER_PTS (buffer);
  if (GST_CLOCK_TIME_IS_VALID (pts)) {
    gint64 nanoseconds = (gint64) pts;
    GST_OBJECT_LOCK (self);
    GstFramebusTimestampMode mode = self->timestamp_mode;
    GST_OBJECT_UNLOCK (self);
    GstClock *clock = gst_element_get_clock (GST_ELEMENT_CAST (self));
    if (mode == GST_FRAMEBUS_TIMESTAMP_CLOCK && clock != NULL) {
      GstClockTime running = gst_segment_to_running_time (&sink->segment, GST_FORMAT_TIME, pts);
      if (GST_CLOCK_TIME_IS_VALID (running))
        nanoseconds = (gint64) (running + gst_element_get_base_time (GST_ELEMENT_CAST (self)))
            + gst_framebus_clock_to_monotonic_offset (clock);
    }
    if (clock != NULL)
      gst_object_unref (clock);
    info.presentation_time = (fb_time) {
    nanoseconds, 1000000000, FB_TIME_FLAG_VALID};
  }
  if (GST_BUFFER_DURATION_IS_VALID (buffer) && GST_BUFFER_DURATION (buffer) <= G_MAXINT64)
    info.duration = (fb_time) {
    (gint64) GST_BUFFER_DURATION (buffer), 1000000000, FB_TIME_FLAG_VALID};
  /* The first buffer of every stream is DISCONT in GStreamer; on the bus a first frame is not a discontinuity. */
  if (GST_BUFFER_FLAG_IS_SET (buffer, GST_BUFFER_FLAG_DISCONT) && self->published_any)
    info.flags |= FB_PUBLISH_FLAG_DISCONTINUITY;
  info.colorimetry = self->colour;
  return info;
}

static GstFlowReturn
gst_framebus_sink_publish (GstFramebusSink * self, fb_buffer * buffer, const fb_publish_info * info)
{
  fb_error error = { 0 };
  guint64 sequence = 0;
  fb_status status = gst_framebus_publisher_publish (self->handle, buffer, info, &sequence, &error);
  if (status == FB_ERROR_CLOSED)
    return GST_FLOW_FLUSHING;
  if (status != FB_OK) {
    GST_ELEMENT_ERROR (self, RESOURCE, WRITE, ("Could not publish a frame"), ("%s: %s",
            fb_status_name (status), error.message));
    return GST_FLOW_ERROR;
  }
  GST_LOG_OBJECT (self, "published frame %" G_GUINT64_FORMAT, sequence);
  self->published_any = TRUE;
  counter_add (&self->published);
  return GST_FLOW_OK;
}

static GstFlowReturn
gst_framebus_sink_render (GstBaseSink * sink, GstBuffer * buffer)
{
  GstFramebusSink *self = GST_FRAMEBUS_SINK (sink);

  if (self->handle == NULL) {
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, (NULL), ("a buffer before caps"));
    return GST_FLOW_NOT_NEGOTIATED;
  }
  fb_publish_info info = gst_framebus_sink_publish_info (self, buffer);

  fb_buffer *surface = gst_framebus_publisher_take_buffer (self->handle, buffer);
  if (surface != NULL) {
    gst_framebus_sink_note_path (self, TRUE, "upstream wrote into a FrameBus surface");
    GstFlowReturn result = gst_framebus_sink_publish (self, surface, &info);
    if (result == GST_FLOW_OK)
      counter_add (&self->zero_copy);
    return result;
  }

  fb_buffer_info layout;
  fb_error error = { 0 };
  /* Wait a little for a surface (subscribers releasing frames), never long: a live pipeline must not stall on
   * the bus. Then the frame is lost, and subscribers are told. */
  fb_status status = gst_framebus_publisher_acquire (self->handle, &surface, &layout, RENDER_WAIT_NS, &error);
  if (status == FB_ERROR_OUT_OF_BUFFERS || status == FB_ERROR_TIMED_OUT) {
    GST_DEBUG_OBJECT (self, "every surface is in use; frame dropped");
    gst_framebus_publisher_report_lost_frame (self->handle);
    counter_add (&self->dropped);
    return GST_FLOW_OK;
  }
  if (status == FB_ERROR_CLOSED)
    return GST_FLOW_FLUSHING;
  if (status != FB_OK) {
    GST_ELEMENT_ERROR (self, RESOURCE, WRITE, ("Could not take a FrameBus buffer"), ("%s: %s",
            fb_status_name (status), error.message));
    return GST_FLOW_ERROR;
  }

  GstVideoFrame frame;
  if (!gst_video_frame_map (&frame, &self->info, buffer, GST_MAP_READ)) {
    gst_framebus_publisher_discard (self->handle, surface);
    GST_ELEMENT_ERROR (self, RESOURCE, READ, ("Could not map a buffer"), (NULL));
    return GST_FLOW_ERROR;
  }
  gst_framebus_copy_frame_to_planes (&frame, layout.planes, layout.plane_count);
  gst_video_frame_unmap (&frame);
  gst_framebus_sink_note_path (self, FALSE, "the buffer is not a FrameBus surface, or is shared");
  GstFlowReturn result = gst_framebus_sink_publish (self, surface, &info);
  if (result == GST_FLOW_OK)
    counter_add (&self->copied);
  return result;
}

static gboolean
gst_framebus_sink_event (GstBaseSink * sink, GstEvent * event)
{
  GstFramebusSink *self = GST_FRAMEBUS_SINK (sink);
  if (GST_EVENT_TYPE (event) == GST_EVENT_EOS)
    gst_element_post_message (GST_ELEMENT_CAST (self), gst_message_new_element (GST_OBJECT_CAST (self),
            gst_framebus_sink_make_stats (self, "framebussink-stats")));
  return GST_BASE_SINK_CLASS (gst_framebus_sink_parent_class)->event (sink, event);
}

static gboolean
gst_framebus_sink_start (GstBaseSink * sink)
{
  GstFramebusSink *self = GST_FRAMEBUS_SINK (sink);
  self->published_any = FALSE;
  self->last_path = -1;
  return TRUE;
}

static gboolean
gst_framebus_sink_stop (GstBaseSink * sink)
{
  gst_framebus_sink_close (GST_FRAMEBUS_SINK (sink));
  return TRUE;
}

/* ---- GObject ----------------------------------------------------------------------------------------------- */

static void
gst_framebus_sink_set_property (GObject * object, guint id, const GValue * value, GParamSpec * spec)
{
  GstFramebusSink *self = GST_FRAMEBUS_SINK (object);
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
    case PROP_COMPRESSION:
      self->compression = g_value_get_enum (value);
      break;
    case PROP_MIN_BUFFERS:
      self->min_buffers = g_value_get_uint (value);
      break;
    case PROP_MAX_BUFFERS:
      self->max_buffers = g_value_get_uint (value);
      break;
    case PROP_MAX_SUBSCRIBERS:
      self->max_subscribers = g_value_get_uint (value);
      break;
    case PROP_SOCKET_MODE:
      self->socket_mode = g_value_get_uint (value);
      break;
    case PROP_TIMESTAMP_MODE:
      self->timestamp_mode = g_value_get_enum (value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, id, spec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_framebus_sink_get_property (GObject * object, guint id, GValue * value, GParamSpec * spec)
{
  GstFramebusSink *self = GST_FRAMEBUS_SINK (object);
  if (id == PROP_STATS) {
    g_value_take_boxed (value, gst_framebus_sink_make_stats (self, "framebussink-stats"));
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
    case PROP_COMPRESSION:
      g_value_set_enum (value, self->compression);
      break;
    case PROP_MIN_BUFFERS:
      g_value_set_uint (value, self->min_buffers);
      break;
    case PROP_MAX_BUFFERS:
      g_value_set_uint (value, self->max_buffers);
      break;
    case PROP_MAX_SUBSCRIBERS:
      g_value_set_uint (value, self->max_subscribers);
      break;
    case PROP_SOCKET_MODE:
      g_value_set_uint (value, self->socket_mode);
      break;
    case PROP_TIMESTAMP_MODE:
      g_value_set_enum (value, self->timestamp_mode);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, id, spec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_framebus_sink_finalize (GObject * object)
{
  GstFramebusSink *self = GST_FRAMEBUS_SINK (object);
  gst_framebus_sink_close (self);
  g_free (self->socket_path);
  g_free (self->socket_name);
  G_OBJECT_CLASS (gst_framebus_sink_parent_class)->finalize (object);
}

static void
gst_framebus_sink_class_init (GstFramebusSinkClass * klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);
  GstBaseSinkClass *sink_class = GST_BASE_SINK_CLASS (klass);
  const GParamFlags flags = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY;

  object_class->set_property = gst_framebus_sink_set_property;
  object_class->get_property = gst_framebus_sink_get_property;
  object_class->finalize = gst_framebus_sink_finalize;

  g_object_class_install_property (object_class, PROP_SOCKET_PATH,
      g_param_spec_string ("socket-path", "Socket path",
          "Path of the publisher's SOCK_SEQPACKET socket, created mode socket-mode (a stale socket file is "
          "replaced; a live publisher there is an error). NULL: $XDG_RUNTIME_DIR/framebus.sock, else "
          "${TMPDIR:-/tmp}/framebus-UID/framebus.sock (a private directory)", NULL, flags));
  g_object_class_install_property (object_class, PROP_SOCKET_NAME,
      g_param_spec_string ("socket-name", "Socket name",
          "The stream's name when socket-path is not set: the socket is $XDG_RUNTIME_DIR/NAME.sock, else "
          "${TMPDIR:-/tmp}/framebus-UID/NAME.sock, as `framebus publish --name NAME` and fb_default_socket_path "
          "name it. NULL: framebus", NULL, flags));
  g_object_class_install_property (object_class, PROP_COMPRESSION,
      g_param_spec_enum ("compression", "Compression",
          "Which variants subscribers may take: the raw format, its lossless compressed variant, or both "
          "(the publisher encodes each frame once, only while some subscriber takes the compressed variant)",
          gst_framebus_compression_get_type (), DEFAULT_COMPRESSION, flags));
  g_object_class_install_property (object_class, PROP_MIN_BUFFERS,
      g_param_spec_uint ("min-buffers", "Minimum buffers",
          "Surfaces the FrameBus pool makes up front", 1, 64, DEFAULT_MIN_BUFFERS, flags));
  g_object_class_install_property (object_class, PROP_MAX_BUFFERS,
      g_param_spec_uint ("max-buffers", "Maximum buffers",
          "Most surfaces the FrameBus pool may hold (at least min-buffers). Subscribers together may hold all but "
          "2, each what the holding policy granted it (its depth + 4 while the pool has them, keeping a fair "
          "minimum for subscribers still to come); beyond its grant a subscriber is sent drops (outOfBuffers). When upstream holds the free surfaces, frames are copied or dropped rather than "
          "stalling the pipeline", 1, 1024, DEFAULT_MAX_BUFFERS, flags));
  g_object_class_install_property (object_class, PROP_MAX_SUBSCRIBERS,
      g_param_spec_uint ("max-subscribers", "Maximum subscribers",
          "Most subscribers connected at once (the pool keeps a fair minimum of surfaces for each)", 1, 1024,
          DEFAULT_MAX_SUBSCRIBERS, flags));
  g_object_class_install_property (object_class, PROP_SOCKET_MODE,
      g_param_spec_uint ("socket-mode", "Socket mode",
          "Permission bits of the socket file (0600: only this user; peers are also checked with SO_PEERCRED)",
          0, 0777, DEFAULT_SOCKET_MODE, flags));
  g_object_class_install_property (object_class, PROP_TIMESTAMP_MODE,
      g_param_spec_enum ("timestamp-mode", "Timestamp mode",
          "What a frame's presentation time is: the buffer's clock time on CLOCK_MONOTONIC, or its PTS",
          gst_framebus_timestamp_mode_get_type (), DEFAULT_TIMESTAMP_MODE, flags));
  g_object_class_install_property (object_class, PROP_STATS,
      g_param_spec_boxed ("stats", "Statistics",
          "framebussink-stats: published (frames put on the bus), zero-copy (published in the surface upstream "
          "wrote), copied (copied once into a surface), dropped (not published: no surface was free; reported "
          "to subscribers as outOfBuffers), format, and from the publisher: subscribers, delivered, held, "
          "conversions, subscriber-drops (frames subscribers did not get, by any reason). Also posted as an "
          "element message at end of stream",
          GST_TYPE_STRUCTURE, G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));

  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_set_static_metadata (element_class, "FrameBus sink", "Sink/Video",
      "Publishes raw video (NV12, P010, BGRA) on a FrameBus socket: subscribers in other processes map the "
      "same shared memory; zero-copy when upstream writes into the offered pool",
      "FrameBus maintainers");

  sink_class->set_caps = GST_DEBUG_FUNCPTR (gst_framebus_sink_set_caps);
  sink_class->propose_allocation = GST_DEBUG_FUNCPTR (gst_framebus_sink_propose_allocation);
  sink_class->render = GST_DEBUG_FUNCPTR (gst_framebus_sink_render);
  sink_class->event = GST_DEBUG_FUNCPTR (gst_framebus_sink_event);
  sink_class->start = GST_DEBUG_FUNCPTR (gst_framebus_sink_start);
  sink_class->stop = GST_DEBUG_FUNCPTR (gst_framebus_sink_stop);

  gst_type_mark_as_plugin_api (gst_framebus_compression_get_type (), 0);
  gst_type_mark_as_plugin_api (gst_framebus_timestamp_mode_get_type (), 0);
}

static void
gst_framebus_sink_init (GstFramebusSink * self)
{
  self->compression = DEFAULT_COMPRESSION;
  self->min_buffers = DEFAULT_MIN_BUFFERS;
  self->max_buffers = DEFAULT_MAX_BUFFERS;
  self->max_subscribers = DEFAULT_MAX_SUBSCRIBERS;
  self->socket_mode = DEFAULT_SOCKET_MODE;
  self->timestamp_mode = DEFAULT_TIMESTAMP_MODE;
  self->last_path = -1;
  /* The last sample would keep a reference to a published surface after the FrameBus pool took it back. With
   * it off, a buffer from our pool is referenced only by the sink when it renders, so it can be published as
   * it is. (Turn it on and every frame is copied.) */
  gst_base_sink_set_last_sample_enabled (GST_BASE_SINK (self), FALSE);
}
