#ifndef GST_FRAMEBUS_SRC_H
#define GST_FRAMEBUS_SRC_H

#include <gst/gst.h>
#include <gst/base/gstpushsrc.h>
#include <gst/video/video.h>

G_BEGIN_DECLS

#define GST_TYPE_FRAMEBUS_SRC (gst_framebus_src_get_type ())
G_DECLARE_FINAL_TYPE (GstFramebusSrc, gst_framebus_src, GST, FRAMEBUS_SRC, GstPushSrc)

GST_ELEMENT_REGISTER_DECLARE (framebussrc);

G_END_DECLS

#endif /* GST_FRAMEBUS_SRC_H */
