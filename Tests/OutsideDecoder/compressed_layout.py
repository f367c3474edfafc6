# A decoder of the compressed surface layout written from docs/COMPRESSED-LAYOUT.md alone (versions 2-8, modes
# 0-13, 18, 22-28 and 34, 38-44, every format; liblz4 and libzstd through ctypes), so that a test can check the document against the codec: it shares no
# code with SurfaceCompression; every LZ4 block checked by §6.8's rule before liblz4 decodes it. Slow (Python loops): for small surfaces.
#
#   python3 Tests/OutsideDecoder/compressed_layout.py SURFACE OUTPUT
#
# writes the decoded image's packed bytes (4:2:0: the Y plane then the CbCr plane, rows without padding; BGRA: the
# pixels) to OUTPUT, and exits non-zero on anything the document says a decoder must refuse.
import ctypes, struct, sys
lz4 = ctypes.CDLL("liblz4.so.1")
zstd = ctypes.CDLL("libzstd.so.1")
zstd.ZSTD_decompress.restype = ctypes.c_size_t
zstd.ZSTD_decompress.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t]
zstd.ZSTD_isError.argtypes = [ctypes.c_size_t]
zstd.ZSTD_findFrameCompressedSize.restype = ctypes.c_size_t
zstd.ZSTD_findFrameCompressedSize.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
zstd.ZSTD_getFrameContentSize.restype = ctypes.c_ulonglong
zstd.ZSTD_getFrameContentSize.argtypes = [ctypes.c_void_p, ctypes.c_size_t]

def zstd_frame(payload, raw):
    # §6.9: one zstd frame (magic 28 B5 2F FD, not skippable), exactly the payload, stating content size `raw`, no
    # dictionary, window at most 2^23; it decodes to exactly `raw` bytes.
    assert payload[:4] == b'\x28\xb5\x2f\xfd'
    fhd = payload[4]
    assert fhd & 3 == 0  # Dictionary_ID_flag 0: no dictionary
    if not fhd & 0x20:  # not single segment: the Window_Descriptor
        wd = payload[5]; log = 10 + (wd >> 3); window = (1 << log) + ((1 << log) >> 3) * (wd & 7)
        assert window <= 1 << 23
    src = ctypes.create_string_buffer(payload, len(payload))
    assert zstd.ZSTD_getFrameContentSize(src, len(payload)) == raw
    n = zstd.ZSTD_findFrameCompressedSize(src, len(payload))
    assert not zstd.ZSTD_isError(n) and n == len(payload)
    out = ctypes.create_string_buffer(max(raw, 1))
    got = zstd.ZSTD_decompress(out, raw, src, len(payload))
    assert not zstd.ZSTD_isError(got) and got == raw
    return out.raw[:raw]
def lz4_check(b, n, d):
    # §6.8: the LZ4 block rule, checked before liblz4 (which accepts some blocks the rule refuses, offset 0 for one).
    i = o = 0
    while True:
        if i >= len(b): raise ValueError("lz4 rule: block ends before a token")
        t = b[i]; i += 1
        run = t >> 4
        if run == 15:
            while True:
                if i >= len(b): raise ValueError("lz4 rule: literal length cut off")
                run += b[i]; i += 1
                if b[i - 1] != 255: break
        if run > len(b) - i: raise ValueError("lz4 rule: literals cut off")
        if i + run == len(b):
            if o + run > n: raise ValueError("lz4 rule: last literals past the capacity")
            return o + run
        if o + run > n - 12 or i + run > len(b) - 8: raise ValueError("lz4 rule: literals too near the end")
        i += run; o += run
        d_ = b[i] | b[i + 1] << 8; i += 2
        length = (t & 15) + 4
        if t & 15 == 15:
            while True:
                if i >= len(b): raise ValueError("lz4 rule: match length cut off")
                length += b[i]; i += 1
                if b[i - 1] != 255: break
            if i > len(b) - 4: raise ValueError("lz4 rule: match length bytes too near the end")
        if d_ == 0 or d_ > o + d: raise ValueError("lz4 rule: offset")
        if o + length > n - 5: raise ValueError("lz4 rule: match too near the end")
        o += length

def lz4_decompress(src, capacity):
    lz4_check(src, capacity, 0)
    out = ctypes.create_string_buffer(max(capacity, 1))
    n = lz4.LZ4_decompress_safe(src, out, len(src), capacity)
    if n < 0: raise ValueError("lz4")
    return out.raw[:n]

def lz4_decompress_dict(src, capacity, dictionary):
    # §6.5: the block decoded as if the dictionary D immediately preceded the output; liblz4's usingDict.
    lz4_check(src, capacity, len(dictionary))
    out = ctypes.create_string_buffer(max(capacity, 1))
    d = ctypes.create_string_buffer(dictionary, max(len(dictionary), 1))
    n = lz4.LZ4_decompress_safe_usingDict(src, out, len(src), capacity, d, len(dictionary))
    if n < 0: raise ValueError("lz4")
    return out.raw[:n]

def coded_block(p, raw):
    # §6.6: rebuild the LZ4 block B of a coded block (literals Huffman-coded, the other bytes verbatim).
    if len(p) < 40: raise ValueError("coded size")
    L, S = struct.unpack_from('<II', p, 0)
    symbols = [s for s in range(256) if (p[8 + s // 8] >> (s % 8)) & 1]
    k = len(symbols)
    header = 40 + (k + 1) // 2
    if len(p) < header: raise ValueError("coded size")
    lengths = {}
    for i, s in enumerate(symbols):
        l = (p[40 + i // 2] >> (4 * (i % 2))) & 15
        if not 1 <= l <= 11: raise ValueError("code length")
        lengths[s] = l
    if k % 2 == 1 and p[40 + k // 2] >> 4: raise ValueError("unused nibble")
    if sum(2 ** (11 - l) for l in lengths.values()) > 2 ** 11: raise ValueError("over-subscribed code")
    if not 1 <= S <= len(p) - header or S + L > raw: raise ValueError("coded size")
    N = len(p) - header - S
    stream = p[header:header + N]; seq = p[header + N:]
    # Canonical code: by length, then symbol; each next code is the previous plus 1, shifted left when longer.
    codes = {}
    code, previous = 0, None
    for s in sorted(lengths, key=lambda s: (lengths[s], s)):
        if previous is not None: code = (code + 1) << (lengths[s] - previous)
        previous = lengths[s]
        codes[(lengths[s], code)] = s
    pos = 0
    literals = []
    for _ in range(L):
        c, l = 0, 0
        while True:
            if pos >= 8 * N: raise ValueError("bit stream too short")
            c = (c << 1) | ((stream[pos // 8] >> (pos % 8)) & 1); pos += 1; l += 1
            if (l, c) in codes: literals.append(codes[(l, c)]); break
            if l == 11: raise ValueError("no code")
    if 8 * N - pos >= 8: raise ValueError("bit stream too long")
    for q in range(pos, 8 * N):
        if (stream[q // 8] >> (q % 8)) & 1: raise ValueError("padding bit")
    out = bytearray(); s = 0; used = 0
    while s < S:
        T = seq[s]; s += 1; out.append(T)
        run = T >> 4
        if run == 15:
            while True:
                if s >= S: raise ValueError("sequences")
                b = seq[s]; s += 1; out.append(b); run += b
                if b != 255: break
        if run > L - used: raise ValueError("literals")
        out += bytes(literals[used:used + run]); used += run
        if s == S: break
        if S - s < 2: raise ValueError("sequences")
        out += seq[s:s + 2]; s += 2
        if T & 15 == 15:
            while True:
                if s >= S: raise ValueError("sequences")
                b = seq[s]; s += 1; out.append(b)
                if b != 255: break
    if used != L: raise ValueError("literals left")
    return bytes(out)

def huffman_stream(p, n):
    # §6.7 (§6.6's code description and bit stream): a 32-byte bitmap, ceil(k/2) length nibbles, then exactly n codes.
    if len(p) < 32: raise ValueError("stream size")
    symbols = [s for s in range(256) if (p[s // 8] >> (s % 8)) & 1]
    k = len(symbols)
    header = 32 + (k + 1) // 2
    if len(p) < header: raise ValueError("stream size")
    lengths = {}
    for i, s in enumerate(symbols):
        l = (p[32 + i // 2] >> (4 * (i % 2))) & 15
        if not 1 <= l <= 11: raise ValueError("code length")
        lengths[s] = l
    if k % 2 == 1 and p[32 + k // 2] >> 4: raise ValueError("unused nibble")
    if sum(2 ** (11 - l) for l in lengths.values()) > 2 ** 11: raise ValueError("over-subscribed code")
    codes = {}
    code, previous = 0, None
    for s in sorted(lengths, key=lambda s: (lengths[s], s)):
        if previous is not None: code = (code + 1) << (lengths[s] - previous)
        previous = lengths[s]
        codes[(lengths[s], code)] = s
    stream = p[header:]; N = len(stream)
    pos = 0; out = []
    for _ in range(n):
        c, l = 0, 0
        while True:
            if pos >= 8 * N: raise ValueError("bit stream too short")
            c = (c << 1) | ((stream[pos // 8] >> (pos % 8)) & 1); pos += 1; l += 1
            if (l, c) in codes: out.append(codes[(l, c)]); break
            if l == 11: raise ValueError("no code")
    if 8 * N - pos >= 8: raise ValueError("bit stream too long")
    for q in range(pos, 8 * N):
        if (stream[q // 8] >> (q % 8)) & 1: raise ValueError("padding bit")
    return out

def sequence_coded_block(p, raw):
    # §6.7: rebuild the LZ4 block B from its five streams (literals, tokens, offset low, offset high, length bytes).
    if len(p) < 37: raise ValueError("size")
    L, Q, E = struct.unpack_from('<III', p, 0)
    sizes = struct.unpack_from('<5I', p, 12)
    kinds = p[32:37]
    if Q < 1 or 37 + sum(sizes) != len(p): raise ValueError("size")
    S = 3 * Q - 2 + E
    if S + L > raw: raise ValueError("size")
    counts = [L, Q, Q - 1, Q - 1, E]
    streams = []; at = 37
    for i in range(5):
        data = p[at:at + sizes[i]]; at += sizes[i]
        if kinds[i] == 0:
            if sizes[i] != counts[i]: raise ValueError("stored size")
            streams.append(list(data))
        elif kinds[i] == 1:
            streams.append(huffman_stream(data, counts[i]))
        else:
            raise ValueError("kind")
    lit, tok, low, high, lens = streams
    out = bytearray(); used = 0; e = 0
    def length_bytes():
        nonlocal e
        total = 0
        while True:
            if e >= E: raise ValueError("length bytes")
            b = lens[e]; e += 1; out.append(b); total += b
            if b != 255: return total
    for j in range(Q):
        T = tok[j]; out.append(T)
        run = T >> 4
        if run == 15: run += length_bytes()
        if run > L - used: raise ValueError("literals")
        out += bytes(lit[used:used + run]); used += run
        if j == Q - 1: break
        out.append(low[j]); out.append(high[j])
        if T & 15 == 15: length_bytes()
    if used != L or e != E: raise ValueError("streams left")
    assert len(out) == S + L
    return bytes(out)

FORMATS = {0x34323076: 'yuv8', 0x34323066: 'yuv8', 0x78343230: 'yuv16', 0x78663230: 'yuv16', 0x42475241: 'bgra'}

def packed(payload, w, h, bits16, ten):
    bpr = (w + 7) // 8; blocks = bpr * h
    nb = (blocks + 1) // 2; bb = (blocks + 7) // 8
    widths = []
    for i in range(blocks):
        n = (payload[i // 2] >> (4 * (i % 2))) & 15
        if bits16 and not ten and n == 15: n = 16
        limit = 8 if not bits16 else (10 if ten else 16)
        if n > limit: raise ValueError("width")
        widths.append(n)
    if len(payload) != nb + bb + sum(widths): raise ValueError("byte count")
    left = [(payload[nb + i // 8] >> (i % 8)) & 1 for i in range(blocks)]
    pos = nb + bb
    mod = 1024 if ten else (65536 if bits16 else 256)
    x = [[0] * w for _ in range(h)]
    val = (lambda s: s >> 6) if ten else (lambda s: s)
    for y in range(h):
        for c in range(bpr):
            b = y * bpr + c; wi = widths[b]
            v = int.from_bytes(payload[pos:pos + wi], 'little'); pos += wi
            for k in range(8):
                col = c * 8 + k
                z = (v >> (k * wi)) & ((1 << wi) - 1)
                bitsz = 16 if bits16 else 8
                d = ((z >> 1) ^ ((0 - (z & 1)) & ((1 << bitsz) - 1)))
                if col >= w: continue
                isleft = left[b] == 1 or y == 0
                if y == 0 and col == 0: p = 0
                elif isleft and col > 0: p = val(x[y][col - 1])
                else: p = val(x[y - 1][col])
                r = (p + d) % mod
                x[y][col] = (r << 6) if ten else r
    return x

def decode(buf):
    magic, version, hb, fourcc, W, H, TW, TH, entries, used = struct.unpack_from('<IHHIIIIIIQ', buf, 0)
    assert magic == 0x43534246 and version in (2, 3, 4, 5, 6, 7, 8) and hb == 64
    kind = FORMATS[fourcc]
    comps = 4 if kind == 'bgra' else 3
    bps = 2 if kind == 'yuv16' else 1
    across = -(-W // TW); down = -(-H // TH)
    assert entries == across * down * comps
    pstart = 64 + 16 * entries
    off = pstart
    planes = {}
    image = {}
    inner = {}  # §6.5: (tile, component) -> inner payload
    for t in range(across * down):
        x0 = (t % across) * TW; y0 = (t // across) * TH
        tw = min(TW, W - x0); th = min(TH, H - y0)
        for c in range(comps):
            size, mode = struct.unpack_from('<II', buf, 64 + 16 * (t * comps + c))
            sub = 1 if (kind == 'bgra' or c == 0) else 2
            w, h = tw // sub, th // sub
            payload = bytes(buf[off:off + size]); off += size
            if mode >= 32:
                # §6.7 (version 7): mode m - 32's LZ4 block, stored as a sequence-coded block.
                assert version >= 7 and mode - 32 in (2, 6, 7, 8, 9, 10, 11, 12)
                payload = sequence_coded_block(payload, w * h * bps)
                mode -= 32
            elif mode >= 16:
                # §6.6 (version 6): mode m - 16's LZ4 block, stored as a coded block.
                assert version >= 6 and mode - 16 in (2, 6, 7, 8, 9, 10, 11, 12)
                payload = coded_block(payload, w * h * bps)
                mode -= 16
            maxmode = {2: 5, 3: 6, 4: 8, 5: 12, 6: 12, 7: 12, 8: 13}[version]
            assert mode <= maxmode
            blocks = ((w + 7) // 8) * h
            if mode == 13:
                # §6.9 (version 8): a zstd frame of the raw samples.
                payload = zstd_frame(payload, w * h * bps)
                mode = 0
            if 9 <= mode <= 12:
                # Table rule 6: never in a tile row that is a multiple of 8.
                assert (t // across) % 8 != 0
                I = inner[(t - across, c)]
                D = I[-65536:]
                if mode == 12:
                    payload = lz4_decompress_dict(payload, w * h * bps, D); assert len(payload) == w * h * bps
                    mode = 0
                else:
                    assert (mode == 9) == (bps == 1)
                    cap = (blocks + 1) // 2 + (blocks + 7) // 8 + (8 if mode == 9 else 16) * blocks
                    payload = lz4_decompress_dict(payload, cap, D)
                    mode = {9: 3, 10: 4, 11: 5}[mode]
                    inner[(t, c)] = payload
            if mode == 0:
                assert len(payload) == w * h * bps
                inner[(t, c)] = payload
                s = [list(struct.unpack_from('<%d%s' % (w, 'H' if bps == 2 else 'B'), payload, r * w * bps)) for r in range(h)]
            elif mode == 1:
                v = struct.unpack_from('<H' if bps == 2 else '<B', payload)[0]; s = [[v] * w for _ in range(h)]
                inner[(t, c)] = payload * (w * h)
            elif mode == 2:
                raw = lz4_decompress(payload, w * h * bps); assert len(raw) == w * h * bps
                inner[(t, c)] = raw
                s = [list(struct.unpack_from('<%d%s' % (w, 'H' if bps == 2 else 'B'), raw, r * w * bps)) for r in range(h)]
            elif mode in (3, 6):
                assert bps == 1
                blocks = ((w + 7) // 8) * h
                if mode == 6: payload = lz4_decompress(payload, (blocks + 1) // 2 + (blocks + 7) // 8 + 8 * blocks)
                inner[(t, c)] = payload
                s = packed(payload, w, h, False, False)
            elif mode in (4, 5, 7, 8):
                assert bps == 2
                blocks = ((w + 7) // 8) * h
                if mode in (7, 8): payload = lz4_decompress(payload, (blocks + 1) // 2 + (blocks + 7) // 8 + 16 * blocks)
                inner[(t, c)] = payload
                s = packed(payload, w, h, True, mode in (4, 7))
            else:
                raise ValueError("mode %d" % mode)
            image[(t, c)] = (x0, y0, s)
    assert off == used
    out = bytearray()
    if kind == 'bgra':
        px = [[None] * W for _ in range(H)]
        for t in range(across * down):
            x0, y0, g = image[(t, 0)]; bg = image[(t, 1)][2]; rg = image[(t, 2)][2]; a = image[(t, 3)][2]
            for yy in range(len(g)):
                for xx in range(len(g[0])):
                    G = g[yy][xx]; px[y0 + yy][x0 + xx] = bytes(((bg[yy][xx] + G) % 256, G, (rg[yy][xx] + G) % 256, a[yy][xx]))
        for row in px: out += b''.join(row)
        return out, version
    Y = [[0] * W for _ in range(H)]; C = [[0] * W for _ in range(H // 2)]
    for t in range(across * down):
        x0, y0, y_ = image[(t, 0)]; cb = image[(t, 1)][2]; cr = image[(t, 2)][2]
        for yy in range(len(y_)):
            for xx in range(len(y_[0])): Y[y0 + yy][x0 + xx] = y_[yy][xx]
        for yy in range(len(cb)):
            for xx in range(len(cb[0])):
                C[y0 // 2 + yy][x0 + 2 * xx] = cb[yy][xx]; C[y0 // 2 + yy][x0 + 2 * xx + 1] = cr[yy][xx]
    f = '<%dH' if bps == 2 else '<%dB'
    for row in Y + C: out += struct.pack(f % W, *row)
    return out, version

if __name__ == '__main__':
    data = open(sys.argv[1], 'rb').read()
    img, version = decode(data)
    open(sys.argv[2], 'wb').write(img)
    sys.stdout.write('version %d, %d bytes\n' % (version, len(img)))
