import PixelBuffers
import SampleBuffers
import SurfaceCompression
import Surfaces

// SURFACE: every announced surface is checked against the session before the IO layer imports it.

extension SubscriberStateMachine {
    mutating func announce(_ surface: WireSurface, _ active: inout Active) -> Action {
        guard surface.surfaceID != 0, active.surfaces[surface.surfaceID] == nil else {
            return fail(.malformedMessage, "SURFACE \(surface.surfaceID) announced while it is live")
        }
        guard active.surfaces.count < active.maximumSurfaces else {
            return fail(.invalidSurface, "more than \(active.maximumSurfaces) surfaces announced")
        }
        guard surface.pixelFormat == active.session.format.fourCC else {
            return fail(.invalidSurface, "SURFACE format differs from the granted \(active.session.format)")
        }
        // The decoder bounded each descriptor to 1…2³² bytes and each plane inside its descriptor.
        guard !surface.descriptorByteCounts.isEmpty,
            surface.descriptorByteCounts.allSatisfy({ $0 > 0 && $0 <= UInt64(SurfaceLayout.maximumAllocationSize) })
        else {
            return fail(.invalidSurface, "SURFACE descriptor sizes \(surface.descriptorByteCounts)")
        }
        if surface.backing == .dmaBuf && !acceptsDMABuf {
            return fail(.invalidSurface, "a DMA-BUF SURFACE, which this subscriber did not accept in its HELLO")
        }
        if surface.backing == .dmaBuf && surface.modifier != WireSurface.linearModifier {
            // We read frames with the CPU, which needs a linear layout.
            return fail(.invalidSurface, "DMA-BUF modifier 0x\(String(surface.modifier, radix: 16)) is not linear")
        }
        if active.session.format.isCompressed {
            // A compressed surface is one memfd allocated for the worst case (every tile raw), so its size
            // bounds what a decoder must allocate for it. A tiny surface that claims a huge image is refused here,
            // before anyone sizes a decode buffer from its width and height. The bound is the smallest worst case
            // of every tile size the codec accepts, so no honest publisher is refused whatever its tiles.
            guard surface.planes.isEmpty, surface.backing == .memfd, surface.descriptorByteCounts.count == 1,
                let needed = try? SurfaceCodec.minimumCompressedByteCount(
                    width: Int(surface.width),
                    height: Int(surface.height),
                    format: active.session.format
                ),
                UInt64(needed) <= surface.descriptorByteCounts[0]
            else {
                return fail(
                    .invalidSurface,
                    "compressed SURFACE of \(surface.width)x\(surface.height) in \(surface.descriptorByteCounts) bytes"
                )
            }
        } else if surface.planes.isEmpty {
            return fail(.invalidSurface, "SURFACE of \(active.session.format) without planes")
        }
        active.surfaces[surface.surfaceID] = SurfaceRecord(
            byteCount: surface.descriptorByteCounts.reduce(0) { Saturating.add($0, $1) },
            pixelFormat: surface.pixelFormat,
            width: surface.width,
            height: surface.height
        )
        return .importSurface(surface)
    }
}
