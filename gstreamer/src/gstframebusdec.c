/*
 * framebusdec: FrameBus's lossless compressed layout (video/x-framebus-compressed) back into raw video, bit-exact.
 *
 * Its input comes from anywhere (the network, a file, another process's shared memory) and is treated as hostile:
 * the frame's own header says its format and size, which must agree with the caps; the codec validates the rest
 * (fb_codec_decompress reads the bytes as hostile memory and answers damage with an error, never a crash). A damaged
 * frame is dropped with a warning (GstVideoDecoder's `max-errors`: by default every damaged frame is dropped and the
 * stream goes on; max-errors=0 makes the first one a GStreamer error).
 */
#include "gstframebusdec.h"
#include "gstframebuscommon.h"

#include <stdatomic.h>
#include <string.h>

#define GST_CAT_DEFAULT gst_framebus_debug

enum {
  PROP_0,
  PROP_THREADS,
  PROP_STATS,
};

#define DEFAULT_THREADS 0
/* docs/COMPRESSED-LAYOUT.md §2: the header starts with the magic "FBSC"; base format, width and height follow. */
#define LAYOUT_MAGIC 0x43534246u
#define LAYOUT_PEEK_BYTES 20

struct _GstFramebusDec {
  GstVideoDecoder parent;

  /* property, with the object lock */
  guint threads;

  /* streaming thread */
  fb_codec *codec;
  GstVideoCodecState *input_state;
  guint32 caps_format;          /* the compressed FourCC the caps name, 0 when they name none */
  guint32 output_base;          /* the base format, width and height of the output state, 0 before the first */
  guint32 output_width, output_height;

  /* counters: streaming thread writes, anyone reads */
  _Atomic guint64 frames, corrupt;
};

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink", GST_PAD_SINK, GST_PAD_ALWAYS,
    GST_STATIC_CAPS (GST_FRAMEBUS_COMPRESSED_CAPS));

static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src", GST_PAD_SRC, GST_PAD_ALWAYS,
    GST_STATIC_CAPS ("video/x-raw, format = (string) { NV12, P010_10LE, BGRA, BGRx }, "
        "width = (int) [ 1, 16384 ], height = (int) [ 1, 16384 ], framerate = (fraction) [ 0, MAX ]"));

G_DEFINE_TYPE (GstFramebusDec, gst_framebus_dec, GST_TYPE_VIDEO_DECODER);
GST_ELEMENT_REGISTER_DEFINE (framebusdec, "framebusdec", GST_RANK_NONE, GST_TYPE_FRAMEBUS_DEC);

static void
counter_add (_Atomic guint64 * counter, guint64 amount)
{
  atomic_fetch_add_explicit (counter, amount, memory_order_relaxed);
}

static GstStructure *
gst_framebus_dec_make_stats (GstFramebusDec * self)
{
  return gst_structure_new ("framebusdec-stats",
      "frames", G_TYPE_UINT64, (guint64) atomic_load (&self->frames),
      "corrupt", G_TYPE_UINT64, (guint64) atomic_load (&self->corrupt), NULL);
}

static guint32
read_le32 (const guint8 * bytes)
{
  return (guint32) bytes[0] | (guint32) bytes[1] << 8 | (guint32) bytes[2] << 16 | (guint32) bytes[3] << 24;
}

static gboolean
gst_framebus_dec_start (GstVideoDecoder * decoder)
{
  GstFramebusDec *self = GST_FRAMEBUS_DEC (decoder);
  GST_OBJECT_LOCK (self);
  guint threads = self->threads;
  GST_OBJECT_UNLOCK (self);
  fb_error error = { 0 };
  fb_status status = fb_codec_create (threads, &self->codec, &error);
  if (status != FB_OK) {
    GST_ELEMENT_ERROR (self, LIBRARY, INIT, ("Could not make a FrameBus codec"), ("%s: %s",
            fb_status_name (status), error.message));
    return FALSE;
  }
  self->output_base = self->output_width = self->output_height = 0;
  return TRUE;
}

static gboolean
gst_framebus_dec_stop (GstVideoDecoder * decoder)
{
  GstFramebusDec *self = GST_FRAMEBUS_DEC (decoder);
  fb_codec_destroy (self->codec);
  self->codec = NULL;
  g_clear_pointer (&self->input_state, gst_video_codec_state_unref);
  return TRUE;
}

static gboolean
gst_framebus_dec_set_format (GstVideoDecoder * decoder, GstVideoCodecState * state)
{
  GstFramebusDec *self = GST_FRAMEBUS_DEC (decoder);
  const GstStructure *structure = gst_caps_get_structure (state->caps, 0);
  const gchar *name = gst_structure_get_string (structure, "format");
  guint32 format = name != NULL ? gst_framebus_fourcc_parse (name) : 0;
  if (name != NULL && !gst_framebus_format_is_compressed (format)) {
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, ("\"%s\" is not a FrameBus compressed format", name),
        ("caps %" GST_PTR_FORMAT, state->caps));
    return FALSE;
  }
  g_clear_pointer (&self->input_state, gst_video_codec_state_unref);
  self->input_state = gst_video_codec_state_ref (state);
  self->caps_format = format;
  self->output_base = 0;        /* the next frame sets the output state again */
  return TRUE;
}

/* The raw format for a base format; a BGRA frame goes out as BGRA unless downstream takes only BGRx. */
static GstVideoFormat
gst_framebus_dec_output_format (GstFramebusDec * self, guint32 base)
{
  GstVideoFormat format = gst_framebus_video_format (base);
  if (format != GST_VIDEO_FORMAT_BGRA)
    return format;
  GstCaps *allowed = gst_pad_peer_query_caps (GST_VIDEO_DECODER_SRC_PAD (self), NULL);
  if (allowed == NULL)
    return format;
  GstCaps *bgra = gst_caps_new_simple ("video/x-raw", "format", G_TYPE_STRING, "BGRA", NULL);
  GstCaps *bgrx = gst_caps_new_simple ("video/x-raw", "format", G_TYPE_STRING, "BGRx", NULL);
  if (!gst_caps_can_intersect (allowed, bgra) && gst_caps_can_intersect (allowed, bgrx))
    format = GST_VIDEO_FORMAT_BGRx;
  gst_caps_unref (bgra);
  gst_caps_unref (bgrx);
  gst_caps_unref (allowed);
  return format;
}

static gboolean
gst_framebus_dec_set_output (GstFramebusDec * self, guint32 base, guint32 width, guint32 height)
{
  GstVideoDecoder *decoder = GST_VIDEO_DECODER (self);
  GstVideoFormat format = gst_framebus_dec_output_format (self, base);
  GstVideoCodecState *state = gst_video_decoder_set_output_state (decoder, format, width, height,
      self->input_state);
  if (state == NULL)
    return FALSE;
  /* The raw frames' colorimetry and siting travel in the compressed caps; the format fixes the range. */
  GstVideoInfo *info = &state->info;
  const GstStructure *structure = gst_caps_get_structure (self->input_state->caps, 0);
  const gchar *colorimetry = gst_structure_get_string (structure, "colorimetry");
  const gchar *site = gst_structure_get_string (structure, "chroma-site");
  GstVideoColorimetry parsed;
  if (colorimetry != NULL && gst_video_colorimetry_from_string (&parsed, colorimetry))
    info->colorimetry = parsed;
  if (site != NULL && GST_VIDEO_INFO_IS_YUV (info))
    info->chroma_site = gst_video_chroma_site_from_string (site);
  fb_format_info described;
  if (GST_VIDEO_INFO_IS_YUV (info) && fb_format_get_info (base, &described, NULL) == FB_OK)
    info->colorimetry.range = described.is_full_range ? GST_VIDEO_COLOR_RANGE_0_255 : GST_VIDEO_COLOR_RANGE_16_235;
  gst_video_codec_state_unref (state);
  if (!gst_video_decoder_negotiate (decoder))
    return FALSE;
  self->output_base = base;
  self->output_width = width;
  self->output_height = height;
  return TRUE;
}

/* What the frame's header says it is, checked against the caps. FALSE (with *why set) when it is no FrameBus
 * compressed frame of the announced format and size. The header is copied once: the bytes may be another process's
 * memory (framebussrc passes the publisher's surface through), and the codec validates them again anyway. */
static gboolean
gst_framebus_dec_peek (GstFramebusDec * self, const GstMapInfo * map, guint32 * base, guint32 * width,
    guint32 * height, gchar ** why)
{
  guint8 header[LAYOUT_PEEK_BYTES];
  fb_format_info format;
  if (map->size < LAYOUT_PEEK_BYTES) {
    *why = g_strdup_printf ("%" G_GSIZE_FORMAT " bytes: shorter than a header", map->size);
    return FALSE;
  }
  memcpy (header, map->data, sizeof header);
  if (read_le32 (header) != LAYOUT_MAGIC) {
    *why = g_strdup_printf ("no FrameBus compressed frame (magic 0x%08x)", read_le32 (header));
    return FALSE;
  }
  *base = read_le32 (header + 8);
  *width = read_le32 (header + 12);
  *height = read_le32 (header + 16);
  if (fb_format_get_info (*base, &format, NULL) != FB_OK || format.is_compressed) {
    gchar name[5];
    *why = g_strdup_printf ("unknown base format 0x%08x (%s)", *base, gst_framebus_fourcc_string (*base, name));
    return FALSE;
  }
  if (*width < 1 || *width > 16384 || *height < 1 || *height > 16384
      || (format.vertical_subsampling[1] == 2 && (*width % 2 != 0 || *height % 2 != 0))) {
    *why = g_strdup_printf ("impossible size %ux%u", *width, *height);
    return FALSE;
  }
  const GstVideoInfo *announced = &self->input_state->info;
  if ((self->caps_format != 0 && format.compressed_format != self->caps_format)
      || (GST_VIDEO_INFO_WIDTH (announced) > 0 && (guint32) GST_VIDEO_INFO_WIDTH (announced) != *width)
      || (GST_VIDEO_INFO_HEIGHT (announced) > 0 && (guint32) GST_VIDEO_INFO_HEIGHT (announced) != *height)) {
    gchar name[5], caps_name[5];
    *why = g_strdup_printf ("the frame is %s %ux%u, the caps say %s %dx%d",
        gst_framebus_fourcc_string (format.compressed_format, name), *width, *height,
        gst_framebus_fourcc_string (self->caps_format, caps_name), GST_VIDEO_INFO_WIDTH (announced),
        GST_VIDEO_INFO_HEIGHT (announced));
    return FALSE;
  }
  return TRUE;
}

static GstFlowReturn
gst_framebus_dec_corrupt (GstFramebusDec * self, GstVideoCodecFrame * frame, const gchar * why)
{
  GstFlowReturn result = GST_FLOW_OK;
  counter_add (&self->corrupt, 1);
  /* Counts towards max-errors: beyond it, an error; below it, the base class only logs, so say it on the bus. */
  GST_VIDEO_DECODER_ERROR (self, 1, STREAM, DECODE, ("A damaged compressed frame was dropped"),
      ("frame %u: %s", frame->system_frame_number, why), result);
  if (result == GST_FLOW_OK)
    GST_ELEMENT_WARNING (self, STREAM, DECODE, ("A damaged compressed frame was dropped"),
        ("frame %u: %s", frame->system_frame_number, why));
  gst_video_decoder_drop_frame (GST_VIDEO_DECODER (self), frame);
  return result;
}

static GstFlowReturn
gst_framebus_dec_handle_frame (GstVideoDecoder * decoder, GstVideoCodecFrame * frame)
{
  GstFramebusDec *self = GST_FRAMEBUS_DEC (decoder);
  GstMapInfo in;
  guint32 base = 0, width = 0, height = 0;
  gchar *why = NULL;

  if (self->input_state == NULL || self->codec == NULL) {
    gst_video_codec_frame_unref (frame);
    return GST_FLOW_NOT_NEGOTIATED;
  }
  if (!gst_buffer_map (frame->input_buffer, &in, GST_MAP_READ)) {
    gst_video_codec_frame_unref (frame);
    GST_ELEMENT_ERROR (self, STREAM, DECODE, ("Could not map an input buffer"), (NULL));
    return GST_FLOW_ERROR;
  }
  if (!gst_framebus_dec_peek (self, &in, &base, &width, &height, &why)) {
    gst_buffer_unmap (frame->input_buffer, &in);
    GstFlowReturn result = gst_framebus_dec_corrupt (self, frame, why);
    g_free (why);
    return result;
  }
  if ((base != self->output_base || width != self->output_width || height != self->output_height)
      && !gst_framebus_dec_set_output (self, base, width, height)) {
    gst_buffer_unmap (frame->input_buffer, &in);
    gst_video_codec_frame_unref (frame);
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, ("Downstream does not take the decoded frames"),
        ("%ux%u", width, height));
    return GST_FLOW_NOT_NEGOTIATED;
  }

  GstFlowReturn result = gst_video_decoder_allocate_output_frame (decoder, frame);
  if (result != GST_FLOW_OK) {
    gst_buffer_unmap (frame->input_buffer, &in);
    gst_video_codec_frame_unref (frame);
    return result;
  }
  GstVideoCodecState *state = gst_video_decoder_get_output_state (decoder);
  GstVideoFrame video;
  gboolean mapped = gst_video_frame_map (&video, &state->info, frame->output_buffer, GST_MAP_WRITE);
  gst_video_codec_state_unref (state);
  if (!mapped) {
    gst_buffer_unmap (frame->input_buffer, &in);
    gst_video_codec_frame_unref (frame);
    GST_ELEMENT_ERROR (self, RESOURCE, WRITE, ("Could not map an output buffer"), (NULL));
    return GST_FLOW_ERROR;
  }
  fb_image image;
  memset (&image, 0, sizeof image);
  image.format = base;
  image.width = width;
  image.height = height;
  for (guint p = 0; p < GST_VIDEO_FRAME_N_PLANES (&video) && p < FB_MAX_PLANES; p++) {
    image.planes[p].data = GST_VIDEO_FRAME_PLANE_DATA (&video, p);
    image.planes[p].bytes_per_row = (guint64) GST_VIDEO_FRAME_PLANE_STRIDE (&video, p);
  }
  fb_error error = { 0 };
  fb_status status = fb_codec_decompress (self->codec, in.data, in.size, &image, &error);
  gst_video_frame_unmap (&video);
  gst_buffer_unmap (frame->input_buffer, &in);

  if (status == FB_ERROR_CORRUPT_DATA || status == FB_ERROR_UNSUPPORTED_VERSION
      || status == FB_ERROR_FORMAT_MISMATCH || status == FB_ERROR_INVALID_ARGUMENT) {
    why = g_strdup_printf ("%s: %s", fb_status_name (status), error.message);
    result = gst_framebus_dec_corrupt (self, frame, why);
    g_free (why);
    return result;
  }
  if (status != FB_OK) {
    gst_video_codec_frame_unref (frame);
    GST_ELEMENT_ERROR (self, STREAM, DECODE, ("Could not decode a frame"), ("%s: %s", fb_status_name (status),
            error.message));
    return GST_FLOW_ERROR;
  }
  counter_add (&self->frames, 1);
  return gst_video_decoder_finish_frame (decoder, frame);
}

static gboolean
gst_framebus_dec_decide_allocation (GstVideoDecoder * decoder, GstQuery * query)
{
  if (!GST_VIDEO_DECODER_CLASS (gst_framebus_dec_parent_class)->decide_allocation (decoder, query))
    return FALSE;
  /* Decoding writes rows wherever the video meta puts them: downstream's pool (framebussink's surfaces, with their
   * padded rows) can be written directly. */
  if (gst_query_get_n_allocation_pools (query) > 0
      && gst_query_find_allocation_meta (query, GST_VIDEO_META_API_TYPE, NULL)) {
    GstBufferPool *pool = NULL;
    guint size = 0, min = 0, max = 0;
    gst_query_parse_nth_allocation_pool (query, 0, &pool, &size, &min, &max);
    if (pool != NULL) {
      GstStructure *config = gst_buffer_pool_get_config (pool);
      if (gst_buffer_pool_has_option (pool, GST_BUFFER_POOL_OPTION_VIDEO_META))
        gst_buffer_pool_config_add_option (config, GST_BUFFER_POOL_OPTION_VIDEO_META);
      if (!gst_buffer_pool_set_config (pool, config))
        GST_DEBUG_OBJECT (decoder, "the pool refused video meta; it keeps its own layout");
      gst_object_unref (pool);
    }
  }
  return TRUE;
}

static gboolean
gst_framebus_dec_sink_event (GstVideoDecoder * decoder, GstEvent * event)
{
  GstFramebusDec *self = GST_FRAMEBUS_DEC (decoder);
  if (GST_EVENT_TYPE (event) == GST_EVENT_EOS)
    gst_element_post_message (GST_ELEMENT_CAST (self), gst_message_new_element (GST_OBJECT_CAST (self),
            gst_framebus_dec_make_stats (self)));
  return GST_VIDEO_DECODER_CLASS (gst_framebus_dec_parent_class)->sink_event (decoder, event);
}

/* ---- GObject ----------------------------------------------------------------------------------------------- */

static void
gst_framebus_dec_set_property (GObject * object, guint id, const GValue * value, GParamSpec * spec)
{
  GstFramebusDec *self = GST_FRAMEBUS_DEC (object);
  GST_OBJECT_LOCK (self);
  switch (id) {
    case PROP_THREADS:
      self->threads = g_value_get_uint (value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, id, spec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_framebus_dec_get_property (GObject * object, guint id, GValue * value, GParamSpec * spec)
{
  GstFramebusDec *self = GST_FRAMEBUS_DEC (object);
  switch (id) {
    case PROP_THREADS:
      GST_OBJECT_LOCK (self);
      g_value_set_uint (value, self->threads);
      GST_OBJECT_UNLOCK (self);
      break;
    case PROP_STATS:
      g_value_take_boxed (value, gst_framebus_dec_make_stats (self));
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, id, spec);
      break;
  }
}

static void
gst_framebus_dec_class_init (GstFramebusDecClass * klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);
  GstVideoDecoderClass *decoder_class = GST_VIDEO_DECODER_CLASS (klass);

  object_class->set_property = gst_framebus_dec_set_property;
  object_class->get_property = gst_framebus_dec_get_property;

  g_object_class_install_property (object_class, PROP_THREADS,
      g_param_spec_uint ("threads", "Threads",
          "Threads that decode one frame, tiles in parallel (0: one per processor; 1: the streaming thread "
          "alone)", 0, 256, DEFAULT_THREADS,
          G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY));
  g_object_class_install_property (object_class, PROP_STATS,
      g_param_spec_boxed ("stats", "Statistics",
          "framebusdec-stats: frames (decoded), corrupt (damaged frames dropped); also posted as an element "
          "message at end of stream", GST_TYPE_STRUCTURE, G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));

  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_set_static_metadata (element_class, "FrameBus lossless decoder", "Codec/Decoder/Video",
      "Decodes FrameBus's compressed layout (video/x-framebus-compressed, from framebusenc or framebussrc) back "
      "into raw video, bit-exact; damaged input is dropped with a warning (max-errors decides when it becomes "
      "an error), never a crash", "FrameBus maintainers");

  decoder_class->start = GST_DEBUG_FUNCPTR (gst_framebus_dec_start);
  decoder_class->stop = GST_DEBUG_FUNCPTR (gst_framebus_dec_stop);
  decoder_class->set_format = GST_DEBUG_FUNCPTR (gst_framebus_dec_set_format);
  decoder_class->handle_frame = GST_DEBUG_FUNCPTR (gst_framebus_dec_handle_frame);
  decoder_class->decide_allocation = GST_DEBUG_FUNCPTR (gst_framebus_dec_decide_allocation);
  decoder_class->sink_event = GST_DEBUG_FUNCPTR (gst_framebus_dec_sink_event);
}

static void
gst_framebus_dec_init (GstFramebusDec * self)
{
  self->threads = DEFAULT_THREADS;
  gst_video_decoder_set_packetized (GST_VIDEO_DECODER (self), TRUE);
  gst_video_decoder_set_needs_format (GST_VIDEO_DECODER (self), TRUE);
}
