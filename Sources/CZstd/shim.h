// libzstd's API, with its static-linking-only part for ZSTD_getFrameHeader (the codec checks a zstd entry's frame
// header before decoding it, COMPRESSED-LAYOUT.md §6.9); libzstd 1.5 exports it from its shared library too.
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>
