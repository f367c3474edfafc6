import Foundation
import FrameBus
import Testing
import TestSupport

/// `FRAMEBUS_CODEC_KERNELS` (docs/BENCHMARKS.md) chooses the codec's kernel tier for a whole process, read once:
/// `framebus bench codec` says which tier ran and writes it to its JSON; a name not available here is ignored.
@Suite(.timeLimit(.minutes(10))) struct BenchCodecKernelsTests {
    static let image = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Corpus/synthetic/testsrc_1280x720.png")

    /// Runs the bench on one image under `FRAMEBUS_CODEC_KERNELS=name`; the printed line and the JSON's tier.
    static func bench(kernels name: String) async throws -> (String, String?) {
        let json = FileManager.default.temporaryDirectory.appendingPathComponent("fbkernels-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: json) }
        var environment = ProcessInfo.processInfo.environment
        environment["FRAMEBUS_CODEC_KERNELS"] = name
        let command = try await startFramebus(
            [
                "bench", "codec", image.path, "--formats", "420v", "--threads", "1", "--repetitions", "1",
                "--memory-frames", "0", "--json", json.path,
            ],
            environment: environment
        )
        let status = try await command.exitStatus(within: 300)
        #expect(status == 0, "\(command.output)")
        let line = command.output.split(separator: "\n").first { $0.hasPrefix("Codec kernels: ") }.map(String.init)
        let object = try JSONSerialization.jsonObject(with: Data(contentsOf: json)) as? [String: Any]
        return (line ?? command.output, object?["kernels"] as? String)
    }

    @Test(arguments: Kernels.availableTiers)
    func theBenchRunsTheTierTheEnvironmentNames(tier: Kernels.Tier) async throws {
        let (line, json) = try await Self.bench(kernels: tier.rawValue)
        #expect(line.hasPrefix("Codec kernels: \(tier.rawValue) "), "\(line)")
        #expect(json == tier.rawValue)
        // The AVX2 tier's packed8 decoder runs its AVX-512 variant where the processor has VBMI, VBMI2 and GFNI,
        // and its payload checksums theirs where it has AVX-512 F, DQ and VL.
        let packed8 = tier == .avx2 && Kernels.decodesPacked8WithAVX512
        let checksums = tier == .avx2 && Kernels.hashesWithAVX512
        #expect(line.contains("; packed8 decode: AVX-512") == packed8, "\(line)")
        #expect(line.contains("; checksums: AVX-512") == checksums, "\(line)")
        #expect(!checksums || line.hasSuffix("; checksums: AVX-512"), "\(line)")
    }

    @Test func aTierNotAvailableHereIsIgnored() async throws {
        let unavailable = Kernels.Tier.allCases.first { !Kernels.availableTiers.contains($0) }
        let (line, json) = try await Self.bench(kernels: unavailable?.rawValue ?? "no-such-tier")
        #expect(line.hasPrefix("Codec kernels: \(Kernels.availableTiers[0].rawValue) "), "\(line)")
        #expect(json == Kernels.availableTiers[0].rawValue)
    }
}
