import ArgumentParser
import Foundation
import FrameBusBench
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// `framebus`: inspect formats, publish and subscribe to frames, and measure the codec and the bus.
@main
struct FrameBusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "framebus",
        abstract: "A compressed shared-memory video frame bus for Linux.",
        subcommands: [
            FormatsCommand.self, BenchCommand.self, PublishCommand.self, SubscribeCommand.self, DemoCommand.self,
            TopCommand.self,
            CaptureCommand.self, RecordCommand.self, PlayCommand.self, ExportCommand.self,
        ]
    )

    /// The commands that run until stopped and stop cleanly on SIGINT or SIGTERM (``StopSignals``).
    static let stoppableCommands: Set<String> = ["publish", "subscribe", "demo", "top", "capture", "record", "play"]

    /// For a command that stops cleanly, blocks the stop signals before anything else runs, so that no thread (this
    /// one, and every thread started later, which inherits the mask) can take one; then parses and runs the command.
    ///
    /// Synchronous on purpose, and without `dispatch_main`: an async `main` starts only once libdispatch has the
    /// main thread, too late to set the mask every thread inherits; and on Linux `dispatch_main` parks the main thread
    /// in `sigsuspend` with an empty mask, where it would take (and die of) the very signals blocked everywhere else.
    /// So the main thread blocks the signals, starts the command as a task, and waits for it. (Nothing in `framebus`
    /// runs on the main actor.)
    static func main() {
        // `bench start`'s consumers measure their own start from here, before the command line is parsed.
        BenchStartCommand.noteMainEntered()
        if let command = CommandLine.arguments.dropFirst().first, stoppableCommands.contains(command) {
            StopSignals.blockAndWatch()
        }
        let finished = DispatchSemaphore(value: 0)
        Task.detached {
            await main(nil)
            finished.signal()
        }
        finished.wait()
    }
}

/// `framebus bench …`: the measurements.
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Measure the codec and the bus on this machine.",
        subcommands: [
            BenchCodecCommand.self, BenchBusCommand.self, BenchStartCommand.self, BenchRecordCommand.self,
            BenchPlotCommand.self,
        ]
    )
}

/// SIGINT and SIGTERM for the long-running commands, without a window in which one is lost.
///
/// For the commands that stop cleanly (`publish`, `subscribe`, `demo`, `top`, `capture`), `main` blocks both in its first
/// statement, before any other thread exists, and starts one thread that takes them with `sigwait(3)`. A signal that
/// arrives before the command has called ``StopSignals/install(_:)`` is kept until then, so none is lost however early
/// it comes. Every other command keeps the default action (the process ends by the signal).
final class StopSignals: Sendable {
    private struct State {
        var installed: StopSignals?
        var pending: Int32?
    }

    private static let state = Mutex(State())

    private let name = Mutex<String?>(nil)
    private let action: @Sendable (String) -> Void

    private init(action: @escaping @Sendable (String) -> Void) { self.action = action }

    /// Blocks SIGINT and SIGTERM in the calling thread (so in every thread it starts) and starts the thread that waits
    /// for them. Call first thing in `main`.
    static func blockAndWatch() {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGINT)
        sigaddset(&set, SIGTERM)
        pthread_sigmask(SIG_BLOCK, &set, nil)
        let watcher = Thread { [set] in
            var waited = set
            while true {
                var number: Int32 = 0
                guard sigwait(&waited, &number) == 0 else { continue }
                deliver(number)
            }
        }
        watcher.name = "framebus.signals"
        watcher.start()
    }

    /// Makes the stop signals stop this command: from now on (and for one that came before), the first one sets
    /// ``received`` and runs `action` on the signal thread. Keep the result for the command's lifetime.
    static func install(_ action: @escaping @Sendable (String) -> Void = { _ in }) -> StopSignals {
        let stopping = StopSignals(action: action)
        let pending = state.withLock { state in
            state.installed = stopping
            defer { state.pending = nil }
            return state.pending
        }
        if let pending { stopping.take(pending) }
        return stopping
    }

    private static func deliver(_ number: Int32) {
        let installed = state.withLock { state in
            if state.installed == nil, state.pending == nil { state.pending = number }
            return state.installed
        }
        installed?.take(number)
    }

    private func take(_ number: Int32) {
        let signalName = number == SIGINT ? "SIGINT" : "SIGTERM"
        let first = name.withLock { name in
            defer { name = name ?? signalName }
            return name == nil
        }
        if first { action(signalName) }
    }

    /// Whether a stop signal arrived.
    var received: Bool { name.withLock { $0 != nil } }

    /// The first stop signal's name.
    var signalName: String? { name.withLock { $0 } }
}
