// libzstd's API, with its static-linking-only part (ZSTD_initStaticCCtx/DCtx, ZSTD_estimate*, ZSTD_getFrameHeader):
// the codec keeps its contexts in per-worker scratch, so nothing is allocated per frame. libzstd 1.5 exports these
// symbols from its shared library too.
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>
