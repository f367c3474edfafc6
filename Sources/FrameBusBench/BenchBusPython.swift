import Foundation
import FrameBus

#if canImport(Glibc)
import Glibc
#endif

/// The `framebus-python` rows of `framebus bench bus`: a FrameBus subscriber written in Python, the package as the
/// `--python` interpreter imports it (`python -m framebus._benchpeer CONTROL`), against the same publisher as the
/// Swift rows. It answers the Swift peer's commands on a control socket of its own, so the rows are measured by the
/// same code (`measureDelivery`): a thread of the Python process takes each event with `Subscriber.next_event`,
/// records the frame's one-way latency and releases it. When this build has the C library beside it
/// (`libFrameBusC.so` next to this executable), the child loads that one (`FRAMEBUS_LIBRARY`), so both sides are
/// the same build. When the interpreter cannot import `framebus` the rows are skipped and the reason printed.
enum PythonBusPeer {
    static let transport = "framebus-python"
}

extension BenchBusCommand {
    func measurePython(base: String, cases: [(PixelFormat, Int, Int)], rates: [Int]) -> [BenchResult] {
        let interpreter = Iceoryx2Bench.resolve(python)
        var environment = ProcessInfo.processInfo.environment
        if environment["FRAMEBUS_LIBRARY"] == nil, let own = try? Child.ownExecutable() {
            let library = own.deletingLastPathComponent().appendingPathComponent("libFrameBusC.so")
            if FileManager.default.fileExists(atPath: library.path) { environment["FRAMEBUS_LIBRARY"] = library.path }
        }
        let probe = Process()
        probe.executableURL = interpreter
        probe.arguments = [
            "-c",
            "import framebus, framebus.subscriber as s; print(framebus.__version__, s._choose_engine(None, None))",
        ]
        probe.environment = environment
        let probeOutput = Pipe()
        probe.standardOutput = probeOutput
        probe.standardError = probeOutput
        guard (try? probe.run()) != nil else {
            say("\(PythonBusPeer.transport): skipped — cannot run \(interpreter.path)")
            return []
        }
        probe.waitUntilExit()
        let probeText = String(decoding: probeOutput.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        guard probe.terminationStatus == 0 else {
            let reason = probeText.split(separator: "\n").last.map(String.init) ?? "exit \(probe.terminationStatus)"
            say(
                "\(PythonBusPeer.transport): skipped — \(python) cannot import framebus (pip install ./python): "
                    + reason
            )
            return []
        }
        say(
            "\(PythonBusPeer.transport): framebus \(probeText.trimmingCharacters(in: .whitespacesAndNewlines)) engine, "
                + (environment["FRAMEBUS_LIBRARY"].map { "C library \($0)" } ?? "C library as the package finds it")
        )
        let controlPath = base + "-python-control.sock"
        do {
            let control = try BenchmarkSocket.listen(path: controlPath, stream: false)
            defer { unlink(controlPath) }
            let child = Process()
            child.executableURL = interpreter
            child.arguments = ["-m", "framebus._benchpeer", controlPath]
            child.environment = environment
            try child.run()
            defer {
                if child.isRunning { kill(child.processIdentifier, SIGKILL) }
                child.waitUntilExit()
            }
            let channel = try control.accept(timeoutMilliseconds: 60_000)
            let results = try measureDelivery(
                channel,
                transport: PythonBusPeer.transport,
                delivery: "python",
                base: base,
                cases: cases,
                rates: rates
            )
            try? channel.send(Array("quit".utf8))
            let deadline = Date().addingTimeInterval(10)
            while child.isRunning, Date() < deadline { usleep(10_000) }
            return results
        } catch {
            say("\(PythonBusPeer.transport): failed — \(error)")
            return []
        }
    }
}
