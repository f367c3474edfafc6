/*
 * framebusenc: raw video in, FrameBus's lossless compressed layout out (video/x-framebus-compressed).
 *
 * Each raw frame becomes one buffer holding the compressed surface exactly as docs/COMPRESSED-LAYOUT.md defines
 * it (fb_codec_compress's output): self-describing, so it survives any byte transport (rtpgstpay, gdppay, srtsink,
 * a file) and framebusdec turns it back into the same frame, bit for bit. Every frame is a key frame; timestamps
 * and durations pass through (GstVideoEncoder).
 */
#include "gstframebusenc.h"
#include "gstframebuscommon.h"

#include <stdatomic.h>
#include <string.h>

#define GST_CAT_DEFAULT gst_framebus_debug

enum {
  PROP_0,
  PROP_THREADS,
  PROP_EFFORT,
  PROP_STATS,
};

#define DEFAULT_THREADS 0
#define DEFAULT_EFFORT FB_CODEC_EFFORT_FAST

/* fb_codec_options.effort as a GEnum, so gst-inspect-1.0 lists its values and a launch line can say effort=best. */
#define GST_TYPE_FRAMEBUS_ENC_EFFORT (gst_framebus_enc_effort_get_type ())
static GType
gst_framebus_enc_effort_get_type (void)
{
  static GType type = 0;
  static const GEnumValue values[] = {
    {FB_CODEC_EFFORT_FAST, "Live encoding: the encoder's fast search (the default)", "fast"},
    {FB_CODEC_EFFORT_BEST, "Offline encoding: smaller on screen content, several times slower to encode", "best"},
    {0, NULL, NULL},
  };
  if (g_once_init_enter (&type)) {
    GType registered = g_enum_register_static ("GstFramebusEncEffort", values);
    g_once_init_leave (&type, registered);
  }
  return type;
}

struct _GstFramebusEnc {
  GstVideoEncoder parent;

  /* properties, with the object lock */
  guint threads;
  gint effort;

  /* streaming thread */
  fb_codec *codec;
  GstVideoCodecState *input_state;
  guint32 base_format;
  guint64 maximum_size;
  guint8 *scratch;              /* maximum_size bytes: compressed there, then copied into a buffer of the right size */

  /* counters: streaming thread writes, anyone reads */
  _Atomic guint64 frames, raw_bytes, compressed_bytes;
};

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink", GST_PAD_SINK, GST_PAD_ALWAYS,
    GST_STATIC_CAPS ("video/x-raw, format = (string) { NV12, P010_10LE, BGRA, BGRx }, "
        "width = (int) [ 1, 16384 ], height = (int) [ 1, 16384 ], framerate = (fraction) [ 0, MAX ]"));

static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src", GST_PAD_SRC, GST_PAD_ALWAYS,
    GST_STATIC_CAPS (GST_FRAMEBUS_COMPRESSED_CAPS));

G_DEFINE_TYPE (GstFramebusEnc, gst_framebus_enc, GST_TYPE_VIDEO_ENCODER);
GST_ELEMENT_REGISTER_DEFINE (framebusenc, "framebusenc", GST_RANK_NONE, GST_TYPE_FRAMEBUS_ENC);

static void
counter_add (_Atomic guint64 * counter, guint64 amount)
{
  atomic_fetch_add_explicit (counter, amount, memory_order_relaxed);
}

static GstStructure *
gst_framebus_enc_make_stats (GstFramebusEnc * self)
{
  return gst_structure_new ("framebusenc-stats",
      "frames", G_TYPE_UINT64, (guint64) atomic_load (&self->frames),
      "raw-bytes", G_TYPE_UINT64, (guint64) atomic_load (&self->raw_bytes),
      "compressed-bytes", G_TYPE_UINT64, (guint64) atomic_load (&self->compressed_bytes), NULL);
}

static gboolean
gst_framebus_enc_start (GstVideoEncoder * encoder)
{
  GstFramebusEnc *self = GST_FRAMEBUS_ENC (encoder);
  fb_codec_options options;
  fb_codec_options_init (&options);
  GST_OBJECT_LOCK (self);
  options.thread_count = self->threads;
  options.effort = (uint32_t) self->effort;
  GST_OBJECT_UNLOCK (self);
  fb_error error = { 0 };
  fb_status status = fb_codec_create_with_options (&options, &self->codec, &error);
  if (status != FB_OK) {
    GST_ELEMENT_ERROR (self, LIBRARY, INIT, ("Could not make a FrameBus codec"), ("%s: %s",
            fb_status_name (status), error.message));
    return FALSE;
  }
  return TRUE;
}

static gboolean
gst_framebus_enc_stop (GstVideoEncoder * encoder)
{
  GstFramebusEnc *self = GST_FRAMEBUS_ENC (encoder);
  fb_codec_destroy (self->codec);
  self->codec = NULL;
  g_clear_pointer (&self->input_state, gst_video_codec_state_unref);
  g_clear_pointer (&self->scratch, g_free);
  return TRUE;
}

static gboolean
gst_framebus_enc_set_format (GstVideoEncoder * encoder, GstVideoCodecState * state)
{
  GstFramebusEnc *self = GST_FRAMEBUS_ENC (encoder);
  const GstVideoInfo *info = &state->info;
  guint32 base = gst_framebus_format_from_video_info (info);
  fb_format_info format;
  fb_error error = { 0 };
  guint64 maximum = 0;

  if (base == 0 || fb_format_get_info (base, &format, &error) != FB_OK) {
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, (NULL), ("FrameBus has no format for %" GST_PTR_FORMAT,
            state->caps));
    return FALSE;
  }
  guint width = GST_VIDEO_INFO_WIDTH (info), height = GST_VIDEO_INFO_HEIGHT (info);
  if (format.vertical_subsampling[1] == 2 && (width % 2 != 0 || height % 2 != 0)) {
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, ("4:2:0 frames must have an even width and height"),
        ("%ux%u", width, height));
    return FALSE;
  }
  fb_status status = fb_codec_maximum_compressed_size (base, width, height, &maximum, &error);
  if (status != FB_OK || maximum == 0 || maximum > G_MAXSIZE) {
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, ("FrameBus cannot compress %ux%u frames", width, height),
        ("%s: %s", fb_status_name (status), error.message));
    return FALSE;
  }

  GstCaps *caps = gst_framebus_compressed_caps (format.compressed_format, info);
  GST_INFO_OBJECT (self, "compressing %" GST_PTR_FORMAT " into %" GST_PTR_FORMAT " (at most %" G_GUINT64_FORMAT
      " bytes a frame)", state->caps, caps, maximum);
  GstVideoCodecState *output = gst_video_encoder_set_output_state (encoder, caps, state);
  if (output == NULL)
    return FALSE;
  gst_video_codec_state_unref (output);

  guint8 *scratch = g_try_malloc ((gsize) maximum);
  if (scratch == NULL) {
    GST_ELEMENT_ERROR (self, RESOURCE, NO_SPACE_LEFT, ("Could not allocate %" G_GUINT64_FORMAT " bytes", maximum),
        (NULL));
    return FALSE;
  }
  g_free (self->scratch);
  self->scratch = scratch;
  g_clear_pointer (&self->input_state, gst_video_codec_state_unref);
  self->input_state = gst_video_codec_state_ref (state);
  self->base_format = base;
  self->maximum_size = maximum;
  /* Frames leave as soon as they are compressed: no latency beyond the work itself. */
  gst_video_encoder_set_latency (encoder, 0, 0);
  return TRUE;
}

static GstFlowReturn
gst_framebus_enc_handle_frame (GstVideoEncoder * encoder, GstVideoCodecFrame * frame)
{
  GstFramebusEnc *self = GST_FRAMEBUS_ENC (encoder);
  GstVideoFrame video;

  if (self->input_state == NULL || self->codec == NULL || self->scratch == NULL) {
    gst_video_codec_frame_unref (frame);
    return GST_FLOW_NOT_NEGOTIATED;
  }
  if (!gst_video_frame_map (&video, &self->input_state->info, frame->input_buffer, GST_MAP_READ)) {
    gst_video_codec_frame_unref (frame);
    GST_ELEMENT_ERROR (self, STREAM, ENCODE, ("Could not map an input frame"), (NULL));
    return GST_FLOW_ERROR;
  }
  fb_image image;
  memset (&image, 0, sizeof image);
  image.format = self->base_format;
  image.width = (guint32) GST_VIDEO_FRAME_WIDTH (&video);
  image.height = (guint32) GST_VIDEO_FRAME_HEIGHT (&video);
  for (guint p = 0; p < GST_VIDEO_FRAME_N_PLANES (&video) && p < FB_MAX_PLANES; p++) {
    image.planes[p].data = GST_VIDEO_FRAME_PLANE_DATA (&video, p);
    image.planes[p].bytes_per_row = (guint64) GST_VIDEO_FRAME_PLANE_STRIDE (&video, p);
  }

  /* Compressed into the worst-case scratch, then copied into a buffer of its own size: the copy is of the compressed
   * bytes only, and buffers waiting in queues or payloaders hold no worst-case allocation each. */
  guint64 used = 0;
  fb_error error = { 0 };
  fb_status status = fb_codec_compress (self->codec, &image, self->scratch, self->maximum_size, &used, &error);
  gsize raw = GST_VIDEO_INFO_SIZE (&self->input_state->info);
  gst_video_frame_unmap (&video);
  if (status != FB_OK || used == 0 || used > self->maximum_size) {
    gst_video_codec_frame_unref (frame);
    GST_ELEMENT_ERROR (self, STREAM, ENCODE, ("Could not compress a frame"), ("%s: %s",
            fb_status_name (status), error.message));
    return GST_FLOW_ERROR;
  }
  frame->output_buffer = gst_video_encoder_allocate_output_buffer (encoder, (gsize) used);
  if (frame->output_buffer == NULL) {
    gst_video_codec_frame_unref (frame);
    GST_ELEMENT_ERROR (self, RESOURCE, NO_SPACE_LEFT, ("Could not allocate an output buffer"), (NULL));
    return GST_FLOW_ERROR;
  }
  gst_buffer_fill (frame->output_buffer, 0, self->scratch, (gsize) used);
  GST_VIDEO_CODEC_FRAME_SET_SYNC_POINT (frame);
  counter_add (&self->frames, 1);
  counter_add (&self->raw_bytes, raw);
  counter_add (&self->compressed_bytes, used);
  GST_LOG_OBJECT (self, "frame %u: %" G_GSIZE_FORMAT " -> %" G_GUINT64_FORMAT " bytes", frame->system_frame_number,
      raw, used);
  return gst_video_encoder_finish_frame (encoder, frame);
}

static gboolean
gst_framebus_enc_propose_allocation (GstVideoEncoder * encoder, GstQuery * query)
{
  /* Any strides and plane offsets will do: the codec reads rows where the video meta says they are. */
  gst_query_add_allocation_meta (query, GST_VIDEO_META_API_TYPE, NULL);
  return GST_VIDEO_ENCODER_CLASS (gst_framebus_enc_parent_class)->propose_allocation (encoder, query);
}

static gboolean
gst_framebus_enc_sink_event (GstVideoEncoder * encoder, GstEvent * event)
{
  GstFramebusEnc *self = GST_FRAMEBUS_ENC (encoder);
  if (GST_EVENT_TYPE (event) == GST_EVENT_EOS)
    gst_element_post_message (GST_ELEMENT_CAST (self), gst_message_new_element (GST_OBJECT_CAST (self),
            gst_framebus_enc_make_stats (self)));
  return GST_VIDEO_ENCODER_CLASS (gst_framebus_enc_parent_class)->sink_event (encoder, event);
}

/* ---- GObject ----------------------------------------------------------------------------------------------- */

static void
gst_framebus_enc_set_property (GObject * object, guint id, const GValue * value, GParamSpec * spec)
{
  GstFramebusEnc *self = GST_FRAMEBUS_ENC (object);
  GST_OBJECT_LOCK (self);
  switch (id) {
    case PROP_THREADS:
      self->threads = g_value_get_uint (value);
      break;
    case PROP_EFFORT:
      self->effort = g_value_get_enum (value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, id, spec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_framebus_enc_get_property (GObject * object, guint id, GValue * value, GParamSpec * spec)
{
  GstFramebusEnc *self = GST_FRAMEBUS_ENC (object);
  switch (id) {
    case PROP_THREADS:
      GST_OBJECT_LOCK (self);
      g_value_set_uint (value, self->threads);
      GST_OBJECT_UNLOCK (self);
      break;
    case PROP_EFFORT:
      GST_OBJECT_LOCK (self);
      g_value_set_enum (value, self->effort);
      GST_OBJECT_UNLOCK (self);
      break;
    case PROP_STATS:
      g_value_take_boxed (value, gst_framebus_enc_make_stats (self));
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, id, spec);
      break;
  }
}

static void
gst_framebus_enc_class_init (GstFramebusEncClass * klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);
  GstVideoEncoderClass *encoder_class = GST_VIDEO_ENCODER_CLASS (klass);

  object_class->set_property = gst_framebus_enc_set_property;
  object_class->get_property = gst_framebus_enc_get_property;

  g_object_class_install_property (object_class, PROP_THREADS,
      g_param_spec_uint ("threads", "Threads",
          "Threads that compress one frame, tiles in parallel (0: one per processor; 1: the streaming thread "
          "alone). The output is the same whatever the count", 0, 256, DEFAULT_THREADS,
          G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY));
  g_object_class_install_property (object_class, PROP_EFFORT,
      g_param_spec_enum ("effort", "Effort",
          "How hard the encoder searches: fast (live streams) or best (recording, archiving: smaller on screen "
          "content, several times slower). framebusdec decodes either the same way", GST_TYPE_FRAMEBUS_ENC_EFFORT,
          DEFAULT_EFFORT, G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY));
  g_object_class_install_property (object_class, PROP_STATS,
      g_param_spec_boxed ("stats", "Statistics",
          "framebusenc-stats: frames (compressed), raw-bytes (their raw size), compressed-bytes (what left); "
          "also posted as an element message at end of stream", GST_TYPE_STRUCTURE,
          G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));

  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_set_static_metadata (element_class, "FrameBus lossless encoder", "Codec/Encoder/Video",
      "Compresses raw video (NV12, P010_10LE, BGRA, BGRx) losslessly into FrameBus's compressed layout, one "
      "self-describing buffer per frame (video/x-framebus-compressed, a FrameBus-specific type); framebusdec "
      "restores it bit-exact", "FrameBus maintainers");

  encoder_class->start = GST_DEBUG_FUNCPTR (gst_framebus_enc_start);
  encoder_class->stop = GST_DEBUG_FUNCPTR (gst_framebus_enc_stop);
  encoder_class->set_format = GST_DEBUG_FUNCPTR (gst_framebus_enc_set_format);
  encoder_class->handle_frame = GST_DEBUG_FUNCPTR (gst_framebus_enc_handle_frame);
  encoder_class->propose_allocation = GST_DEBUG_FUNCPTR (gst_framebus_enc_propose_allocation);
  encoder_class->sink_event = GST_DEBUG_FUNCPTR (gst_framebus_enc_sink_event);
}

static void
gst_framebus_enc_init (GstFramebusEnc * self)
{
  self->threads = DEFAULT_THREADS;
  self->effort = DEFAULT_EFFORT;
}
