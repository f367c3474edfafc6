#include "gstframebuspool.h"
#include "gstframebuscommon.h"

#define GST_CAT_DEFAULT gst_framebus_debug

/* ---- the shared publisher ---------------------------------------------------------------------------------- */

GstFramebusPublisher *
gst_framebus_publisher_new (fb_publisher * publisher, const GstVideoInfo * info)
{
  GstFramebusPublisher *handle = g_atomic_rc_box_new0 (GstFramebusPublisher);
  g_rw_lock_init (&handle->lifetime);
  g_mutex_init (&handle->lock);
  handle->publisher = publisher;
  handle->info = *info;
  return handle;
}

GstFramebusPublisher *
gst_framebus_publisher_ref (GstFramebusPublisher * handle)
{
  return g_atomic_rc_box_acquire (handle);
}

static void
publisher_clear (gpointer data)
{
  GstFramebusPublisher *handle = data;
  if (handle->publisher != NULL)
    fb_publisher_destroy (handle->publisher);
  g_mutex_clear (&handle->lock);
  g_rw_lock_clear (&handle->lifetime);
}

void
gst_framebus_publisher_unref (GstFramebusPublisher * handle)
{
  if (handle != NULL)
    g_atomic_rc_box_release_full (handle, publisher_clear);
}

void
gst_framebus_publisher_close (GstFramebusPublisher * handle)
{
  g_rw_lock_writer_lock (&handle->lifetime);
  fb_publisher *publisher = handle->publisher;
  handle->publisher = NULL;
  if (publisher != NULL)
    fb_publisher_destroy (publisher);
  g_rw_lock_writer_unlock (&handle->lifetime);
}

gboolean
gst_framebus_publisher_get_statistics (GstFramebusPublisher * handle, fb_publisher_statistics * stats)
{
  gboolean have = FALSE;
  g_rw_lock_reader_lock (&handle->lifetime);
  if (handle->publisher != NULL)
    have = fb_publisher_get_statistics (handle->publisher, stats, NULL) == FB_OK;
  g_rw_lock_reader_unlock (&handle->lifetime);
  return have;
}

/* ---- wrapped surfaces -------------------------------------------------------------------------------------- */

/* What a wrapped GstMemory owns: the FrameBus buffer until it is published or the memory is freed. */
typedef struct {
  GstFramebusPublisher *handle;
  fb_buffer *buffer;            /* atomic: NULL once taken for publishing */
  gsize offsets[GST_VIDEO_MAX_PLANES];
  gint strides[GST_VIDEO_MAX_PLANES];
  guint plane_count;
} WrappedSurface;

static GQuark
wrapped_surface_quark (void)
{
  static gsize quark;
  if (g_once_init_enter (&quark))
    g_once_init_leave (&quark, g_quark_from_static_string ("GstFramebusWrappedSurface"));
  return (GQuark) quark;
}

static void
wrapped_surface_free (gpointer data)
{
  WrappedSurface *surface = data;
  fb_buffer *buffer = g_atomic_pointer_exchange (&surface->buffer, NULL);
  /* Never published (upstream dropped it, or the sink copied from it): the surface goes back unpublished.
   * Allowed after fb_publisher_destroy too, but not while it runs. */
  if (buffer != NULL) {
    g_rw_lock_reader_lock (&surface->handle->lifetime);
    fb_buffer_discard (buffer);
    g_rw_lock_reader_unlock (&surface->handle->lifetime);
  }
  gst_framebus_publisher_unref (surface->handle);
  g_free (surface);
}

void
gst_framebus_publisher_discard (GstFramebusPublisher * handle, fb_buffer * buffer)
{
  g_rw_lock_reader_lock (&handle->lifetime);
  fb_buffer_discard (buffer);
  g_rw_lock_reader_unlock (&handle->lifetime);
}

GstFlowReturn
gst_framebus_publisher_wrap_new_buffer (GstFramebusPublisher * handle, GstBuffer ** out, gint64 timeout_ns,
    fb_error * error)
{
  fb_buffer *buffer = NULL;
  fb_buffer_info info;
  fb_status status;

  *out = NULL;
  status = gst_framebus_publisher_acquire (handle, &buffer, &info, timeout_ns, error);
  if (status == FB_OK) {
    g_mutex_lock (&handle->lock);
    if (!handle->has_layout) {
      handle->layout = info;
      handle->has_layout = TRUE;
    }
    g_mutex_unlock (&handle->lock);
  }

  if (status == FB_ERROR_TIMED_OUT)
    return GST_FLOW_CUSTOM_SUCCESS;
  if (status == FB_ERROR_OUT_OF_BUFFERS)
    return GST_FLOW_CUSTOM_SUCCESS;
  if (status == FB_ERROR_CLOSED)
    return GST_FLOW_FLUSHING;
  if (status != FB_OK)
    return GST_FLOW_ERROR;

  const GstVideoInfo *video = &handle->info;
  guint plane_count = GST_VIDEO_INFO_N_PLANES (video);
  if (info.plane_count != plane_count || info.width != (guint32) GST_VIDEO_INFO_WIDTH (video)
      || info.height != (guint32) GST_VIDEO_INFO_HEIGHT (video) || plane_count > FB_MAX_PLANES) {
    gst_framebus_publisher_discard (handle, buffer);
    if (error != NULL) {
      error->code = FB_ERROR_INTERNAL;
      error->system_errno = 0;
      g_snprintf (error->message, sizeof error->message, "the pool's buffer is not %ux%u with %u planes",
          GST_VIDEO_INFO_WIDTH (video), GST_VIDEO_INFO_HEIGHT (video), plane_count);
    }
    return GST_FLOW_ERROR;
  }

  /* One memory over every plane: the planes lie in one mapping of one memfd (their pointers are as far apart
   * as their file offsets), so GstVideoMeta can give each plane's offset from the first byte. */
  guint8 *start = info.planes[0].data;
  guint8 *end = info.planes[0].data;
  for (guint p = 0; p < plane_count; p++) {
    if (info.planes[p].data < start)
      start = info.planes[p].data;
    if (info.planes[p].data + info.planes[p].byte_count > end)
      end = info.planes[p].data + info.planes[p].byte_count;
  }
  for (guint p = 1; p < plane_count; p++) {
    if ((gint64) (info.planes[p].data - info.planes[0].data)
        != (gint64) (info.planes[p].offset - info.planes[0].offset)) {
      gst_framebus_publisher_discard (handle, buffer);
      if (error != NULL) {
        error->code = FB_ERROR_INTERNAL;
        error->system_errno = 0;
        g_strlcpy (error->message, "the pool's planes are not in one mapping", sizeof error->message);
      }
      return GST_FLOW_ERROR;
    }
  }

  WrappedSurface *surface = g_new0 (WrappedSurface, 1);
  surface->handle = gst_framebus_publisher_ref (handle);
  surface->buffer = buffer;
  surface->plane_count = plane_count;
  for (guint p = 0; p < plane_count; p++) {
    surface->offsets[p] = (gsize) (info.planes[p].data - start);
    surface->strides[p] = (gint) info.planes[p].bytes_per_row;
  }

  gsize size = (gsize) (end - start);
  GstMemory *memory = gst_memory_new_wrapped (0, start, size, 0, size, surface, wrapped_surface_free);
  gst_mini_object_set_qdata (GST_MINI_OBJECT_CAST (memory), wrapped_surface_quark (), surface, NULL);

  GstBuffer *wrapped = gst_buffer_new ();
  gst_buffer_append_memory (wrapped, memory);
  gst_buffer_add_video_meta_full (wrapped, GST_VIDEO_FRAME_FLAG_NONE, GST_VIDEO_INFO_FORMAT (video),
      GST_VIDEO_INFO_WIDTH (video), GST_VIDEO_INFO_HEIGHT (video), plane_count, surface->offsets,
      surface->strides);
  *out = wrapped;
  return GST_FLOW_OK;
}

fb_buffer *
gst_framebus_publisher_take_buffer (GstFramebusPublisher * handle, GstBuffer * buffer)
{
  if (gst_buffer_n_memory (buffer) != 1)
    return NULL;
  GstMemory *memory = gst_buffer_peek_memory (buffer, 0);
  WrappedSurface *surface = gst_mini_object_get_qdata (GST_MINI_OBJECT_CAST (memory),
      wrapped_surface_quark ());
  if (surface == NULL || surface->handle != handle)
    return NULL;
  /* Someone else could still read or write it (a tee branch, a buffer copy sharing the memory, the sink's
   * last-sample): publishing would hand the surface back to the FrameBus pool while they use it. */
  if (GST_MINI_OBJECT_REFCOUNT_VALUE (buffer) != 1 || GST_MINI_OBJECT_REFCOUNT_VALUE (memory) != 1)
    return NULL;
  if (memory->offset != 0 || memory->size != memory->maxsize)
    return NULL;
  /* Upstream wrote what the video meta says; it must still say our layout. */
  GstVideoMeta *meta = gst_buffer_get_video_meta (buffer);
  if (meta == NULL || meta->n_planes != surface->plane_count)
    return NULL;
  for (guint p = 0; p < surface->plane_count; p++)
    if (meta->offset[p] != surface->offsets[p] || meta->stride[p] != surface->strides[p])
      return NULL;

  return g_atomic_pointer_exchange (&surface->buffer, NULL);
}

fb_status
gst_framebus_publisher_acquire (GstFramebusPublisher * handle, fb_buffer ** out, fb_buffer_info * info,
    gint64 timeout_ns, fb_error * error)
{
  fb_buffer *buffer = NULL;
  fb_status status = FB_ERROR_CLOSED;

  g_rw_lock_reader_lock (&handle->lifetime);
  if (handle->publisher != NULL) {
    status = timeout_ns > 0
        ? fb_publisher_acquire_buffer_timeout (handle->publisher, timeout_ns, &buffer, error)
        : fb_publisher_acquire_buffer (handle->publisher, &buffer, error);
    if (status == FB_OK) {
      status = fb_buffer_get_info (buffer, info, error);
      if (status != FB_OK)
        fb_buffer_discard (buffer);
    }
  }
  g_rw_lock_reader_unlock (&handle->lifetime);
  *out = status == FB_OK ? buffer : NULL;
  return status;
}

fb_status
gst_framebus_publisher_publish (GstFramebusPublisher * handle, fb_buffer * buffer, const fb_publish_info * info,
    guint64 * sequence, fb_error * error)
{
  fb_status status = FB_ERROR_CLOSED;

  g_rw_lock_reader_lock (&handle->lifetime);
  if (handle->publisher != NULL) {
    uint64_t published = 0;
    status = fb_buffer_publish (buffer, info, &published, error);
    if (status == FB_OK && sequence != NULL)
      *sequence = published;
  } else {
    fb_buffer_discard (buffer);
  }
  g_rw_lock_reader_unlock (&handle->lifetime);
  return status;
}

void
gst_framebus_publisher_report_lost_frame (GstFramebusPublisher * handle)
{
  g_rw_lock_reader_lock (&handle->lifetime);
  if (handle->publisher != NULL)
    fb_publisher_report_drops (handle->publisher, FB_DROP_OUT_OF_BUFFERS, 1, NULL, NULL, NULL);
  g_rw_lock_reader_unlock (&handle->lifetime);
}

/* ---- the pool ---------------------------------------------------------------------------------------------- */

struct _GstFramebusPool {
  GstBufferPool parent;
  GstFramebusPublisher *handle;
};

G_DEFINE_TYPE (GstFramebusPool, gst_framebus_pool, GST_TYPE_BUFFER_POOL);

static const gchar **
gst_framebus_pool_get_options (GstBufferPool * pool)
{
  static const gchar *options[] = { GST_BUFFER_POOL_OPTION_VIDEO_META, NULL };
  return options;
}

static gboolean
gst_framebus_pool_set_config (GstBufferPool * pool, GstStructure * config)
{
  GstFramebusPool *self = GST_FRAMEBUS_POOL (pool);
  GstCaps *caps = NULL;
  GstVideoInfo info;

  if (!gst_buffer_pool_config_get_params (config, &caps, NULL, NULL, NULL) || caps == NULL
      || !gst_video_info_from_caps (&info, caps)) {
    GST_WARNING_OBJECT (pool, "configuration without usable video caps");
    return FALSE;
  }
  const GstVideoInfo *ours = &self->handle->info;
  if (GST_VIDEO_INFO_FORMAT (&info) != GST_VIDEO_INFO_FORMAT (ours)
      || GST_VIDEO_INFO_WIDTH (&info) != GST_VIDEO_INFO_WIDTH (ours)
      || GST_VIDEO_INFO_HEIGHT (&info) != GST_VIDEO_INFO_HEIGHT (ours)) {
    GST_WARNING_OBJECT (pool, "caps %" GST_PTR_FORMAT " are not the publisher's", caps);
    return FALSE;
  }
  return GST_BUFFER_POOL_CLASS (gst_framebus_pool_parent_class)->set_config (pool, config);
}

static gboolean
gst_framebus_pool_start (GstBufferPool * pool)
{
  /* Nothing to preallocate: the FrameBus pool made its surfaces already. */
  return TRUE;
}

static gboolean
gst_framebus_pool_stop (GstBufferPool * pool)
{
  return TRUE;
}

/* How long upstream waits for a free surface before it gets a stand-in, and in what slices (flushing ends it). */
#define POOL_WAIT_NS (200 * GST_MSECOND)
#define POOL_WAIT_SLICE_NS (20 * GST_MSECOND)

static GstFlowReturn
gst_framebus_pool_alloc_buffer (GstBufferPool * pool, GstBuffer ** buffer, GstBufferPoolAcquireParams * params)
{
  GstFramebusPool *self = GST_FRAMEBUS_POOL (pool);
  fb_error error = { 0 };
  gboolean dont_wait = params != NULL && (params->flags & GST_BUFFER_POOL_ACQUIRE_FLAG_DONTWAIT);

  GstFlowReturn result = gst_framebus_publisher_wrap_new_buffer (self->handle, buffer, 0, &error);
  /* Surfaces in use are mostly upstream's own buffers still on their way to the sink (in a queue), which the
   * sink publishes and frees in turn; subscribers cannot pin the last two (the library keeps them for the
   * producer). So wait, like any bounded GstBufferPool, but not for ever: an element that keeps many buffers
   * (a decoder's reference frames) would otherwise wait on itself. */
  for (gint64 waited = 0; result == GST_FLOW_CUSTOM_SUCCESS && !dont_wait && waited < (gint64) POOL_WAIT_NS
      && !GST_BUFFER_POOL_IS_FLUSHING (pool); waited += POOL_WAIT_SLICE_NS)
    result = gst_framebus_publisher_wrap_new_buffer (self->handle, buffer, POOL_WAIT_SLICE_NS, &error);

  if (result == GST_FLOW_CUSTOM_SUCCESS) {
    if (dont_wait)
      return GST_FLOW_EOS;      /* GstBufferPool's contract for DONTWAIT */
    if (GST_BUFFER_POOL_IS_FLUSHING (pool))
      return GST_FLOW_FLUSHING;
    /* Still none: hand out ordinary memory with the default layout; the sink copies it into a surface that is
     * free by then, or reports the frame as lost. Upstream never stalls for good. */
    GST_DEBUG_OBJECT (pool, "every surface is in use; handing out a stand-in");
    const GstVideoInfo *info = &self->handle->info;
    GstBuffer *stand_in = gst_buffer_new_allocate (NULL, GST_VIDEO_INFO_SIZE (info), NULL);
    if (stand_in == NULL)
      return GST_FLOW_ERROR;
    gst_buffer_add_video_meta_full (stand_in, GST_VIDEO_FRAME_FLAG_NONE, GST_VIDEO_INFO_FORMAT (info),
        GST_VIDEO_INFO_WIDTH (info), GST_VIDEO_INFO_HEIGHT (info), GST_VIDEO_INFO_N_PLANES (info),
        (gsize *) info->offset, (gint *) info->stride);
    *buffer = stand_in;
    return GST_FLOW_OK;
  }
  if (result == GST_FLOW_ERROR)
    GST_ERROR_OBJECT (pool, "could not take a FrameBus buffer: %s (%s)", error.message,
        fb_status_name (error.code));
  return result;
}

static GstFlowReturn
gst_framebus_pool_acquire_buffer (GstBufferPool * pool, GstBuffer ** buffer,
    GstBufferPoolAcquireParams * params)
{
  if (GST_BUFFER_POOL_IS_FLUSHING (pool))
    return GST_FLOW_FLUSHING;
  return gst_framebus_pool_alloc_buffer (pool, buffer, params);
}

static void
gst_framebus_pool_release_buffer (GstBufferPool * pool, GstBuffer * buffer)
{
  /* Never recycled here: freeing the buffer gives an unpublished surface back to the FrameBus pool. */
  GST_BUFFER_POOL_GET_CLASS (pool)->free_buffer (pool, buffer);
}

static void
gst_framebus_pool_finalize (GObject * object)
{
  GstFramebusPool *self = GST_FRAMEBUS_POOL (object);
  gst_framebus_publisher_unref (self->handle);
  G_OBJECT_CLASS (gst_framebus_pool_parent_class)->finalize (object);
}

static void
gst_framebus_pool_class_init (GstFramebusPoolClass * klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GstBufferPoolClass *pool_class = GST_BUFFER_POOL_CLASS (klass);

  object_class->finalize = gst_framebus_pool_finalize;
  pool_class->get_options = gst_framebus_pool_get_options;
  pool_class->set_config = gst_framebus_pool_set_config;
  pool_class->start = gst_framebus_pool_start;
  pool_class->stop = gst_framebus_pool_stop;
  pool_class->alloc_buffer = gst_framebus_pool_alloc_buffer;
  pool_class->acquire_buffer = gst_framebus_pool_acquire_buffer;
  pool_class->release_buffer = gst_framebus_pool_release_buffer;
}

static void
gst_framebus_pool_init (GstFramebusPool * self)
{
}

GstBufferPool *
gst_framebus_pool_new (GstFramebusPublisher * handle)
{
  GstFramebusPool *self = g_object_new (GST_TYPE_FRAMEBUS_POOL, NULL);
  gst_object_ref_sink (self);
  self->handle = gst_framebus_publisher_ref (handle);
  return GST_BUFFER_POOL_CAST (self);
}
