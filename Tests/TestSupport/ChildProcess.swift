import Foundation
import Glibc
import Synchronization

/// A child process for a test: its standard output (and error) go to a file, so a chatty child never blocks on a full
/// pipe; every wait on it is async and has a time limit; a child still running when its owner goes is killed (and
/// reaped by Foundation's process monitor), so a failed or timed-out test leaves no process behind.
///
/// Every child is started through `setpriv --pdeathsig KILL` from one thread that lives as long as the test process
/// (``Spawner``): the kernel kills the child when that thread ends, so a test runner killed mid-run (a CI timeout,
/// SIGKILL) leaves no `framebus publish` or Python subscriber behind, whatever the child is.
///
/// With `lifeline`, the child's standard input is one end of a socket pair whose other end only this object holds,
/// and `FRAMEBUS_TEST_LIFELINE=stdin` is in its environment: FrameBusTestPeer exits when its standard input reaches end
/// of file, that is when this object goes or the test process dies, however it dies.
public final class ChildProcess: @unchecked Sendable {
    // @unchecked: `process` is configured before `run()` and only read afterwards; the rest is immutable or guarded
    // by `state`.
    private let process = Process()
    /// Where the child's output goes.
    public let outputURL: URL
    private let lifelineWriteEnd: Int32
    private let name: String
    private let events = Events()

    private final class Events: Sendable {
        let state = Mutex(State())
    }

    private struct State {
        var exited = false
        var nextWaiter = 0
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var cancelledWaiters: Set<Int> = []
    }

    /// Starts `executable` with `arguments`.
    ///
    /// - Parameters:
    ///   - environment: the child's whole environment; nil inherits the test process's.
    ///   - captureStandardError: whether standard error goes to the output file too (else to /dev/null).
    ///   - lifeline: see the type's description.
    public init(
        _ executable: URL,
        _ arguments: [String],
        environment: [String: String]? = nil,
        captureStandardError: Bool = true,
        lifeline: Bool = false,
        outputDirectory: URL = FileManager.default.temporaryDirectory
    ) async throws {
        outputURL = outputDirectory.appendingPathComponent(
            "fbchild-\(executable.lastPathComponent)-\(UUID().uuidString.prefix(8)).out"
        )
        name = executable.lastPathComponent
        _ = FileManager.default.createFile(atPath: outputURL.path, contents: nil)
        let handle = try FileHandle(forWritingTo: outputURL)
        defer { try? handle.close() }
        if let setpriv = Spawner.setpriv {
            // setpriv sets the parent-death signal and execs the executable in place: same pid, same argv.
            process.executableURL = setpriv
            process.arguments = ["--pdeathsig", "KILL", "--", executable.path] + arguments
        } else {
            process.executableURL = executable
            process.arguments = arguments
        }
        var childEnvironment = environment ?? ProcessInfo.processInfo.environment
        var readEnd: FileHandle?
        if lifeline {
            // A socket pair rather than a pipe: it is made close-on-exec atomically (SOCK_CLOEXEC), so no child
            // another test starts meanwhile inherits the write end.
            var ends: [Int32] = [-1, -1]
            guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0 else {
                throw TestSupportError("socketpair: errno \(errno)")
            }
            readEnd = FileHandle(fileDescriptor: ends[0], closeOnDealloc: true)
            lifelineWriteEnd = ends[1]
            childEnvironment["FRAMEBUS_TEST_LIFELINE"] = "stdin"
        } else {
            lifelineWriteEnd = -1
        }
        if environment != nil || lifeline { process.environment = childEnvironment }
        process.standardInput = readEnd ?? FileHandle.nullDevice
        process.standardOutput = handle
        process.standardError = captureStandardError ? handle : FileHandle.nullDevice
        let events = self.events
        process.terminationHandler = { _ in
            let waiters = events.state.withLock { state in
                state.exited = true
                defer { state.waiters = [:] }
                return Array(state.waiters.values)
            }
            for waiter in waiters { waiter.resume() }
        }
        let process = self.process
        do {
            try await Spawner.shared.run { try process.run() }
        } catch {
            if lifelineWriteEnd >= 0 { close(lifelineWriteEnd) }
            throw error
        }
        try? readEnd?.close()
    }

    deinit {
        if process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL) }
        if lifelineWriteEnd >= 0 { close(lifelineWriteEnd) }
        try? FileManager.default.removeItem(at: outputURL)
    }

    public var processIdentifier: Int32 { process.processIdentifier }

    /// Whether the child has exited (and been reaped).
    public var hasExited: Bool { events.state.withLock { $0.exited } }

    /// The exit status, or for a child killed by a signal the signal's number; nil while it runs.
    public var terminationStatus: Int32? { hasExited ? process.terminationStatus : nil }

    /// Whether the child ended by a signal; nil while it runs.
    public var endedBySignal: Bool? { hasExited ? process.terminationReason == .uncaughtSignal : nil }

    /// Everything the child has written so far.
    public var output: String { (try? String(contentsOf: outputURL, encoding: .utf8)) ?? "" }

    /// The output as bytes.
    public var outputBytes: [UInt8] { (try? Array(Data(contentsOf: outputURL))) ?? [] }

    /// Lines that are `prefix` or start with `prefix` and a space, parsed as `key=value` fields.
    public func records(_ prefix: String) -> [[String: String]] {
        output.split(separator: "\n").filter { $0.hasPrefix(prefix + " ") || $0 == prefix }.map { line in
            var fields: [String: String] = [:]
            for part in line.split(separator: " ").dropFirst() {
                let pair = part.split(separator: "=", maxSplits: 1)
                if pair.count == 2 { fields[String(pair[0])] = String(pair[1]) }
            }
            return fields
        }
    }

    /// Sends `signal` to the child (nothing once it has exited: its pid may be reused).
    public func send(_ signal: Int32) {
        events.state.withLock { state in
            if !state.exited { _ = Glibc.kill(process.processIdentifier, signal) }
        }
    }

    /// Waits until the child exits by itself, at most `timeout` seconds; then kills it. Returns whether it exited by
    /// itself.
    @discardableResult
    public func waitForExit(timeout: Double) async -> Bool {
        if await terminated(within: timeout) { return true }
        await kill()
        return false
    }

    /// Waits for the child's exit, at most `timeout` seconds, and returns its status (the signal's number if a signal
    /// ended it); throws, having killed it, if it did not exit in time.
    @discardableResult
    public func exitStatus(within timeout: Double) async throws -> Int32 {
        guard await waitForExit(timeout: timeout) else {
            throw TestSupportError(
                "\(name) did not exit within \(timeout) s (killed); "
                    + "output:\n\(output)"
            )
        }
        return process.terminationStatus
    }

    /// Kills the child with SIGKILL and waits until it has been reaped (bounded: a SIGKILLed process ends).
    public func kill() async {
        send(SIGKILL)
        _ = await terminated(within: 60)
    }

    /// Waits until the output contains `text`, at most `timeout` seconds; false early if the child exits without it.
    public func waitForOutput(_ text: String, timeout: Double = 60) async -> Bool {
        await eventually(timeout: timeout) { output.contains(text) || hasExited } && output.contains(text)
    }

    /// Whether the child exited within `timeout` seconds; suspends on the termination event, not a poll.
    private func terminated(within timeout: Double) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask { await self.termination(); return true }
            group.addTask {
                try? await Task.sleep(for: .milliseconds(Int(timeout * 1000)))
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first || hasExited
        }
    }

    /// Returns when the child has exited, or when the task is cancelled.
    private func termination() async {
        let id = events.state.withLock { state in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = events.state.withLock { state in
                    if state.exited || state.cancelledWaiters.remove(id) != nil { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiter = events.state.withLock { state -> CheckedContinuation<Void, Never>? in
                if let waiter = state.waiters.removeValue(forKey: id) { return waiter }
                state.cancelledWaiters.insert(id)
                return nil
            }
            waiter?.resume()
        }
    }
}

/// The thread every child is spawned from.
///
/// A parent-death signal fires when the *thread* that spawned the child ends (posix_spawn clones from the calling
/// thread), not the process: children spawned from a cooperative-pool thread or a short-lived thread could be killed
/// while their test still runs. This thread never ends before the process does. It also spawns with an empty signal
/// mask: posix_spawn gives the child the spawning thread's mask, and a pool thread (a libdispatch worker) blocks
/// SIGINT and SIGTERM, so a child would otherwise start deaf to the stop signals a test sends.
final class Spawner: @unchecked Sendable {
    // @unchecked: `jobs` is guarded by `lock`; `ready` is a semaphore.
    static let shared = Spawner()

    /// util-linux's setpriv (Essential on Debian), if present; without it children are started directly.
    static let setpriv: URL? = FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")
        ? URL(fileURLWithPath: "/usr/bin/setpriv") : nil

    private let lock = NSLock()
    private var jobs: [Job] = []
    private let ready = DispatchSemaphore(value: 0)

    /// One spawn handed to the spawner thread, and the caller's continuation, resumed when it is done.
    private struct Job {
        let body: () throws -> Void
        let done: CheckedContinuation<Void, any Error>
    }

    private init() {
        let thread = Thread { [self] in
            var empty = sigset_t()
            sigemptyset(&empty)
            pthread_sigmask(SIG_SETMASK, &empty, nil)
            while true {
                // Idle until a job is queued: this thread exists only to spawn, for the whole test process.
                ready.wait()
                lock.lock()
                let job = jobs.removeFirst()
                lock.unlock()
                do {
                    try job.body()
                    job.done.resume()
                } catch {
                    job.done.resume(throwing: error)
                }
            }
        }
        thread.name = "test-spawner"
        thread.start()
    }

    /// Runs `body` on the spawner thread; the caller suspends meanwhile and holds no thread. Spawns are one at a time,
    /// and at the start of a run dozens of tests spawn at once: a caller that waited blocked on a thread of Swift's
    /// cooperative pool (as this once did) held it for the whole queue, and two such callers stalled every test.
    /// The wait is bounded by the calling test's time limit.
    func run(_ body: @escaping () throws -> Void) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            lock.lock()
            jobs.append(Job(body: body, done: continuation))
            lock.unlock()
            ready.signal()
        }
    }
}

/// Executables and files of the package, found from the test bundle.
public enum TestLocations {
    /// The package root (…/Tests/TestSupport/This.swift → …).
    public static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    /// The build products directory: the test bundle's, where `swift test` has built every product of the package.
    public static func productsDirectory() throws -> URL {
        let candidates = [
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent(),
            Bundle.main.bundleURL, Bundle.main.bundleURL.deletingLastPathComponent(),
        ]
        for directory in candidates
        where FileManager.default.isExecutableFile(atPath: directory.appendingPathComponent("FrameBusTestPeer").path) {
            return directory
        }
        throw TestSupportError("FrameBusTestPeer not found next to \(CommandLine.arguments[0]); run `swift build` first")
    }

    /// An executable product of the package (`framebus`, `FrameBusTestPeer`).
    public static func executable(_ name: String) throws -> URL {
        let url = try productsDirectory().appendingPathComponent(name)
        guard FileManager.default.isExecutableFile(atPath: url.path) else {
            throw TestSupportError("\(name) not found in \(url.deletingLastPathComponent().path); run `swift build` first")
        }
        return url
    }

    /// `name` on the PATH, or nil.
    public static func onPath(_ name: String) -> URL? {
        if name.hasPrefix("/") {
            return FileManager.default.isExecutableFile(atPath: name) ? URL(fileURLWithPath: name) : nil
        }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = URL(fileURLWithPath: String(directory)).appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        return nil
    }
}

/// A FrameBusTestPeer child with a lifeline: it exits when the test lets go of it or the test process dies.
public func startPeer(_ arguments: [String], captureStandardError: Bool = false) async throws -> ChildProcess {
    try await ChildProcess(
        try TestLocations.executable("FrameBusTestPeer"),
        arguments,
        captureStandardError: captureStandardError,
        lifeline: true
    )
}

/// `framebus` as a child process, standard output and error in its output.
public func startFramebus(_ arguments: [String], environment: [String: String]? = nil) async throws -> ChildProcess {
    try await ChildProcess(try TestLocations.executable("framebus"), arguments, environment: environment)
}

/// Runs `executable` to its end, at most `timeout` seconds (then kills it and throws); its status and output.
public func runToEnd(
    _ executable: URL,
    _ arguments: [String],
    environment: [String: String]? = nil,
    timeout: Double
) async throws -> (status: Int32, output: String) {
    let child = try await ChildProcess(executable, arguments, environment: environment)
    let status = try await child.exitStatus(within: timeout)
    return (status, child.output)
}

/// A socket path under /tmp, short enough for sockaddr_un (108 bytes) and unique to the call.
public func temporarySocketPath(_ tag: String) -> String {
    "/tmp/fbbus-\(tag)-\(UUID().uuidString.prefix(8)).sock"
}

/// A scratch file path in the temporary directory, unique to the call (nothing is created).
public func temporaryFileURL(_ name: String) -> URL {
    FileManager.default.temporaryDirectory.appendingPathComponent("framebus-test-\(UUID().uuidString.prefix(8))-\(name)")
}
