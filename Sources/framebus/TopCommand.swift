import ArgumentParser
import Foundation
import FrameBus
import FrameBusRecording

/// `framebus top`: a running publisher's subscribers, live, like `pw-top`.
struct TopCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "top",
        abstract: "Show a running publisher's subscribers live, refreshed each second.",
        discussion: """
            Connects to the publisher as a monitor (it receives no frames and holds nothing) and prints, per \
            subscriber: format, delivery mode and queue, frames delivered per second, frames held, messages \
            queued in its socket, drops by reason, how long it holds frames (p50/p99) and bytes per second. \
            Under the table, each subscriber that is a recorder (`framebus record`, or the library's Recorder) \
            with its remaining capacity, backlog, busy reasons and drops, from the status file it keeps in the \
            runtime directory. \
            Rates are computed from two reports. Text from the publisher is printed with control characters \
            escaped.
            """
    )

    @Argument(help: "The publisher's socket path (default: $XDG_RUNTIME_DIR/NAME.sock, NAME from --name).")
    var path: String?

    @Option(help: "The stream's name, used for the default socket path (as `framebus publish --name`).")
    var name: String = "framebus"

    @Option(help: "Stop after this many refreshes (default: until the publisher stops or Ctrl-C).")
    var iterations: Int?

    @Option(help: "A user id the publisher may run as besides our own (repeatable).")
    var allowUID: [UInt32] = []

    @Flag(help: "Never clear the screen between refreshes (the default when the output is not a terminal).")
    var noClear = false

    func run() throws {
        // SIGINT and SIGTERM end the display at once with status 0 (the screen is all top has to leave behind).
        let stopping = StopSignals.install { _ in _exit(0) }
        defer { withExtendedLifetime(stopping) {} }
        let path = try path ?? SocketPath.default(name: name)
        var allowed = Set(allowUID)
        allowed.insert(getuid())
        let monitor: PublisherMonitor
        do { monitor = try PublisherMonitor(path: path, allowedUserIDs: allowed) } catch {
            if error.code == .systemCall || error.code == .timedOut {
                throw ValidationError("no publisher at \(path.escapingControlCharacters): \(error)")
            }
            throw error
        }
        let publisher = Publisher(
            processID: monitor.publisherProcessID,
            name: ProcessName.of(monitor.publisherProcessID),
            format: monitor.publisherFormat.map { "\($0)" }
        )
        let clear = !noClear && isatty(STDOUT_FILENO) != 0
        var previous: PublisherMonitor.Report?
        var shown = 0
        while iterations.map({ shown < $0 }) ?? true {
            guard let report = try monitor.nextReport(timeout: .seconds(10)) else {
                FileHandle.standardOutput.write(Data("the publisher stopped\n".utf8))
                return
            }
            defer { previous = report }
            // The first report has no rates yet; it arrives right after the handshake.
            guard let previous else { continue }
            let recorders = Self.recorders(of: report, path: path, allowedUserIDs: allowed)
            let screen =
                (clear ? "\u{1B}[H\u{1B}[2J" : "")
                + Self.render(report, previous: previous, path: path, publisher: publisher, recorders: recorders)
                + "\n"
            FileHandle.standardOutput.write(Data(screen.utf8))
            shown += 1
        }
    }

    /// The publisher's process, as the header shows it.
    struct Publisher {
        var processID: Int32
        var name: String
        /// Its own format (nil from a publisher that does not say it).
        var format: String?
    }

    static func render(
        _ report: PublisherMonitor.Report,
        previous: PublisherMonitor.Report,
        path: String,
        publisher: Publisher? = nil,
        recorders: [Int: [RecorderStatusFile]] = [:]
    ) -> String {
        let seconds = Double(report.time &- previous.time) / 1e9
        // Ids are unique in a report the decoder accepted; should one repeat anyway, the first record counts.
        let before = Dictionary(previous.subscribers.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        func rate(_ now: UInt64, _ then: UInt64?) -> Double {
            guard seconds > 0 else { return 0 }
            return Double(now &- min(now, then ?? 0)) / seconds
        }
        var lines: [String] = []
        lines.append(
            "\(path.escapingControlCharacters)  published \(report.published) (\(String(format: "%.1f", rate(report.published, previous.published)))/s)  "
                + "subscribers \(report.subscriberCount)  dropped at source \(report.droppedAtSource)"
        )
        if let publisher {
            // The formats the publisher makes for its subscribers (a monitor is not told what it offers).
            var formats: [String] = []
            for subscriber in report.subscribers where !formats.contains(subscriber.formatName) {
                formats.append(subscriber.formatName)
            }
            lines.append(
                "publisher pid \(publisher.processID) (\(publisher.name))  format \(publisher.format ?? "?")"
                    + "  formats delivered "
                    + (formats.isEmpty ? "-" : formats.joined(separator: ", ")).escapingControlCharacters
            )
        }
        if let status = report.status {
            let duration =
                status.frameDuration.isNumeric ? String(format: "%.1fms", status.frameDuration.seconds * 1000) : "-"
            lines.append(
                "pressure \(status.systemPressure)  cost \(status.cost.map { String(format: "%.2f", $0) } ?? "-")  "
                    + "frame \(duration)  shed \(status.framesShed)"
            )
        }
        lines.append(
            pad("ID", 5) + pad("PID", 8) + pad("FORMAT", 8) + pad("MODE", 9) + pad("HELD", 6) + pad("QUEUE", 6)
                + pad("FPS", 8) + pad("MB/s", 9) + pad("LATE", 7) + pad("OOB", 7) + pad("DISC", 7)
                + pad("HOLD p50", 10) + pad("HOLD p99", 10) + pad("V", 3) + "NAME"
        )
        for subscriber in report.subscribers {
            let old = before[subscriber.id]
            let mode = subscriber.isLatestOnly ? "latest" : "queue \(subscriber.queueDepth)"
            lines.append(
                pad("\(subscriber.id)", 5) + pad("\(subscriber.processID)", 8)
                    + pad(subscriber.formatName.escapingControlCharacters, 8) + pad(mode, 9)
                    + pad("\(subscriber.held)", 6) + pad("\(subscriber.queued)", 6)
                    + pad(String(format: "%.1f", rate(subscriber.delivered, old?.delivered)), 8)
                    + pad(String(format: "%.2f", rate(subscriber.bytesDelivered, old?.bytesDelivered) / 1e6), 9)
                    + pad("\(subscriber.dropped[.frameWasLate, default: 0])", 7)
                    + pad("\(subscriber.dropped[.outOfBuffers, default: 0])", 7)
                    + pad("\(subscriber.dropped[.discontinuity, default: 0])", 7)
                    + pad(duration(subscriber.holdTimeP50), 10) + pad(duration(subscriber.holdTimeP99), 10)
                    + pad("\(subscriber.version)", 3) + ProcessName.of(subscriber.processID)
            )
        }
        // Subscribers that get nothing because the publisher's surfaces are of a kind they do not take (§5.8).
        for subscriber in report.subscribers where subscriber.droppedUnsupportedSurface > 0 {
            lines.append(
                "subscriber \(subscriber.id) cannot take these surfaces (DMA-BUF, and it does not import DMA-BUFs): "
                    + "\(subscriber.droppedUnsupportedSurface) of its OOB frames"
            )
        }
        // Recorders among the subscribers: their storage, from the status file each keeps (RecorderStatusFile).
        let now = Date().timeIntervalSince1970
        for subscriber in report.subscribers {
            for recorder in recorders[Int(subscriber.id)] ?? [] {
                lines.append(Self.recorderLine(recorder, subscriberID: Int(subscriber.id), now: now))
            }
        }
        if report.subscriberCount > report.subscribers.count {
            lines.append("… and \(report.subscriberCount - report.subscribers.count) more")
        }
        lines.append("")
        lines.append(contentsOf: legend)
        return lines.joined(separator: "\n") + "\n"
    }

    /// What each column means, printed under the table.
    static let legend = [
        "ID subscriber id   PID its process (SO_PEERCRED)",
        "MODE latest-only, or queue N with N the depth the publisher granted (it may be below the one asked for)",
        "HELD frames it holds now   QUEUE messages waiting in its socket   FPS, MB/s frames and bytes delivered",
        "LATE, OOB, DISC frames it lost: frameWasLate (replaced by a newer one), outOfBuffers (its hold limit, the "
            + "pool, or a surface it cannot take: said under the table), discontinuity (lost upstream)",
        "HOLD p50, p99 how long it keeps a frame before releasing it   V its protocol version",
        "NAME its process's name (/proc/PID/comm), with the script an interpreter runs or the framebus command "
            + "(/proc/PID/cmdline); ? if it is gone",
        "recorder ID: a subscriber that records (its status file): frames and bytes written, its rate, the space "
            + "left (and seconds at that rate), its backlog now/size (peak), busy reasons, frames that did not reach "
            + "the disk by reason, O_DIRECT or buffered writes",
        "pressure: the system pressure the publisher measures (level, factors)   cost: its work per frame against "
            + "the frame interval (1.0 = all of it)   frame: the frames' duration   shed: frames dropped because the "
            + "encoder fell behind (counted in OOB too)",
    ]

    /// The status files of the recorders among `report`'s subscribers, by subscriber id (the runtime directory, files
    /// owned by an allowed user, naming this bus's socket).
    static func recorders(
        of report: PublisherMonitor.Report,
        path: String,
        allowedUserIDs: Set<UInt32>
    ) -> [Int: [RecorderStatusFile]] {
        guard let directory = try? SocketPath.runtimeDirectory() else { return [:] }
        let socket = URL(fileURLWithPath: path).standardizedFileURL.path
        var result: [Int: [RecorderStatusFile]] = [:]
        for subscriber in report.subscribers where subscriber.processID > 0 {
            let files = RecorderStatusFile.find(
                processID: subscriber.processID,
                socketPath: socket,
                directory: directory,
                allowedUserIDs: allowedUserIDs
            )
            if !files.isEmpty { result[Int(subscriber.id)] = files }
        }
        return result
    }

    /// One recorder under the table: what it wrote, its rate, the space left (bytes and seconds at that rate), its
    /// backlog, why it is busy and what it dropped.
    static func recorderLine(_ recorder: RecorderStatusFile, subscriberID: Int, now: Double) -> String {
        let remaining =
            String(format: "%.2f GB", Double(recorder.remainingBytes) / 1e9)
            + (recorder.remainingSeconds.map { String(format: " (%.0f s)", $0) } ?? "")
        let drops = recorder.drops.filter { $0.value > 0 }.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        let age = now - recorder.time
        var line =
            "recorder \(subscriberID) → \(recorder.outputPath)  written \(recorder.framesWritten) frames "
            + String(format: "%.2f GB", Double(recorder.bytesWritten) / 1e9)
            + String(format: " (%.1f MB/s)", recorder.bytesPerSecond / 1e6)
            + "  remaining \(remaining)"
            + String(
                format: "  backlog %.1f/%.0f MB (peak %.1f)",
                Double(recorder.backlogBytes) / 1e6,
                Double(recorder.backlogCapacity) / 1e6,
                Double(recorder.backlogPeakBytes) / 1e6
            )
            + "  busy " + (recorder.busy.isEmpty ? "-" : recorder.busy.joined(separator: ","))
            + "  drops " + (drops.isEmpty ? "0" : drops.joined(separator: " "))
            + (recorder.direct ? "  O_DIRECT" : "  buffered")
        if let failure = recorder.failure { line += "  failed: \(failure)" }
        if age >= 2 { line += String(format: "  (status %.0f s old)", age) }
        return line.escapingControlCharacters
    }

    static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
    }

    static func duration(_ nanoseconds: UInt64) -> String {
        if nanoseconds == 0 { return "-" }
        if nanoseconds < 1_000_000 { return String(format: "%.0fµs", Double(nanoseconds) / 1e3) }
        if nanoseconds < 1_000_000_000 { return String(format: "%.1fms", Double(nanoseconds) / 1e6) }
        return String(format: "%.2fs", Double(nanoseconds) / 1e9)
    }
}
