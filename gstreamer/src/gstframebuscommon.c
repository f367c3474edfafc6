#include "gstframebuscommon.h"

#include <string.h>
#include <time.h>

gchar *
gst_framebus_default_socket_path (const gchar * name, gchar ** why)
{
  gchar path[4096];
  fb_error error;
  fb_status status = fb_default_socket_path (name, path, sizeof path, &error);
  if (status != FB_OK) {
    *why = g_strdup (error.message);
    return NULL;
  }
  *why = NULL;
  return g_strdup (path);
}

guint32
gst_framebus_format_from_video_info (const GstVideoInfo * info)
{
  gboolean full = info->colorimetry.range == GST_VIDEO_COLOR_RANGE_0_255;
  switch (GST_VIDEO_INFO_FORMAT (info)) {
    case GST_VIDEO_FORMAT_NV12:
      return full ? FB_FORMAT_420F : FB_FORMAT_420V;
    case GST_VIDEO_FORMAT_P010_10LE:
      return full ? FB_FORMAT_XF20 : FB_FORMAT_X420;
    case GST_VIDEO_FORMAT_BGRA:
    case GST_VIDEO_FORMAT_BGRx:        /* the same bytes; only framebusenc takes it */
      return FB_FORMAT_BGRA;
    default:
      return 0;
  }
}

GstVideoFormat
gst_framebus_video_format (guint32 fourcc)
{
  switch (fourcc) {
    case FB_FORMAT_420V:
    case FB_FORMAT_420F:
    case FB_FORMAT_COMPRESSED_420V:
    case FB_FORMAT_COMPRESSED_420F:
      return GST_VIDEO_FORMAT_NV12;
    case FB_FORMAT_X420:
    case FB_FORMAT_XF20:
    case FB_FORMAT_COMPRESSED_X420:
    case FB_FORMAT_COMPRESSED_XF20:
      return GST_VIDEO_FORMAT_P010_10LE;
    case FB_FORMAT_BGRA:
    case FB_FORMAT_COMPRESSED_BGRA:
      return GST_VIDEO_FORMAT_BGRA;
    default:
      return GST_VIDEO_FORMAT_UNKNOWN;
  }
}

GstCaps *
gst_framebus_compressed_caps (guint32 compressed, const GstVideoInfo * info)
{
  gchar name[5];
  GstCaps *caps = gst_caps_new_simple (GST_FRAMEBUS_COMPRESSED_MEDIA_TYPE,
      "format", G_TYPE_STRING, gst_framebus_fourcc_string (compressed, name),
      "width", G_TYPE_INT, GST_VIDEO_INFO_WIDTH (info),
      "height", G_TYPE_INT, GST_VIDEO_INFO_HEIGHT (info),
      "framerate", GST_TYPE_FRACTION, GST_VIDEO_INFO_FPS_N (info), GST_VIDEO_INFO_FPS_D (info),
      "pixel-aspect-ratio", GST_TYPE_FRACTION, MAX (GST_VIDEO_INFO_PAR_N (info), 1),
      MAX (GST_VIDEO_INFO_PAR_D (info), 1), NULL);
  gchar *colorimetry = gst_video_colorimetry_to_string (&info->colorimetry);
  if (colorimetry != NULL)
    gst_caps_set_simple (caps, "colorimetry", G_TYPE_STRING, colorimetry, NULL);
  g_free (colorimetry);
  if (GST_VIDEO_INFO_IS_YUV (info) && info->chroma_site != GST_VIDEO_CHROMA_SITE_UNKNOWN) {
    gchar *site = gst_video_chroma_site_to_string (info->chroma_site);
    if (site != NULL)
      gst_caps_set_simple (caps, "chroma-site", G_TYPE_STRING, site, NULL);
    g_free (site);
  }
  return caps;
}

gboolean
gst_framebus_format_is_compressed (guint32 fourcc)
{
  switch (fourcc) {
    case FB_FORMAT_COMPRESSED_420V:
    case FB_FORMAT_COMPRESSED_420F:
    case FB_FORMAT_COMPRESSED_X420:
    case FB_FORMAT_COMPRESSED_XF20:
    case FB_FORMAT_COMPRESSED_BGRA:
      return TRUE;
    default:
      return FALSE;
  }
}

const gchar *
gst_framebus_fourcc_string (guint32 fourcc, gchar buffer[5])
{
  for (int i = 0; i < 4; i++) {
    guint8 c = (guint8) (fourcc >> (24 - 8 * i));
    buffer[i] = g_ascii_isprint (c) ? (gchar) c : '?';
  }
  buffer[4] = '\0';
  return buffer;
}

guint32
gst_framebus_fourcc_parse (const gchar * text)
{
  static const guint32 known[] = {
    FB_FORMAT_420V, FB_FORMAT_420F, FB_FORMAT_X420, FB_FORMAT_XF20, FB_FORMAT_BGRA,
    FB_FORMAT_COMPRESSED_420V, FB_FORMAT_COMPRESSED_420F, FB_FORMAT_COMPRESSED_X420,
    FB_FORMAT_COMPRESSED_XF20, FB_FORMAT_COMPRESSED_BGRA,
  };
  if (text == NULL || strlen (text) != 4)
    return 0;
  guint32 code = FB_FOURCC (text[0], text[1], text[2], text[3]);
  for (gsize i = 0; i < G_N_ELEMENTS (known); i++)
    if (known[i] == code)
      return code;
  return 0;
}

/* Colour codes: docs/PROTOCOL.md section 5.7. Where GStreamer names one set of primaries twice, the
 * FrameBus code follows CoreVideo: "EBU 3213" is the PAL/SECAM primaries (BT.470 B/G), "SMPTE C" is SMPTE 170M,
 * "P3 D65" is SMPTE EG 432. */
fb_colorimetry
gst_framebus_colorimetry_from_info (const GstVideoInfo * info)
{
  fb_colorimetry colour = { 0, 0, 0, 0 };
  const GstVideoColorimetry *c = &info->colorimetry;

  switch (c->primaries) {
    case GST_VIDEO_COLOR_PRIMARIES_BT709:
      colour.primaries = 1;
      break;
    case GST_VIDEO_COLOR_PRIMARIES_BT470BG:
      colour.primaries = 2;
      break;
    case GST_VIDEO_COLOR_PRIMARIES_SMPTE170M:
      colour.primaries = 3;
      break;
    case GST_VIDEO_COLOR_PRIMARIES_BT2020:
      colour.primaries = 4;
      break;
    case GST_VIDEO_COLOR_PRIMARIES_SMPTEEG432:
      colour.primaries = 5;
      break;
    default:
      break;
  }
  switch (c->transfer) {
    case GST_VIDEO_TRANSFER_BT709:
    case GST_VIDEO_TRANSFER_BT601:     /* the same curve */
    case GST_VIDEO_TRANSFER_BT2020_10: /* the same curve, more precision */
    case GST_VIDEO_TRANSFER_BT2020_12:
      colour.transfer = 1;
      break;
    case GST_VIDEO_TRANSFER_SMPTE240M:
      colour.transfer = 2;
      break;
    case GST_VIDEO_TRANSFER_SRGB:
      colour.transfer = 3;
      break;
    case GST_VIDEO_TRANSFER_GAMMA10:
      colour.transfer = 4;
      break;
    case GST_VIDEO_TRANSFER_SMPTE2084:
      colour.transfer = 5;
      break;
    case GST_VIDEO_TRANSFER_ARIB_STD_B67:
      colour.transfer = 6;
      break;
    default:
      break;
  }
  switch (c->matrix) {
    case GST_VIDEO_COLOR_MATRIX_BT709:
      colour.matrix = 1;
      break;
    case GST_VIDEO_COLOR_MATRIX_BT601:
      colour.matrix = 2;
      break;
    case GST_VIDEO_COLOR_MATRIX_SMPTE240M:
      colour.matrix = 3;
      break;
    case GST_VIDEO_COLOR_MATRIX_BT2020:
      colour.matrix = 4;
      break;
    default:
      break;
  }
  if (GST_VIDEO_INFO_IS_YUV (info)) {
    switch ((guint) info->chroma_site) {
      case GST_VIDEO_CHROMA_SITE_H_COSITED:
        colour.chroma_location = 1;     /* left (MPEG-2) */
        break;
      case GST_VIDEO_CHROMA_SITE_NONE:
        colour.chroma_location = 2;     /* center (JPEG) */
        break;
      case GST_VIDEO_CHROMA_SITE_COSITED:
        colour.chroma_location = 3;     /* top-left */
        break;
      case GST_VIDEO_CHROMA_SITE_V_COSITED:
        colour.chroma_location = 4;     /* top */
        break;
      case GST_VIDEO_CHROMA_SITE_DV:
        colour.chroma_location = 7;
        break;
      default:
        break;
    }
  }
  return colour;
}

void
gst_framebus_colorimetry_to_info (fb_colorimetry colour, guint32 fourcc, GstVideoInfo * info)
{
  GstVideoColorimetry *c = &info->colorimetry;
  fb_format_info format;

  if (fb_format_get_info (fourcc, &format, NULL) == FB_OK && GST_VIDEO_INFO_IS_YUV (info))
    c->range = format.is_full_range ? GST_VIDEO_COLOR_RANGE_0_255 : GST_VIDEO_COLOR_RANGE_16_235;

  switch (colour.primaries) {
    case 1:
      c->primaries = GST_VIDEO_COLOR_PRIMARIES_BT709;
      break;
    case 2:
      c->primaries = GST_VIDEO_COLOR_PRIMARIES_BT470BG;
      break;
    case 3:
      c->primaries = GST_VIDEO_COLOR_PRIMARIES_SMPTE170M;
      break;
    case 4:
      c->primaries = GST_VIDEO_COLOR_PRIMARIES_BT2020;
      break;
    case 5:
      c->primaries = GST_VIDEO_COLOR_PRIMARIES_SMPTEEG432;
      break;
    default:
      break;                    /* keep GStreamer's default for the format */
  }
  switch (colour.transfer) {
    case 1:
      c->transfer = GST_VIDEO_TRANSFER_BT709;
      break;
    case 2:
      c->transfer = GST_VIDEO_TRANSFER_SMPTE240M;
      break;
    case 3:
      c->transfer = GST_VIDEO_TRANSFER_SRGB;
      break;
    case 4:
      c->transfer = GST_VIDEO_TRANSFER_GAMMA10;
      break;
    case 5:
      c->transfer = GST_VIDEO_TRANSFER_SMPTE2084;
      break;
    case 6:
      c->transfer = GST_VIDEO_TRANSFER_ARIB_STD_B67;
      break;
    default:
      break;
  }
  /* FrameBus has one code for the BT.709 curve, which BT.2020 shares; GStreamer names it per bit depth. With
   * BT.2020 primaries, spell it as GStreamer's "bt2020" (8-bit) and "bt2020-10" colorimetries do. */
  if (colour.transfer == 1 && c->primaries == GST_VIDEO_COLOR_PRIMARIES_BT2020)
    c->transfer = GST_VIDEO_INFO_COMP_DEPTH (info, 0) > 8 ? GST_VIDEO_TRANSFER_BT2020_10
        : GST_VIDEO_TRANSFER_BT2020_12;
  if (GST_VIDEO_INFO_IS_YUV (info)) {
    switch (colour.matrix) {
      case 1:
        c->matrix = GST_VIDEO_COLOR_MATRIX_BT709;
        break;
      case 2:
        c->matrix = GST_VIDEO_COLOR_MATRIX_BT601;
        break;
      case 3:
        c->matrix = GST_VIDEO_COLOR_MATRIX_SMPTE240M;
        break;
      case 4:
        c->matrix = GST_VIDEO_COLOR_MATRIX_BT2020;
        break;
      default:
        break;
    }
    switch (colour.chroma_location) {
      case 1:
        info->chroma_site = GST_VIDEO_CHROMA_SITE_H_COSITED;
        break;
      case 2:
        info->chroma_site = GST_VIDEO_CHROMA_SITE_NONE;
        break;
      case 3:
        info->chroma_site = GST_VIDEO_CHROMA_SITE_COSITED;
        break;
      case 4:
        info->chroma_site = GST_VIDEO_CHROMA_SITE_V_COSITED;
        break;
      case 7:
        info->chroma_site = GST_VIDEO_CHROMA_SITE_DV;
        break;
      default:
        break;                  /* bottom-left and bottom have no GStreamer name */
    }
  }
}

gint64
gst_framebus_monotonic_ns (void)
{
  struct timespec now;
  clock_gettime (CLOCK_MONOTONIC, &now);
  return (gint64) now.tv_sec * GST_SECOND + now.tv_nsec;
}

gint64
gst_framebus_clock_to_monotonic_offset (GstClock * clock)
{
  if (clock == NULL)
    return 0;
  if (GST_IS_SYSTEM_CLOCK (clock)) {
    GstClockType type = GST_CLOCK_TYPE_REALTIME;
    g_object_get (clock, "clock-type", &type, NULL);
    if (type == GST_CLOCK_TYPE_MONOTONIC)
      return 0;
  }
  /* Another clock (an audio device's, a network clock): measure the offset now; it drifts slowly, which is
   * the clock's own business. */
  GstClockTime clock_now = gst_clock_get_time (clock);
  gint64 monotonic_now = gst_framebus_monotonic_ns ();
  if (!GST_CLOCK_TIME_IS_VALID (clock_now))
    return 0;
  return monotonic_now - (gint64) clock_now;
}

void
gst_framebus_copy_frame_to_planes (const GstVideoFrame * frame, const fb_plane * planes, guint plane_count)
{
  guint n = MIN (plane_count, GST_VIDEO_FRAME_N_PLANES (frame));
  for (guint p = 0; p < n; p++) {
    const guint8 *source = GST_VIDEO_FRAME_PLANE_DATA (frame, p);
    gsize source_stride = GST_VIDEO_FRAME_PLANE_STRIDE (frame, p);
    guint8 *destination = planes[p].data;
    gsize row_bytes = MIN (gst_framebus_plane_row_bytes (&planes[p]), source_stride);
    guint rows = MIN (planes[p].height, (guint32) GST_VIDEO_FRAME_COMP_HEIGHT (frame, p));
    for (guint row = 0; row < rows; row++)
      memcpy (destination + row * planes[p].bytes_per_row, source + row * source_stride, row_bytes);
  }
}

void
gst_framebus_copy_planes_to_frame (const fb_plane * planes, guint plane_count, GstVideoFrame * frame)
{
  guint n = MIN (plane_count, GST_VIDEO_FRAME_N_PLANES (frame));
  for (guint p = 0; p < n; p++) {
    guint8 *destination = GST_VIDEO_FRAME_PLANE_DATA (frame, p);
    gsize destination_stride = GST_VIDEO_FRAME_PLANE_STRIDE (frame, p);
    const guint8 *source = planes[p].data;
    gsize row_bytes = MIN (gst_framebus_plane_row_bytes (&planes[p]), destination_stride);
    guint rows = MIN (planes[p].height, (guint32) GST_VIDEO_FRAME_COMP_HEIGHT (frame, p));
    for (guint row = 0; row < rows; row++)
      memcpy (destination + row * destination_stride, source + row * planes[p].bytes_per_row, row_bytes);
  }
}
