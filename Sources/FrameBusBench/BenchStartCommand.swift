import ArgumentParser
import Foundation
import FrameBus
import ImageSources

#if canImport(Glibc)
import Glibc
#endif

/// `framebus bench start`: time to first frame, split into its phases, against floors measured in the same run.
package struct BenchStartCommand: ParsableCommand {
    package static let configuration = CommandConfiguration(
        commandName: "start",
        abstract: "Measure time to first frame: attaching, waiting for a publisher, a camera's start; against floors.",
        discussion: """
            Every time is CLOCK_MONOTONIC: the bench notes it just before it starts a process, the process at each \
            phase. Floors, in the same run: floor-process (this executable started and ended: spawn → main, \
            spawn → exit), floor-connect (a bare SEQPACKET connect to a socket of the bench's and one datagram), \
            and for the Python and GStreamer rows their own interpreter or gst-launch started with no bus. \
            attach: a publisher in this process publishes WIDTHxHEIGHT at --fps; a consumer process starts \
            (delegate on its connection thread, events, the blocking poller behind the C interface, a C program \
            with fb_subscriber_next_event, Python, gst-launch framebussrc) and takes one frame: process start \
            (spawn → main), connect+handshake (main → connected), wait for a publish (connected → the next \
            frame's publish), delivery (publish → frame in hand: surface import, first mapping, wake-up), pixels \
            (frame in hand → a byte of each plane read). waiting: the subscriber is started first and waits; \
            then the publisher starts and publishes: publisher start → bound, first publish → the subscriber's \
            frame. crowd: a preview subscriber alone, against the same preview with four compressed (&8v0) \
            subscribers and a queue(16) recorder started at the same moment, not deferred and deferred. \
            capture (with --device, in the guest): `framebus capture` started with a subscriber waiting, against \
            `v4l2-ctl --stream-mmap --stream-count=1` on the same device. Runs alternate between cases; medians \
            over --runs. The machine may be shared: compare a row with its floor from the same run.
            """
    )

    @Option(help: "Runs of each case (medians over them).")
    var runs: Int = 5

    @Option(help: "Cases, comma separated: floor, attach, waiting, crowd, capture.")
    var cases: String = "floor,attach,waiting,crowd"

    @Option(help: "Consumer kinds of the attach case: delegate, events, poller, c, python, framebussrc, cli.")
    var kinds: String = "delegate,events,poller,c,python,framebussrc,cli"

    @Option(help: "Frame size as WIDTHxHEIGHT.")
    var size: String = "1920x1080"

    @Option(help: "Frame rate of the publisher, in Hz.")
    var fps: Int = 60

    @Option(help: "The Python interpreter (the python/ package is put on its path as is).")
    var python: String = "python3"

    @Option(help: "The repository's root (python/, include/); by default found above this executable.")
    var root: String?

    @Option(help: "Where libFrameBusC.so is (the C row); by default beside this executable.")
    var libraryDirectory: String?

    @Option(help: "GST_PLUGIN_PATH for the framebussrc row (the directory holding libgstframebus.so).")
    var gstPluginPath: String?

    @Flag(help: "Leave out the crowd started deferred (for a publisher that knows no deferral).")
    var crowdNotDeferred = false

    @Flag(
        help: """
            Attach rows also with each consumer filling its page tables in one call (MADV_POPULATE_READ) before \
            it reads every page (rows attach-KIND-populate): whether populating a mapping early beats faulting it.
            """
    )
    var populate = false

    @Option(help: "The V4L2 device of the capture case.")
    var device: String = "/dev/video0"

    @Option(help: "`framebus capture` arguments of the capture case (size, rate), as one string.")
    var captureArguments: String = "--size 640x360 --fps 30"

    @Option(
        help: """
            Another `framebus` binary to run the capture case with too, alternating with this one, as NAME=PATH \
            (rows capture-NAME), e.g. static=.build-static/release/framebus for one built with \
            --static-swift-stdlib. Repeatable.
            """
    )
    var captureExecutable: [String] = []

    @Option(help: "Write the results as JSON to this file.")
    var json: String?

    @Option(help: "Write an SVG plot of the medians to this file.")
    var plot: String?

    @Option(help: ArgumentHelp("Run as a child of this kind.", visibility: .hidden))
    var child: String?

    @Option(help: ArgumentHelp("The child's socket path.", visibility: .hidden))
    var path: String = ""

    @Flag(help: ArgumentHelp("The child subscribes deferred.", visibility: .hidden))
    var deferred = false

    @Option(help: ArgumentHelp("The child's accepted formats.", visibility: .hidden))
    var accept: String = "420v"

    @Option(help: ArgumentHelp("The child's queue depth.", visibility: .hidden))
    var queue: Int?

    package init() {}

    /// CLOCK_MONOTONIC when the process entered `main`, set there before parsing (the `process start` phase).
    nonisolated(unsafe) package static var enteredMain: UInt64 = 0

    /// Called first thing in `main` (single-threaded then), so that a child's `process start` ends there.
    package static func noteMainEntered() { enteredMain = BenchmarkSocket.monotonicNanoseconds() }

    package func run() throws {
        if let child {
            let entered = Self.enteredMain != 0 ? Self.enteredMain : BenchmarkSocket.monotonicNanoseconds()
            BenchStartChild(
                kind: child,
                path: path,
                isDeferred: deferred,
                accept: accept,
                queue: queue,
                entered: entered
            ).run()
        }
        let sizeParts = size.lowercased().split(separator: "x").compactMap { Int($0) }
        guard sizeParts.count == 2, sizeParts.allSatisfy({ $0 > 0 && $0 <= 16384 }) else {
            throw ValidationError("--size WIDTHxHEIGHT")
        }
        guard fps > 0, fps <= 1000, runs > 0, runs <= 1000 else { throw ValidationError("--fps 1…1000, --runs > 0") }
        var bench = StartBench(
            command: self,
            width: sizeParts[0],
            height: sizeParts[1],
            base: "/tmp/framebus-start-\(getpid())"
        )
        try bench.run()
    }
}

/// One measured quantity of one case over the runs.
struct StartRow {
    var name: String
    var phase: String
    var samples: [Double]  // milliseconds
    var note: String = ""

    var median: Double? {
        guard !samples.isEmpty else { return nil }
        let sorted = samples.sorted()
        return sorted.count % 2 == 1
            ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }

    var dictionary: [String: Any] {
        var result: [String: Any] = ["case": name, "phase": phase, "samplesMilliseconds": samples]
        if let median { result["medianMilliseconds"] = median }
        if let minimum = samples.min() { result["minimumMilliseconds"] = minimum }
        if let maximum = samples.max() { result["maximumMilliseconds"] = maximum }
        if !note.isEmpty { result["note"] = note }
        return result
    }
}

struct StartBench {
    let command: BenchStartCommand
    let width: Int
    let height: Int
    let base: String
    var rows: [String: StartRow] = [:]
    var order: [String] = []
    var notes: [String] = []

    init(command: BenchStartCommand, width: Int, height: Int, base: String) {
        self.command = command
        self.width = width
        self.height = height
        self.base = base
    }

    static func milliseconds(_ from: UInt64?, _ to: UInt64?) -> Double? {
        guard let from, let to else { return nil }
        return (Double(to) - Double(from)) / 1e6
    }

    mutating func add(_ name: String, _ phase: String, _ value: Double?, note: String = "") {
        guard let value else { return }
        let key = name + "\u{1}" + phase
        if rows[key] == nil {
            rows[key] = StartRow(name: name, phase: phase, samples: [], note: note)
            order.append(key)
        }
        rows[key]!.samples.append(value)
    }

    func median(_ name: String, _ phase: String) -> Double? { rows[name + "\u{1}" + phase]?.median }

    mutating func run() throws {
        let caseList = Set(command.cases.split(separator: ",").map(String.init))
        let kindList = command.kinds.split(separator: ",").map(String.init)
        say(
            "framebus bench start: \(width)x\(height) at \(command.fps) Hz, \(command.runs) runs, \(ProcessInfo.processInfo.activeProcessorCount) CPUs, load \(Self.loadAverage())"
        )
        let executable = try Child.ownExecutable()
        let cProgram = kindList.contains("c") ? prepareCProgram(executable: executable) : nil
        let pythonPath = repositoryRoot(executable: executable).map { $0 + "/python" }
        let gstAvailable = kindList.contains("framebussrc") && gstHasFrameBusSource()

        for run in 0..<command.runs {
            if caseList.contains("floor") {
                try measureFloors(executable: executable, pythonPath: pythonPath, gst: gstAvailable)
            }
            if caseList.contains("attach") {
                try measureAttach(
                    executable: executable,
                    kinds: kindList,
                    cProgram: cProgram,
                    pythonPath: pythonPath,
                    gst: gstAvailable
                )
            }
            if caseList.contains("waiting") { try measureWaiting(executable: executable) }
            if caseList.contains("crowd") { try measureCrowd(executable: executable) }
            if caseList.contains("capture") {
                try measureCapture(executable: executable, name: "capture")
                for entry in command.captureExecutable {
                    let parts = entry.split(separator: "=", maxSplits: 1).map(String.init)
                    guard parts.count == 2 else { continue }
                    try measureCapture(executable: URL(fileURLWithPath: parts[1]), name: "capture-" + parts[0])
                }
            }
            say("run \(run + 1)/\(command.runs) done")
        }
        report()
    }

    // MARK: Floors

    mutating func measureFloors(executable: URL, pythonPath: String?, gst: Bool) throws {
        // The same binary started and ended.
        let spawn = BenchmarkSocket.monotonicNanoseconds()
        let floor = try Child(executable, ["bench", "start", "--child", "floor"])
        floor.process.waitUntilExit()
        let exited = BenchmarkSocket.monotonicNanoseconds()
        if let phases = Self.phases(floor) {
            add("floor-process", "spawn→main", Self.milliseconds(spawn, phases.main))
        }
        add("floor-process", "spawn→exit", Self.milliseconds(spawn, exited))

        // A bare connect and one datagram.
        let path = base + "-floor.sock"
        unlink(path)
        let listener = try BenchmarkSocket.listen(path: path, stream: false)
        defer { unlink(path) }
        let connectSpawn = BenchmarkSocket.monotonicNanoseconds()
        let connecting = try Child(executable, ["bench", "start", "--child", "floor-connect", "--path", path])
        let peer = try listener.accept(timeoutMilliseconds: 20_000)
        _ = try peer.receive(timeoutMilliseconds: 20_000)
        let received = BenchmarkSocket.monotonicNanoseconds()
        connecting.process.waitUntilExit()
        if let phases = Self.phases(connecting) {
            add("floor-connect", "spawn→main", Self.milliseconds(connectSpawn, phases.main))
            add("floor-connect", "main→connected", Self.milliseconds(phases.main, phases.connected))
            add("floor-connect", "connect", Self.milliseconds(phases.connecting, phases.connected))
            add("floor-connect", "datagram", Self.milliseconds(phases.sent, received))
            add("floor-connect", "spawn→datagram", Self.milliseconds(connectSpawn, received))
        }

        if let pythonPath {
            let script = """
                import socket, sys, time
                main = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
                s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                s.connect(sys.argv[1])
                s.send(b"x")
                print('{"main": %d}' % main)
                """
            let pySpawn = BenchmarkSocket.monotonicNanoseconds()
            let py = try Child(
                URL(fileURLWithPath: Self.which(command.python) ?? command.python),
                ["-c", script, path]
            )
            _ = pythonPath
            let pyPeer = try listener.accept(timeoutMilliseconds: 20_000)
            _ = try pyPeer.receive(timeoutMilliseconds: 20_000)
            let pyReceived = BenchmarkSocket.monotonicNanoseconds()
            py.process.waitUntilExit()
            if let phases = Self.phases(py) {
                add("floor-python", "spawn→main", Self.milliseconds(pySpawn, phases.main))
            }
            add("floor-python", "spawn→datagram", Self.milliseconds(pySpawn, pyReceived))
        }
        if gst {
            let gstSpawn = BenchmarkSocket.monotonicNanoseconds()
            let launch = try Child(
                URL(fileURLWithPath: Self.which("gst-launch-1.0") ?? "/usr/bin/gst-launch-1.0"),
                ["-q", "fakesrc", "num-buffers=1", "!", "fakesink"]
            )
            launch.process.waitUntilExit()
            add("floor-gst", "spawn→exit", Self.milliseconds(gstSpawn, BenchmarkSocket.monotonicNanoseconds()))
        }
    }

    // MARK: Attach to a running publisher

    mutating func measureAttach(
        executable: URL,
        kinds: [String],
        cProgram: String?,
        pythonPath: String?,
        gst: Bool
    ) throws {
        let path = base + "-attach.sock"
        let publisher = try RunningPublisher(
            path: path,
            formats: [try PixelFormat("420v")],
            width: width,
            height: height,
            fps: command.fps
        )
        publisher.start()
        defer { publisher.stop() }
        for kind in kinds {
            let name = "attach-\(kind)"
            switch kind {
            case "delegate", "events", "poller":
                for populating in command.populate ? [false, true] : [false] {
                    let spawn = BenchmarkSocket.monotonicNanoseconds()
                    let process = try Child(
                        executable,
                        ["bench", "start", "--child", kind, "--path", path],
                        environment: populating ? ["FRAMEBUS_BENCH_POPULATE": "1"] : [:]
                    )
                    process.waitForExit(timeout: 30)
                    let exited = BenchmarkSocket.monotonicNanoseconds()
                    recordSubscriber(populating ? name + "-populate" : name, spawn: spawn, exited: exited, process)
                }
            case "cli":
                // `framebus subscribe --frames 1`: the whole process, spawn to exit.
                let spawn = BenchmarkSocket.monotonicNanoseconds()
                let process = try Child(executable, ["subscribe", "--path", path, "--frames", "1"])
                process.process.waitUntilExit()
                add(name, "spawn→exit", Self.milliseconds(spawn, BenchmarkSocket.monotonicNanoseconds()))
            case "c":
                guard let cProgram else { continue }
                let spawn = BenchmarkSocket.monotonicNanoseconds()
                let process = try Child(URL(fileURLWithPath: cProgram), [path])
                process.waitForExit(timeout: 30)
                recordSubscriber(name, spawn: spawn, exited: BenchmarkSocket.monotonicNanoseconds(), process)
            case "python":
                guard let pythonPath else { continue }
                let spawn = BenchmarkSocket.monotonicNanoseconds()
                let process = try Child(
                    URL(fileURLWithPath: "/usr/bin/env"),
                    ["PYTHONPATH=\(pythonPath)", command.python, "-c", Self.pythonChild, path]
                )
                process.waitForExit(timeout: 30)
                let exited = BenchmarkSocket.monotonicNanoseconds()
                recordSubscriber(name, spawn: spawn, exited: exited, process)
                if let phases = Self.phases(process) {
                    add(name, "main→imported", Self.milliseconds(phases.main, phases.sent))
                }
            case "framebussrc":
                guard gst else { continue }
                let spawn = BenchmarkSocket.monotonicNanoseconds()
                var arguments: [String] = []
                if let plugins = command.gstPluginPath { arguments.append("GST_PLUGIN_PATH=\(plugins)") }
                arguments += [
                    Self.which("gst-launch-1.0") ?? "gst-launch-1.0", "-q", "framebussrc", "socket-path=\(path)",
                    "num-buffers=1", "!", "fakesink",
                ]
                let process = try Child(URL(fileURLWithPath: "/usr/bin/env"), arguments)
                process.waitForExit(timeout: 30)
                add(name, "spawn→exit", Self.milliseconds(spawn, BenchmarkSocket.monotonicNanoseconds()))
            default:
                notes.append("unknown kind \(kind)")
            }
        }
    }

    mutating func recordSubscriber(_ name: String, spawn: UInt64, exited: UInt64, _ process: Child) {
        guard let phases = Self.phases(process) else {
            notes.append("\(name): no phases (\(process.errors.prefix(200)))")
            return
        }
        if let error = phases.error {
            notes.append("\(name): \(error)")
            return
        }
        add(name, "spawn→main", Self.milliseconds(spawn, phases.main))
        add(name, "main→connected", Self.milliseconds(phases.main, phases.connected))
        add(name, "connected→publish", Self.milliseconds(phases.connected, phases.publish))
        add(name, "publish→frame", Self.milliseconds(phases.publish, phases.frame))
        add(name, "frame→pixels", Self.milliseconds(phases.frame, phases.mapped))
        add(name, "pixels→every page", Self.milliseconds(phases.mapped, phases.pagesRead))
        add(name, "spawn→frame", Self.milliseconds(spawn, phases.frame))
        add(name, "spawn→exit", Self.milliseconds(spawn, exited))
    }

    // MARK: A subscriber waiting for its publisher

    mutating func measureWaiting(executable: URL) throws {
        let path = base + "-waiting.sock"
        unlink(path)
        let spawn = BenchmarkSocket.monotonicNanoseconds()
        let process = try Child(executable, ["bench", "start", "--child", "waiting", "--path", path])
        // The child says when its subscriber exists; then give its first attempt time to fail, so that what is
        // measured is a subscriber that is waiting, not one still starting.
        let ready = Date().addingTimeInterval(20)
        while !process.lines.contains("waiting"), Date() < ready, process.process.isRunning { usleep(1000) }
        usleep(250_000)
        let started = BenchmarkSocket.monotonicNanoseconds()
        let publisher = try RunningPublisher(
            path: path,
            formats: [try PixelFormat("420v")],
            width: width,
            height: height,
            fps: command.fps
        )
        let bound = BenchmarkSocket.monotonicNanoseconds()
        publisher.start()
        process.waitForExit(timeout: 30)
        publisher.stop()
        guard let phases = Self.phases(process), phases.error == nil else {
            notes.append("waiting: \(Self.phases(process)?.error ?? process.errors.prefix(200).description)")
            return
        }
        _ = spawn
        add("waiting", "publisher start→bound", Self.milliseconds(started, bound))
        // Split at the FRAME's own publish time (stamped inside `publish`, after the frame was planned).
        add("waiting", "first publish→stamped", Self.milliseconds(publisher.firstPublish, phases.publish))
        add("waiting", "stamped→frame", Self.milliseconds(phases.publish, phases.frame))
        add("waiting", "first publish→frame", Self.milliseconds(publisher.firstPublish, phases.frame))
        add("waiting", "publisher start→frame", Self.milliseconds(started, phases.frame))
        if let sequence = phases.sequence { add("waiting", "frame sequence", Double(sequence)) }
    }

    // MARK: Preview with a crowd

    mutating func measureCrowd(executable: URL) throws {
        // The preview alone, with the crowd not deferred (as before deferral), and with the crowd deferred: the same
        // run, alternating.
        let variants: [(name: String, crowd: Bool, deferred: Bool)] =
            [("alone-preview", false, false), ("crowd-preview", true, false)]
            + (command.crowdNotDeferred ? [] : [("deferred-crowd-preview", true, true)])
        for variant in variants {
            try measureWaitingCrowd(executable: executable, crowd: variant.crowd, deferred: variant.deferred)
        }
        for variant in variants {
            let crowd = variant.crowd
            let path = base + "-crowd.sock"
            let publisher = try RunningPublisher(
                path: path,
                formats: [try PixelFormat("420v"), try PixelFormat("&8v0")],
                width: width,
                height: height,
                fps: command.fps,
                maximumSubscribers: 8
            )
            publisher.start()
            defer { publisher.stop() }
            let deferred = variant.deferred ? ["--deferred"] : []
            var others: [Child] = []
            let spawn = BenchmarkSocket.monotonicNanoseconds()
            let preview = try Child(executable, ["bench", "start", "--child", "delegate", "--path", path])
            if crowd {
                for _ in 0..<4 {
                    others.append(
                        try Child(
                            executable,
                            ["bench", "start", "--child", "delegate", "--path", path, "--accept", "&8v0"] + deferred
                        )
                    )
                }
                others.append(
                    try Child(
                        executable,
                        ["bench", "start", "--child", "delegate", "--path", path, "--queue", "16"] + deferred
                    )
                )
            }
            preview.waitForExit(timeout: 30)
            recordSubscriber(variant.name, spawn: spawn, exited: BenchmarkSocket.monotonicNanoseconds(), preview)
            for other in others { other.waitForExit(timeout: 30) }
            if crowd {
                let frames = others.compactMap { Self.phases($0)?.frame }
                if frames.count == others.count, let last = frames.max() {
                    add(
                        variant.deferred ? "deferred-crowd-others" : "crowd-others",
                        "spawn→last frame",
                        Self.milliseconds(spawn, last)
                    )
                } else {
                    notes.append("crowd: \(others.count - frames.count) of the others had no frame")
                }
            }
        }
    }

    /// The same crowd, its processes started first and waiting: they all connect at the same moment, when the
    /// publisher appears, so process start-up (which on two CPUs the crowd's own processes slow down) is out of it.
    /// Measured: publisher start → the preview's first frame.
    mutating func measureWaitingCrowd(executable: URL, crowd: Bool, deferred: Bool) throws {
        let path = base + "-wcrowd.sock"
        unlink(path)
        let flag = deferred ? ["--deferred"] : []
        let preview = try Child(executable, ["bench", "start", "--child", "waiting", "--path", path])
        var others: [Child] = []
        if crowd {
            for _ in 0..<4 {
                others.append(
                    try Child(
                        executable,
                        ["bench", "start", "--child", "waiting", "--path", path, "--accept", "&8v0"] + flag
                    )
                )
            }
            others.append(
                try Child(executable, ["bench", "start", "--child", "waiting", "--path", path, "--queue", "16"] + flag)
            )
        }
        let ready = Date().addingTimeInterval(30)
        for child in [preview] + others {
            while !child.lines.contains("waiting"), Date() < ready, child.process.isRunning { usleep(1000) }
        }
        usleep(250_000)
        let started = BenchmarkSocket.monotonicNanoseconds()
        let publisher = try RunningPublisher(
            path: path,
            formats: [try PixelFormat("420v"), try PixelFormat("&8v0")],
            width: width,
            height: height,
            fps: command.fps,
            maximumSubscribers: 8
        )
        publisher.start()
        preview.waitForExit(timeout: 30)
        for other in others { other.waitForExit(timeout: 30) }
        publisher.stop()
        let name = crowd ? (deferred ? "waiting-deferred-crowd" : "waiting-crowd") : "waiting-alone"
        guard let phases = Self.phases(preview), phases.error == nil else {
            notes.append("\(name): \(Self.phases(preview)?.error ?? "no phases")")
            return
        }
        add(name, "publisher start→preview frame", Self.milliseconds(started, phases.frame))
        add(name, "stamped→preview frame", Self.milliseconds(phases.publish, phases.frame))
    }

    // MARK: A camera's start (in the guest)

    mutating func measureCapture(executable: URL, name: String) throws {
        guard FileManager.default.fileExists(atPath: command.device) else {
            notes.append("capture: no \(command.device) (run in the guest: scripts/guest-run)")
            return
        }
        if name == "capture", let v4l2 = Self.which("v4l2-ctl") {
            let spawn = BenchmarkSocket.monotonicNanoseconds()
            let floor = try Child(
                URL(fileURLWithPath: v4l2),
                ["-d", command.device, "--stream-mmap", "--stream-count=1", "--stream-to=/dev/null"]
            )
            floor.waitForExit(timeout: 60)
            add(
                "capture-floor",
                "v4l2-ctl spawn→exit",
                Self.milliseconds(spawn, BenchmarkSocket.monotonicNanoseconds())
            )
        } else {
            notes.append("capture: no v4l2-ctl for the device floor")
        }
        let path = base + "-capture.sock"
        unlink(path)
        // The waiting subscriber is always this binary: only the capture's binary changes between the rows.
        let waiting = try Child(try Child.ownExecutable(), ["bench", "start", "--child", "waiting", "--path", path])
        let ready = Date().addingTimeInterval(60)
        while !waiting.lines.contains("waiting"), Date() < ready, waiting.process.isRunning { usleep(1000) }
        usleep(250_000)
        let spawn = BenchmarkSocket.monotonicNanoseconds()
        let capture = try Child(
            executable,
            ["capture", "--device", command.device, "--path", path, "--trace-start"]
                + command.captureArguments.split(separator: " ").map(String.init)
        )
        waiting.waitForExit(timeout: 60)
        // The start trace is printed within 50 ms of the first publish; wait for it (at most 10 s), then stop.
        let traced = Date().addingTimeInterval(10)
        while !capture.errors.contains("start trace:"), Date() < traced, capture.process.isRunning { usleep(5000) }
        capture.terminate()
        guard let phases = Self.phases(waiting), phases.error == nil else {
            notes.append("\(name): \(Self.phases(waiting)?.error ?? "no phases") \(capture.errors.prefix(300))")
            return
        }
        add(name, "capture spawn→frame", Self.milliseconds(spawn, phases.frame))
        add(name, "capture spawn→publish", Self.milliseconds(spawn, phases.publish))
        // The capture's own phases (--trace-start), each from the one before it, in the order they happened.
        guard let line = capture.errors.split(separator: "\n").first(where: { $0.hasPrefix("start trace: ") }) else {
            notes.append("\(name): no start trace")
            return
        }
        var previous = spawn
        var previousName = "spawn"
        for field in line.dropFirst("start trace: ".count).split(separator: " ") {
            let pair = field.split(separator: "=", maxSplits: 1)
            guard pair.count == 2, let time = UInt64(pair[1]), time >= previous else { continue }
            add(name, "\(previousName)→\(pair[0])", Self.milliseconds(previous, time))
            previous = time
            previousName = String(pair[0])
        }
        add(name, "\(previousName)→subscriber's frame", Self.milliseconds(previous, phases.frame))
    }

    // MARK: Report

    mutating func report() {
        let header = ["case", "phase", "min ms", "median ms", "max ms", "n"]
        var table: [[String]] = []
        for key in order {
            guard let row = rows[key], let median = row.median else { continue }
            table.append([
                row.name, row.phase, String(format: "%.2f", row.samples.min()!), String(format: "%.2f", median),
                String(format: "%.2f", row.samples.max()!), "\(row.samples.count)",
            ])
        }
        say("")
        say(TextTable.render(header: header, rows: table))
        say("")
        let interval = 1000.0 / Double(command.fps)
        var verdicts: [String] = []
        // The floor of a first frame: a process of this binary started, a bare connect, one datagram.
        if let process = median("floor-process", "spawn→main"), let connect = median("floor-connect", "connect"),
            let datagram = median("floor-connect", "datagram")
        {
            let floor = process + connect + datagram
            for kind in ["delegate", "events", "poller", "c"] {
                guard let ttff = median("attach-\(kind)", "spawn→frame") else { continue }
                let target = floor + interval + 2
                verdicts.append(
                    String(
                        format: "attach %@: TTFF %.1f ms, target ≤ floor %.1f + interval %.1f + 2 = %.1f ms: %@",
                        kind,
                        ttff,
                        floor,
                        interval,
                        target,
                        ttff <= target ? "met" : "missed"
                    )
                )
            }
        }
        if let pyFloor = median("floor-python", "spawn→datagram"), let ttff = median("attach-python", "spawn→frame") {
            let imported = median("attach-python", "main→imported") ?? 0
            let target = pyFloor + imported + interval + 2
            verdicts.append(
                String(
                    format:
                        "attach python: TTFF %.1f ms (import framebus %.1f ms, shown apart), target ≤ floor %.1f + import + interval + 2 = %.1f ms: %@",
                    ttff,
                    imported,
                    pyFloor,
                    target,
                    ttff <= target ? "met" : "missed"
                )
            )
        }
        if let gstFloor = median("floor-gst", "spawn→exit"), let gst = median("attach-framebussrc", "spawn→exit") {
            verdicts.append(
                String(format: "attach framebussrc: spawn→exit %.1f ms, gst-launch floor %.1f ms", gst, gstFloor)
            )
        }
        if let waiting = median("waiting", "first publish→frame") {
            verdicts.append(
                String(
                    format: "waiting: first frame %.1f ms after the first publish, target ≤ 5 ms: %@",
                    waiting,
                    waiting <= 5 ? "met" : "missed"
                )
            )
        }
        for (name, label) in [("waiting-crowd", "not deferred"), ("waiting-deferred-crowd", "deferred")] {
            guard let alone = median("waiting-alone", "publisher start→preview frame"),
                let crowd = median(name, "publisher start→preview frame")
            else { continue }
            verdicts.append(
                String(
                    format:
                        "crowd connecting at once (%@): preview first frame %.1f ms after the publisher starts, %.1f ms alone: %.2fx, target ≤ 1.2x: %@",
                    label,
                    crowd,
                    alone,
                    crowd / alone,
                    crowd / alone <= 1.2 ? "met" : "missed"
                )
            )
        }
        for (name, label) in [("crowd-preview", "not deferred"), ("deferred-crowd-preview", "deferred")] {
            guard let alone = median("alone-preview", "spawn→frame"), let crowd = median(name, "spawn→frame") else {
                continue
            }
            verdicts.append(
                String(
                    format:
                        "crowd started at once (%@): preview TTFF %.1f ms with the crowd's processes starting, %.1f ms alone: %.2fx, target ≤ 1.2x: %@",
                    label,
                    crowd,
                    alone,
                    crowd / alone,
                    crowd / alone <= 1.2 ? "met" : "missed"
                )
            )
        }
        if let floor = median("capture-floor", "v4l2-ctl spawn→exit"),
            let capture = median("capture", "capture spawn→frame")
        {
            verdicts.append(
                String(
                    format: "capture: first frame %.0f ms after start, device floor %.0f ms: %.2fx, target ≤ 1.10x: %@",
                    capture,
                    floor,
                    capture / floor,
                    capture / floor <= 1.1 ? "met" : "missed"
                )
            )
        }
        for line in verdicts + notes { say(line) }
        if let json = command.json {
            let object: [String: Any] = [
                "benchmark": "framebus bench start",
                "processors": ProcessInfo.processInfo.activeProcessorCount,
                "width": width, "height": height, "fps": command.fps, "runs": command.runs,
                "results": order.compactMap { rows[$0]?.dictionary },
                "verdicts": verdicts, "notes": notes,
            ]
            if let data = try? JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys]) {
                try? data.write(to: URL(fileURLWithPath: json))
                say("wrote \(json)")
            }
        }
        if let plot = command.plot {
            try? Data(svg().utf8).write(to: URL(fileURLWithPath: plot))
            say("wrote \(plot)")
        }
    }

    /// One bar per case: its median phases stacked, in order, on one millisecond axis.
    func svg() -> String {
        let stacked = ["spawn→main", "main→connected", "connected→publish", "publish→frame", "frame→pixels"]
        let colours = ["#8da0cb", "#66c2a5", "#e5e5e5", "#fc8d62", "#e78ac3"]
        var names: [String] = []
        for key in order { if let row = rows[key], !names.contains(row.name) { names.append(row.name) } }
        var bars: [(String, [(String, Double)])] = []
        for name in names {
            var parts: [(String, Double)] = []
            for phase in stacked { if let value = median(name, phase) { parts.append((phase, max(0, value))) } }
            if parts.isEmpty {
                for key in order where rows[key]?.name == name {
                    if let row = rows[key], let value = row.median, row.phase.contains("→") {
                        parts = [(row.phase, max(0, value))]
                        break
                    }
                }
            }
            if !parts.isEmpty { bars.append((name, parts)) }
        }
        let longest = max(1, bars.map { $0.1.reduce(0) { $0 + $1.1 } }.max() ?? 1)
        let left = 170.0
        let scale = 600.0 / longest
        var body = ""
        for (index, bar) in bars.enumerated() {
            let y = 40.0 + Double(index) * 26
            body += "<text x=\"4\" y=\"\(y + 14)\" font-size=\"12\">\(bar.0)</text>"
            var x = left
            for (phase, value) in bar.1 {
                let colour = colours[stacked.firstIndex(of: phase) ?? 0]
                body +=
                    "<rect x=\"\(x)\" y=\"\(y)\" width=\"\(value * scale)\" height=\"18\" fill=\"\(colour)\"><title>\(phase) \(String(format: "%.2f", value)) ms</title></rect>"
                x += value * scale
            }
            body +=
                "<text x=\"\(x + 4)\" y=\"\(y + 14)\" font-size=\"11\">\(String(format: "%.1f ms", (x - left) / scale))</text>"
        }
        var legend = ""
        for (index, phase) in stacked.enumerated() {
            legend +=
                "<rect x=\"\(left + Double(index) * 120)\" y=\"8\" width=\"10\" height=\"10\" fill=\"\(colours[index])\"/><text x=\"\(left + Double(index) * 120 + 14)\" y=\"17\" font-size=\"11\">\(phase)</text>"
        }
        let height = 60 + bars.count * 26
        return """
            <svg xmlns="http://www.w3.org/2000/svg" width="860" height="\(height)" font-family="sans-serif">\
            <text x="4" y="17" font-size="13">framebus bench start (medians)</text>\(legend)\(body)</svg>

            """
    }

    // MARK: Helpers

    static func phases(_ child: Child) -> BenchStartChild.Phases? {
        for line in child.lines.reversed() {
            if let phases = try? JSONDecoder().decode(BenchStartChild.Phases.self, from: Data(line.utf8)) {
                return phases
            }
        }
        return nil
    }

    static func which(_ name: String) -> String? {
        if name.contains("/") { return name }
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
            let candidate = "\(directory)/\(name)"
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }

    static func loadAverage() -> String {
        ((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? "?").split(separator: " ").prefix(3)
            .joined(separator: " ")
    }

    func repositoryRoot(executable: URL) -> String? {
        if let root = command.root { return root }
        var directory = executable.deletingLastPathComponent()
        for _ in 0..<6 {
            if FileManager.default.fileExists(atPath: directory.path + "/include/framebus.h") { return directory.path }
            directory = directory.deletingLastPathComponent()
        }
        return nil
    }

    mutating func gstHasFrameBusSource() -> Bool {
        var environment = ProcessInfo.processInfo.environment
        if let plugins = command.gstPluginPath { environment["GST_PLUGIN_PATH"] = plugins }
        let inspect = Process()
        inspect.executableURL = URL(fileURLWithPath: Self.which("gst-inspect-1.0") ?? "/usr/bin/gst-inspect-1.0")
        inspect.arguments = ["framebussrc"]
        inspect.environment = environment
        inspect.standardOutput = FileHandle.nullDevice
        inspect.standardError = FileHandle.nullDevice
        guard (try? inspect.run()) != nil else {
            notes.append("framebussrc: no gst-inspect-1.0")
            return false
        }
        inspect.waitUntilExit()
        if inspect.terminationStatus != 0 {
            notes.append("framebussrc: the plugin is not found (build it: make -C gstreamer; pass --gst-plugin-path)")
        }
        return inspect.terminationStatus == 0
    }

    /// Compiles the C row's program (fb_subscriber_next_event), or says why not.
    mutating func prepareCProgram(executable: URL) -> String? {
        guard let root = repositoryRoot(executable: executable) else {
            notes.append("c: include/framebus.h not found (pass --root)")
            return nil
        }
        let libraries = command.libraryDirectory ?? executable.deletingLastPathComponent().path
        guard FileManager.default.fileExists(atPath: libraries + "/libFrameBusC.so") else {
            notes.append("c: no libFrameBusC.so in \(libraries) (swift build -c release --product FrameBusC)")
            return nil
        }
        guard let compiler = ["cc", "gcc", "clang"].lazy.compactMap({ Self.which($0) }).first else {
            notes.append("c: no C compiler")
            return nil
        }
        let source = base + "-ttff.c"
        let program = base + "-ttff"
        try? Data(Self.cChild.utf8).write(to: URL(fileURLWithPath: source))
        let build = Process()
        build.executableURL = URL(fileURLWithPath: compiler)
        build.arguments = [
            "-O2", "-o", program, source, "-I", root + "/include", "-L", libraries, "-lFrameBusC",
            "-Wl,-rpath,\(libraries)",
        ]
        guard (try? build.run()) != nil else { return nil }
        build.waitUntilExit()
        unlink(source)
        guard build.terminationStatus == 0 else {
            notes.append("c: the program did not compile")
            return nil
        }
        return program
    }

    static let pythonChild = """
        import sys, time
        main = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        import framebus
        imported = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        bus = framebus.Subscriber(sys.argv[1], accept=["420v"], timeout=20)
        connected = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        for event in bus:
            if isinstance(event, framebus.Frame):
                frame_time = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
                with event as frame:
                    touched = sum(int(plane.reshape(-1)[0]) for plane in frame.planes)
                    mapped = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
                    print('{"main": %d, "sent": %d, "connected": %d, "frame": %d, "mapped": %d, "publish": %d, "sequence": %d}' % (
                        main, imported, connected, frame_time, mapped, frame.publish_time_ns, frame.sequence))
                break
        bus.close()
        """

    static let cChild = """
        #include <framebus.h>
        #include <stdio.h>
        #include <time.h>
        static unsigned long long now(void) {
            struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
            return (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec;
        }
        int main(int argc, char **argv) {
            unsigned long long entered = now(), connected = 0;
            if (argc < 2) return 2;
            fb_subscriber_options options;
            fb_subscriber_options_init(&options);
            uint32_t formats[1] = { FB_FOURCC('4', '2', '0', 'v') };
            options.path = argv[1];
            options.accepted_formats = formats;
            options.accepted_format_count = 1;
            options.connect_timeout_ns = 20000000000ll;
            fb_subscriber *subscriber = NULL;
            fb_error error;
            if (fb_subscriber_create(&options, &subscriber, &error) != FB_OK) return 1;
            for (;;) {
                fb_event event;
                if (fb_subscriber_next_event(subscriber, 30000000000ll, &event, &error) != FB_OK) return 1;
                if (event.type == FB_EVENT_CONNECTED && connected == 0) connected = now();
                if (event.type == FB_EVENT_FRAME) {
                    unsigned long long arrived = now();
                    fb_frame_info info;
                    unsigned touched = 0;
                    if (fb_frame_get_info(event.frame, &info, &error) != FB_OK) return 1;
                    for (uint32_t plane = 0; plane < info.plane_count; plane++)
                        if (info.planes[plane].byte_count > 0) touched += info.planes[plane].data[0];
                    unsigned long long mapped = now();
                    printf("{\\"main\\": %llu, \\"connected\\": %llu, \\"frame\\": %llu, \\"mapped\\": %llu, "
                           "\\"publish\\": %llu, \\"sequence\\": %llu}\\n", entered, connected, arrived,
                           mapped + (touched & 0), (unsigned long long)info.publish_time_ns,
                           (unsigned long long)info.sequence);
                    fb_frame_release(event.frame);
                    break;
                }
                if (event.type == FB_EVENT_END) return 1;
            }
            fb_subscriber_destroy(subscriber);
            return 0;
        }
        """
}

/// A publisher in the bench's own process, publishing a test pattern at a rate on a thread of its own.
final class RunningPublisher: @unchecked Sendable {
    // @unchecked: `isStopping` and `firstPublish` are guarded by `lock`; the rest is set once.
    let publisher: Publisher
    let pool: PixelBufferPool
    let pattern: TestPattern
    let fps: Int
    private let lock = NSLock()
    private var isStopping = false
    private var thread: Thread?
    private var published: UInt64 = 0
    private let finished = DispatchSemaphore(value: 0)

    /// CLOCK_MONOTONIC of the first publish.
    var firstPublish: UInt64? {
        lock.lock()
        defer { lock.unlock() }
        return published == 0 ? nil : published
    }

    init(
        path: String,
        formats: [PixelFormat],
        width: Int,
        height: Int,
        fps: Int,
        maximumSubscribers: Int = 16
    ) throws {
        var configuration = Publisher.Configuration(path: path, formats: formats)
        configuration.maximumSubscribers = maximumSubscribers
        configuration.logger.logLevel = .error
        publisher = try Publisher(configuration: configuration)
        pool = try PixelBufferPool(
            attributes: .init(
                width: width,
                height: height,
                pixelFormat: formats[0],
                minimumBufferCount: 4,
                maximumBufferAge: nil
            )
        )
        pattern = try TestPattern(width: width, height: height, pixelFormat: formats[0])
        self.fps = fps
    }

    /// Starts publishing (the waiting case starts it itself, right after the publisher exists).
    func start() {
        lock.lock()
        defer { lock.unlock() }
        guard thread == nil else { return }
        let thread = Thread { [self] in self.loop() }
        self.thread = thread
        thread.start()
    }

    private func loop() {
        let period = 1_000_000_000 / UInt64(fps)
        var next = BenchmarkSocket.monotonicNanoseconds()
        var index = 0
        while true {
            lock.lock()
            let stopping = isStopping
            lock.unlock()
            if stopping { break }
            if let buffer = try? publisher.makePixelBuffer(from: pool) {
                try? pattern.fill(buffer, frameIndex: index)
                index += 1
                let before = BenchmarkSocket.monotonicNanoseconds()
                _ = try? publisher.publish(buffer)
                lock.lock()
                if published == 0 { published = before }
                lock.unlock()
            }
            next += period
            let now = BenchmarkSocket.monotonicNanoseconds()
            if next > now { usleep(UInt32((next - now) / 1000)) } else { next = now }
        }
        finished.signal()
    }

    func stop() {
        lock.lock()
        isStopping = true
        let started = thread != nil
        lock.unlock()
        if started { finished.wait() }
        publisher.stop()
    }
}
