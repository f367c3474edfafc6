/* A C subscriber that may decline DMA-BUF surfaces (fb_subscriber_options.accepts_dma_buf): it prints what it gets,
 * so a test can check what the publisher sent it.
 *
 * usage: nodmabuf PATH ACCEPT ACCEPTS_DMA_BUF
 *
 * Prints "connected", then per frame "frame seq=S dma=D hash=H" (D: fb_frame_fds.is_dma_buf; H: FNV-1a 64 of the
 * base-format image's payload rows, plane after plane, hex; a compressed frame is decompressed first), per drop
 * "drop reason=R first=F last=L count=C", and at the end "end status=STATUS". Exits 0 after the end, 3 without one.
 */
#include <unistd.h>

#include "common.h"

/* FNV-1a of the image rows of `info`'s planes, or of its decompressed image for a compressed format. */
static uint64_t frame_hash(fb_codec *codec, const fb_frame_info *info) {
    fb_format_info format;
    CHECK_OK(fb_format_get_info(info->format, &format, &last_error));
    fb_format_info base;
    CHECK_OK(fb_format_get_info(format.base_format, &base, &last_error));
    uint64_t hash = HASH_SEED;
    if (!format.is_compressed) {
        for (uint32_t p = 0; p < info->plane_count; p++) {
            const fb_plane *plane = &info->planes[p];
            hash = hash_rows(hash, plane->data, plane->bytes_per_row,
                             (uint64_t)plane->width * plane->bytes_per_element, plane->height);
        }
        return hash;
    }
    fb_image image;
    memset(&image, 0, sizeof image);
    image.format = base.format;
    image.width = info->width;
    image.height = info->height;
    uint64_t row_bytes[FB_MAX_PLANES] = {0};
    uint32_t rows[FB_MAX_PLANES] = {0};
    for (uint32_t p = 0; p < base.plane_count; p++) {
        row_bytes[p] = (uint64_t)(info->width / base.horizontal_subsampling[p]) * base.bytes_per_element[p];
        rows[p] = info->height / base.vertical_subsampling[p];
        image.planes[p].bytes_per_row = row_bytes[p];
        image.planes[p].data = malloc(row_bytes[p] * rows[p]);
    }
    CHECK_OK(fb_codec_decompress(codec, info->compressed_data, info->bytes_used, &image, &last_error));
    for (uint32_t p = 0; p < base.plane_count; p++) {
        hash = hash_rows(hash, image.planes[p].data, row_bytes[p], row_bytes[p], rows[p]);
        free(image.planes[p].data);
    }
    return hash;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: nodmabuf PATH ACCEPT ACCEPTS_DMA_BUF\n");
        return 64;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    fb_subscriber_options options;
    fb_subscriber_options_init(&options);
    if (options.accepts_dma_buf != 1 || options.wait_slice_us != 0) {
        printf("FAIL defaults accepts_dma_buf=%u wait_slice_us=%u\n", options.accepts_dma_buf, options.wait_slice_us);
        return 1;
    }
    uint32_t accepted = fourcc_from_string(argv[2]);
    options.path = argv[1];
    options.accepted_formats = &accepted;
    options.accepted_format_count = 1;
    options.queue_depth = 16;
    options.connect_timeout_ns = 120ll * 1000000000ll;
    options.accepts_dma_buf = (uint32_t)strtoul(argv[3], NULL, 10);
    fb_codec *codec = NULL;
    CHECK_OK(fb_codec_create(1, &codec, &last_error));
    fb_subscriber *subscriber = NULL;
    CHECK_OK(fb_subscriber_create(&options, &subscriber, &last_error));
    int ended = 0;
    /* Up to 10 minutes without an event: the publisher's process may be slow to start (a TCG guest). */
    for (int polls = 0; polls < 6000 && !ended; polls++) {
        fb_event event;
        fb_status status = fb_subscriber_next_event(subscriber, 100000000, &event, &last_error);
        if (status == FB_ERROR_TIMED_OUT) continue;
        CHECK_OK(status);
        polls = 0;
        switch (event.type) {
        case FB_EVENT_CONNECTED:
            printf("connected\n");
            break;
        case FB_EVENT_FRAME: {
            fb_frame_info info;
            CHECK_OK(fb_frame_get_info(event.frame, &info, &last_error));
            fb_frame_fds fds;
            CHECK_OK(fb_frame_dup_fds(event.frame, &fds, &last_error));
            for (uint32_t i = 0; i < fds.count && i < FB_MAX_PLANES; i++) close(fds.planes[i].fd);
            printf("frame seq=%llu dma=%u hash=%llx\n", (unsigned long long)info.sequence, fds.is_dma_buf,
                   (unsigned long long)frame_hash(codec, &info));
            fb_frame_release(event.frame);
            break;
        }
        case FB_EVENT_DROP:
            printf("drop reason=%u first=%llu last=%llu count=%llu\n", event.drop.reason,
                   (unsigned long long)event.drop.first_sequence, (unsigned long long)event.drop.last_sequence,
                   (unsigned long long)event.drop.frame_count);
            break;
        case FB_EVENT_END:
            printf("end status=%s\n", fb_status_name(event.end_status));
            ended = 1;
            break;
        default:
            break;
        }
    }
    fb_subscriber_destroy(subscriber);
    fb_codec_destroy(codec);
    return ended ? 0 : 3;
}
