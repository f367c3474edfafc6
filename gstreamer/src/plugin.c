/* The framebus GStreamer plugin: framebussink, framebussrc, framebusenc and framebusdec. */
#include "gstframebuscommon.h"
#include "gstframebusdec.h"
#include "gstframebusenc.h"
#include "gstframebussink.h"
#include "gstframebussrc.h"

GST_DEBUG_CATEGORY (gst_framebus_debug);

#ifndef PACKAGE
#define PACKAGE "framebus"
#endif
#ifndef VERSION
#define VERSION "0.2.0"
#endif

static gboolean
plugin_init (GstPlugin * plugin)
{
  GST_DEBUG_CATEGORY_INIT (gst_framebus_debug, "framebus", 0, "FrameBus shared-memory video bus");
  if (fb_abi_version () != FB_ABI_VERSION) {
    GST_ERROR ("libframebus speaks C ABI %u; this plugin was built for %u", fb_abi_version (), FB_ABI_VERSION);
    return FALSE;
  }
  gboolean ok = GST_ELEMENT_REGISTER (framebussink, plugin);
  ok &= GST_ELEMENT_REGISTER (framebussrc, plugin);
  ok &= GST_ELEMENT_REGISTER (framebusenc, plugin);
  ok &= GST_ELEMENT_REGISTER (framebusdec, plugin);
  return ok;
}

GST_PLUGIN_DEFINE (GST_VERSION_MAJOR, GST_VERSION_MINOR, framebus,
    "FrameBus: zero-copy shared-memory video between processes (framebussink publishes, framebussrc subscribes) "
    "and its lossless compressed layout on any transport (framebusenc, framebusdec)",
    plugin_init, VERSION, GST_LICENSE_UNKNOWN, "FrameBus", "FrameBus (gstreamer/ in the FrameBus repository)")
