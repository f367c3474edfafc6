#ifndef GST_FRAMEBUS_ENC_H
#define GST_FRAMEBUS_ENC_H

#include <gst/gst.h>
#include <gst/video/video.h>

G_BEGIN_DECLS

#define GST_TYPE_FRAMEBUS_ENC (gst_framebus_enc_get_type ())
G_DECLARE_FINAL_TYPE (GstFramebusEnc, gst_framebus_enc, GST, FRAMEBUS_ENC, GstVideoEncoder)

GST_ELEMENT_REGISTER_DECLARE (framebusenc);

G_END_DECLS

#endif /* GST_FRAMEBUS_ENC_H */
