#ifndef GST_FRAMEBUS_DEC_H
#define GST_FRAMEBUS_DEC_H

#include <gst/gst.h>
#include <gst/video/video.h>

G_BEGIN_DECLS

#define GST_TYPE_FRAMEBUS_DEC (gst_framebus_dec_get_type ())
G_DECLARE_FINAL_TYPE (GstFramebusDec, gst_framebus_dec, GST, FRAMEBUS_DEC, GstVideoDecoder)

GST_ELEMENT_REGISTER_DECLARE (framebusdec);

G_END_DECLS

#endif /* GST_FRAMEBUS_DEC_H */
