#if arch(x86_64)
import CSurfaceCodecKernels
import Glibc
import TestSupport
import Testing

@testable import SurfaceCompression

/// The C kernels' capacities (CSurfaceCodecKernels.h): each kernel is given exactly the capacities the header
/// states, every buffer ending at an inaccessible page, so a read or write past a stated capacity faults; and a
/// capacity one byte short of the statement is refused, with nothing written.
@Suite(.heavyWork, .timeLimit(.minutes(10))) struct KernelCapacityTests {
    /// Geometries with partial blocks, whole groups and rows long enough for the vector loops.
    static let sizes: [(Int, Int)] = [(5, 9), (32, 3), (63, 5), (96, 7), (517, 3)]

    /// The x86-64 tiers this processor runs.
    static var tiers: [Kernels.Tier] { Kernels.availableTiers.filter { $0 != .portable } }

    /// `count` bytes that end where an inaccessible page begins (freed by `release`).
    final class Fenced {
        let mapping: UnsafeMutableRawPointer
        let mappedBytes: Int
        let start: UnsafeMutableRawPointer
        init(count: Int, filling byte: UInt8) {
            let page = Int(sysconf(Int32(_SC_PAGESIZE)))
            let pages = (count + page - 1) / page + 1
            mappedBytes = (pages + 1) * page
            mapping = mmap(nil, mappedBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)!
            mprotect(mapping + pages * page, page, PROT_NONE)
            start = mapping + pages * page - count
            start.initializeMemory(as: UInt8.self, repeating: byte, count: count)
        }
        deinit { munmap(mapping, mappedBytes) }
    }

    /// The packed8 decoder of `tier` with the given capacities; the controls (`controls`, nibbles then bits) are
    /// those of `payload`.
    static func decode8(
        _ tier: Kernels.Tier,
        payload: Fenced,
        count: Int,
        controls: UnsafePointer<UInt8>,
        nibbleCapacity: Int,
        bitCapacity: Int,
        nibbleBytes: Int,
        width: Int,
        height: Int,
        x: UnsafeMutablePointer<UInt8>,
        xCapacity: Int,
        stride: Int,
        position: Int
    ) -> Int32 {
        let p = payload.start.assumingMemoryBound(to: UInt8.self)
        switch tier {
        case .avx2:
            return csck_decode_packed8_avx2(
                p, count, position, controls, nibbleCapacity, controls + nibbleBytes, bitCapacity, width, height, x,
                xCapacity, stride
            )
        default:
            return csck_decode_packed8_sse41(
                p, count, position, controls, nibbleCapacity, controls + nibbleBytes, bitCapacity, width, height, x,
                xCapacity, stride
            )
        }
    }

    /// packed8, every tier: with exactly the stated capacities (controls, plane) fenced by an inaccessible page,
    /// the samples are the portable decoder's; one byte less of any capacity, a stride below the width or a
    /// position past the payload is refused (-1) with the plane untouched.
    @Test(arguments: sizes.indices)
    func packed8KernelsKeepToTheirStatedCapacities(index: Int) throws {
        let (width, height) = Self.sizes[index]
        let blocks = blockCount(width: width, height: height)
        let nibbleBytes = (blocks + 1) / 2
        let bitBytes = (blocks + 7) / 8
        var random = SplitMix(seed: UInt64(4100 + index))
        let payload = arbitraryPackedPayload(blocks: blocks, maximum: 8, widths: .uniform, random: &random)
        let expected = try #require(KernelUnpackingTests.portable(payload, width: width, height: height))
        let shared = Fenced(count: payload.count, filling: 0)
        payload.withUnsafeBytes { shared.start.copyMemory(from: $0.baseAddress!, byteCount: payload.count) }
        // The controls: nibbles, bits, then exactly CSCK_CONTROL_SLACK bytes before the fence.
        let controlCapacity = nibbleBytes + bitBytes + Int(CSCK_CONTROL_SLACK)
        let controls = Fenced(count: controlCapacity, filling: 0)
        payload.withUnsafeBytes { controls.start.copyMemory(from: $0.baseAddress!, byteCount: nibbleBytes + bitBytes) }
        let c = UnsafePointer(controls.start.assumingMemoryBound(to: UInt8.self))
        for tier in Self.tiers {
            for stride in [width, width + 3] {
                let needed = (height - 1) * stride + width
                let plane = Fenced(count: needed, filling: 0xA5)
                let x = plane.start.assumingMemoryBound(to: UInt8.self)
                func run(nibbles: Int = controlCapacity, bits: Int = controlCapacity - nibbleBytes,
                         capacity: Int = needed, stride rowStride: Int = stride,
                         position: Int = nibbleBytes + bitBytes) -> Int32 {
                    Self.decode8(
                        tier, payload: shared, count: payload.count, controls: c, nibbleCapacity: nibbles,
                        bitCapacity: bits, nibbleBytes: nibbleBytes, width: width, height: height, x: x,
                        xCapacity: capacity, stride: rowStride, position: position
                    )
                }
                // Refusals first: the plane keeps its canary.
                #expect(run(nibbles: nibbleBytes + Int(CSCK_CONTROL_SLACK) - 1) == -1)
                #expect(run(bits: bitBytes + Int(CSCK_CONTROL_SLACK) - 1) == -1)
                #expect(run(capacity: needed - 1) == -1)
                #expect(run(capacity: Int.max, stride: width - 1) == -1)
                #expect(run(position: payload.count + 1) == -1)
                #expect(UnsafeRawBufferPointer(start: plane.start, count: needed).allSatisfy { $0 == 0xA5 })
                // Exactly the stated capacities: decodes (a read or write past them would fault).
                #expect(run() == 0, "tier \(tier), stride \(stride)")
                var samples: [UInt8] = []
                for row in 0..<height { samples += UnsafeBufferPointer(start: x + row * stride, count: width) }
                #expect(samples == expected, "tier \(tier), \(width)×\(height), stride \(stride)")
                // Between rows, nothing is written.
                for row in 0..<height - 1 where stride > width {
                    #expect(UnsafeBufferPointer(start: x + row * stride + width, count: stride - width)
                        .allSatisfy { $0 == 0xA5 })
                }
            }
        }
    }

    /// packed10, every tier: exactly (height − 1) × width + ⌈width / 8⌉ × 8 samples fenced by an inaccessible page
    /// decode (the portable decoder's samples); one sample less is refused with nothing written.
    @Test(arguments: sizes.indices)
    func packed10KernelsKeepToTheirStatedCapacities(index: Int) throws {
        let (width, height) = Self.sizes[index]
        let blocks = blockCount(width: width, height: height)
        let nibbleBytes = (blocks + 1) / 2
        let bitBytes = (blocks + 7) / 8
        var random = SplitMix(seed: UInt64(4200 + index))
        let payload = arbitraryPackedPayload(blocks: blocks, maximum: 10, widths: .uniform, random: &random)
        let shared = Fenced(count: payload.count, filling: 0)
        payload.withUnsafeBytes { shared.start.copyMemory(from: $0.baseAddress!, byteCount: payload.count) }
        let controlCapacity = nibbleBytes + bitBytes + Int(CSCK_CONTROL_SLACK)
        let controls = Fenced(count: controlCapacity, filling: 0)
        payload.withUnsafeBytes { controls.start.copyMemory(from: $0.baseAddress!, byteCount: nibbleBytes + bitBytes) }
        let c = UnsafePointer(controls.start.assumingMemoryBound(to: UInt8.self))
        let p = UnsafePointer(shared.start.assumingMemoryBound(to: UInt8.self))
        let needed = (height - 1) * width + (width + 7) / 8 * 8
        var results: [[UInt16]] = []
        for tier in Self.tiers {
            let output = Fenced(count: needed * 2, filling: 0xA5)
            let x = output.start.assumingMemoryBound(to: UInt16.self)
            func run(_ capacity: Int, bits: Int = controlCapacity - nibbleBytes) -> Int32 {
                switch tier {
                case .avx2:
                    csck_decode_packed10_avx2(
                        p, payload.count, nibbleBytes + bitBytes, c, controlCapacity, c + nibbleBytes, bits, width,
                        height, x, capacity
                    )
                default:
                    csck_decode_packed10_sse41(
                        p, payload.count, nibbleBytes + bitBytes, c, controlCapacity, c + nibbleBytes, bits, width,
                        height, x, capacity
                    )
                }
            }
            #expect(run(needed - 1) == -1)
            #expect(run(needed, bits: bitBytes + Int(CSCK_CONTROL_SLACK) - 1) == -1)
            #expect(UnsafeRawBufferPointer(start: output.start, count: needed * 2).allSatisfy { $0 == 0xA5 })
            #expect(run(needed) == 0, "tier \(tier)")
            results.append(Array(UnsafeBufferPointer(start: x, count: width * height)))
        }
        // The portable decoder's samples.
        var expected = [UInt16](repeating: 0, count: needed + 64)
        var residuals = [UInt16](repeating: 0, count: (width + 8) * height + 64)
        var portableControls = [UInt8](repeating: 0, count: controlCapacity)
        let valid = payload.withUnsafeBytes { bytes in
            expected.withUnsafeMutableBufferPointer { out in
                residuals.withUnsafeMutableBufferPointer { r in
                    portableControls.withUnsafeMutableBufferPointer { pc in
                        ComponentCodec.decodePacked16(
                            bytes.baseAddress!, count: bytes.count, tenBit: true, width: width, height: height,
                            controls: pc.baseAddress!, controlsCapacity: pc.count, residuals: r.baseAddress!,
                            into: out.baseAddress!, capacity: out.count, usesVectorKernels: false
                        )
                    }
                }
            }
        }
        #expect(valid)
        for result in results { #expect(result == Array(expected.prefix(width * height))) }
    }

    /// pack8, every tier: an output of exactly the worst case plus CSCK_PACK_SLACK, fenced, takes the blocks;
    /// one byte less is refused (CSCK_PACK_REFUSED) with nothing written.
    @Test func pack8KernelsKeepToTheirStatedCapacity() {
        var random = SplitMix(seed: 4300)
        for blockCount in [1, 3, 8, 37, 200] {
            // Wide residuals (every block at width 8 or near it: the worst case's stores).
            let up = (0..<blockCount * 8).map { _ in UInt8(truncatingIfNeeded: random.next()) | 0x80 }
            let left = (0..<blockCount * 8).map { _ in UInt8(truncatingIfNeeded: random.next()) | 0x40 }
            let needed = (blockCount + 1) / 2 + (blockCount + 7) / 8 + blockCount * 8 + Int(CSCK_PACK_SLACK)
            var sizes: [Int] = []
            for tier in Self.tiers {
                let out = Fenced(count: needed, filling: 0xEE)
                let o = out.start.assumingMemoryBound(to: UInt8.self)
                var zeros = 0
                func run(_ capacity: Int) -> Int {
                    up.withUnsafeBufferPointer { u in
                        left.withUnsafeBufferPointer { l in
                            switch tier {
                            case .avx2: csck_pack8_avx2(u.baseAddress!, l.baseAddress!, blockCount, o, capacity, &zeros)
                            default: csck_pack8_sse41(u.baseAddress!, l.baseAddress!, blockCount, o, capacity, &zeros)
                            }
                        }
                    }
                }
                // CSCK_PACK_REFUSED is SIZE_MAX, -1 as Swift's Int.
                #expect(run(needed - 1) == -1)
                #expect(UnsafeRawBufferPointer(start: out.start, count: needed).allSatisfy { $0 == 0xEE })
                let size = run(needed)
                #expect(size > 0 && size <= needed - Int(CSCK_PACK_SLACK), "tier \(tier), \(blockCount) blocks")
                sizes.append(size)
            }
            #expect(Set(sizes).count <= 1)
        }
    }
}
#endif
