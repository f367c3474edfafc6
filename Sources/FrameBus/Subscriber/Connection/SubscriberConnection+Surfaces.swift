import PixelBuffers
import Surfaces
import SystemPackage

// SURFACE: the announced descriptors imported as a ``Surface`` (seals, sizes and planes checked by the import).

extension SubscriberConnection {
    func importSurface(_ announcement: WireSurface, descriptors: [OwnedDescriptor]) -> Bool {
        // The decoder checked that as many fds came as the SURFACE names; the machine bounded every field, so these
        // conversions cannot trap (u32 → Int on 64-bit; byte counts ≤ 2³²).
        guard descriptors.count == announcement.descriptorByteCounts.count else {
            return perform(
                machine.surfaceImportFailed(surfaceID: announcement.surfaceID, reason: "descriptor count"),
                descriptors: []
            )
        }
        let layout = SurfaceLayout(
            pixelFormat: announcement.pixelFormat,
            width: Int(announcement.width),
            height: Int(announcement.height),
            planes: announcement.planes.map {
                PlaneLayout(
                    offset: Int(clamping: $0.offset),
                    bytesPerRow: Int($0.bytesPerRow),
                    width: Int($0.width),
                    height: Int($0.height),
                    bytesPerElement: Int($0.bytesPerElement)
                )
            },
            allocationSize: Int(clamping: announcement.descriptorByteCounts.reduce(0) { Saturating.add($0, $1) })
        )
        // Ownership of every fd moves into the handle, which closes them if the import fails.
        let fds = descriptors.compactMap { $0.take() }
        let backing: Surface.Backing =
            announcement.backing == .dmaBuf ? .dmaBuf(modifier: announcement.modifier) : .memfd
        let handle = SurfaceHandle(
            id: SurfaceID(rawValue: announcement.surfaceID),
            layout: layout,
            backing: backing,
            descriptors: fds,
            planeDescriptorIndices: announcement.planes.map { Int($0.descriptorIndex) },
            descriptorByteCounts: announcement.descriptorByteCounts.map { Int(clamping: $0) }
        )
        let surface: Surface
        let format: PixelFormat
        do {
            // One memfd, a memfd per plane, or DMA-BUFs (CPU access then bracketed with DMA_BUF_IOCTL_SYNC in
            // lock/unlock): the import checks seals, sizes and every plane against its own descriptor.
            surface = try Surface.importing(handle)
            // Checked once here (the format fits the layout); every frame on it is wrapped without the check.
            format = try PixelBuffer(surface: surface).pixelFormat
        } catch {
            return perform(
                machine.surfaceImportFailed(surfaceID: announcement.surfaceID, reason: "\(error)"),
                descriptors: []
            )
        }
        surfaces[announcement.surfaceID] = ImportedSurface(surface, format: format)
        return true
    }
}
