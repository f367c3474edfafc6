import Foundation
import FrameBus

/// iceoryx2 (Eclipse's lock-free zero-copy IPC, through its Python bindings, `pip install iceoryx2`), measured in
/// `framebus bench bus` beside the bus at the same frame sizes and rates: the `iceoryx2-py` row.
///
/// A small Python program (below, written to a temporary file) runs one publisher and one subscriber process. The
/// publisher loans a sample as large as the case's frame (zero-copy, only an 8-byte CLOCK_MONOTONIC stamp written),
/// sends it and notifies an event; the subscriber blocks on the event's listener, then takes every waiting sample,
/// records its one-way latency and returns it. Lossless: the service has no safe overflow and the publisher retries
/// until delivered, so unpaced runs are paced by the subscriber. CPU is each process's CPU time per frame.
///
/// Python's interpreter runs on both sides of every frame, so these rows carry Python's overhead (about 3 µs of CPU
/// per message per side here), not iceoryx2's own cost. The stamp is read and written through
/// `c_uint64.from_address(payload_ptr)`, as a careful Python user would: the `ctypes.cast(ptr, POINTER(c_uint64))[0]`
/// this row used before cost about 2.7 µs more per sample on each side (a same-run `timeit` on the loaded machine:
/// 3.6 against 0.85 µs), a third of the row's CPU per frame, which made iceoryx2 look slower than it is. When the
/// interpreter (`--python`, default `python3`) has no `iceoryx2` module the rows are skipped and the reason printed.
enum Iceoryx2Bench {
    static let transport = "iceoryx2-py"

    /// Measures every case and rate; never throws: a failure becomes a skip line.
    static func measure(
        python: String,
        cases: [(PixelFormat, Int, Int)],
        rates: [Int],
        frames: Int
    ) -> [BenchResult] {
        let interpreter = resolve(python)
        let probe = GStreamerShmBench.run(
            interpreter,
            [
                "-I", "-c",
                "import iceoryx2, importlib.metadata as m; iceoryx2.NodeBuilder; print(m.version('iceoryx2'))",
            ],
            timeout: 60
        )
        guard probe.status == 0 else {
            let reason = probe.errors.split(separator: "\n").last.map(String.init) ?? "exit status \(probe.status)"
            say("iceoryx2-py: skipped — \(python) has no usable module iceoryx2 (pip install iceoryx2): \(reason)")
            return []
        }
        say("iceoryx2-py: iceoryx2 \(probe.output) through Python bindings; Python's overhead is on iceoryx2's side")
        let script = FileManager.default.temporaryDirectory.appendingPathComponent("framebus-iceoryx2-\(getpid()).py")
        guard (try? Data(program.utf8).write(to: script)) != nil else {
            say("iceoryx2-py: skipped — cannot write \(script.path)")
            return []
        }
        defer { try? FileManager.default.removeItem(at: script) }
        var results: [BenchResult] = []
        for (format, width, height) in cases {
            guard let probeBuffer = try? PixelBuffer(width: width, height: height, pixelFormat: format) else { continue }
            let byteCount = probeBuffer.surface.layout.planes.reduce(0) { $0 + $1.byteCount }
            for rate in rates {
                let count = rate == 0 ? frames * 10 : rate >= 1000 ? frames * 4 : frames
                let service = "framebus-bench-\(getpid())-\(width)x\(height)-\(rate)"
                let run = GStreamerShmBench.run(
                    interpreter,
                    // -I: not the script's directory (the temporary directory, where iceoryx2 keeps a directory
                    // called iceoryx2) on the module path.
                    ["-I", script.path, service, "\(count)", "\(rate)", "\(byteCount)"],
                    timeout: 180
                )
                guard run.status == 0, let line = run.output.split(separator: "\n").last,
                    let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                    let report = peerReport(object), let start = object["start"] as? UInt64,
                    let publisherCPU = object["publisherCPUNanoseconds"] as? UInt64
                else {
                    say("iceoryx2-py \(format.name) \(width)x\(height) rate \(rate): failed (\(run.status)) \(run.errors.suffix(300))")
                    continue
                }
                let result = BenchResult(
                    transport: transport,
                    format: format.name,
                    width: width,
                    height: height,
                    rateHz: rate,
                    sentFrames: count,
                    seconds: Double(max(report.lastNanoseconds, start + 1) - start) / 1e9,
                    peer: report,
                    publisherCPUNanoseconds: publisherCPU
                )
                results.append(result)
                say(result.line)
                if let undelivered = object["undelivered"] as? Int, undelivered > 0 {
                    // Seen unpaced now and then: send() says the sample reached no subscriber, despite
                    // RetryUntilDelivered. Those frames are missing from the row's count (and from frames/s).
                    say("  iceoryx2-py: \(undelivered) of \(count) samples reached no subscriber (send() returned 0)")
                }
            }
        }
        return results
    }

    static func peerReport(_ object: [String: Any]) -> PeerReport? {
        guard let frames = object["frames"] as? Int, let p50 = object["p50"] as? UInt64,
            let p99 = object["p99"] as? UInt64, let p999 = object["p999"] as? UInt64,
            let cpu = object["cpuNanoseconds"] as? UInt64, let last = object["lastNanoseconds"] as? UInt64
        else { return nil }
        return PeerReport(frames: frames, p50: p50, p99: p99, p999: p999, cpuNanoseconds: cpu, lastNanoseconds: last)
    }

    /// `python` as a path: taken as is when it names a file, else looked up in `PATH`.
    static func resolve(_ python: String) -> URL {
        if python.contains("/") { return URL(fileURLWithPath: python) }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = URL(fileURLWithPath: String(directory)).appendingPathComponent(python)
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        return URL(fileURLWithPath: "/usr/bin/" + python)
    }

    /// The Python side: `script SERVICE FRAMES RATE BYTES` runs the subscriber as a child process of its own and
    /// publishes; `script --subscribe SERVICE FRAMES BYTES` is that child. Prints one JSON line.
    static let program = #"""
        import ctypes, json, subprocess, sys, time
        import iceoryx2 as iox2

        def open_services(name):
            iox2.set_log_level_from_env_or(iox2.LogLevel.Error)
            node = iox2.NodeBuilder.new().create(iox2.ServiceType.Ipc)
            pubsub = (node.service_builder(iox2.ServiceName.new(name))
                      .publish_subscribe(iox2.Slice[ctypes.c_uint8])
                      .enable_safe_overflow(False).history_size(0)
                      .open_or_create())
            event = node.service_builder(iox2.ServiceName.new(name + "/event")).event().open_or_create()
            return node, pubsub, event

        def subscribe(name, frames):
            node, pubsub, event = open_services(name)
            subscriber = pubsub.subscriber_builder().create()
            listener = event.listener_builder().create()
            print("ready", flush=True)
            latencies, last, received = [], 0, 0
            cpu = time.process_time_ns()
            idle_since = time.monotonic()
            while received < frames and time.monotonic() - idle_since < 5:
                listener.timed_wait(iox2.Duration.from_millis(500))
                while True:
                    sample = subscriber.receive()
                    if sample is None:
                        break
                    now = time.monotonic_ns()
                    stamp = ctypes.c_uint64.from_address(sample.payload_ptr).value
                    sample.delete()
                    if stamp == 0:
                        continue  # the publisher's probe: not a frame
                    latencies.append(now - stamp)
                    last, received = now, received + 1
                    idle_since = time.monotonic()
            cpu = time.process_time_ns() - cpu
            latencies.sort()
            def at(percent):
                return latencies[min(len(latencies) - 1, int(len(latencies) * percent / 100))] if latencies else 0
            print(json.dumps({"frames": received, "p50": at(50), "p99": at(99), "p999": at(99.9),
                              "cpuNanoseconds": cpu, "lastNanoseconds": last}), flush=True)

        def publish(name, frames, rate, size):
            child = subprocess.Popen([sys.executable, "-I", sys.argv[0], "--subscribe", name, str(frames)],
                                     stdout=subprocess.PIPE, text=True)
            if child.stdout.readline().strip() != "ready":
                sys.exit("subscriber did not start")
            node, pubsub, event = open_services(name)
            publisher = (pubsub.publisher_builder().initial_max_slice_len(size)
                         .backpressure_strategy(iox2.BackpressureStrategy.RetryUntilDelivered).create())
            notifier = event.notifier_builder().create()
            # Samples sent before the publisher connected to the subscriber reach nobody: probe (stamp 0) until one
            # is delivered.
            while True:
                publisher.update_connections()
                probe = publisher.loan_slice_uninit(size)
                ctypes.cast(probe.payload_ptr, ctypes.POINTER(ctypes.c_uint64))[0] = 0
                if probe.assume_init().send() >= 1:
                    break
                time.sleep(0.01)
            period = 1_000_000_000 // rate if rate > 0 else 0
            cpu = time.process_time_ns()
            start = time.monotonic_ns()
            deadline = start
            undelivered = 0
            for _ in range(frames):
                sample = publisher.loan_slice_uninit(size)
                ctypes.c_uint64.from_address(sample.payload_ptr).value = time.monotonic_ns()
                if sample.assume_init().send() == 0:
                    undelivered += 1
                notifier.notify()
                if period:
                    deadline += period
                    wait = deadline - time.monotonic_ns()
                    if wait > 1000:
                        time.sleep(wait / 1e9)
            cpu = time.process_time_ns() - cpu
            report = json.loads(child.stdout.readline())
            child.wait(timeout=30)
            report["start"] = start
            report["publisherCPUNanoseconds"] = cpu
            report["undelivered"] = undelivered
            print(json.dumps(report), flush=True)

        if sys.argv[1] == "--subscribe":
            subscribe(sys.argv[2], int(sys.argv[3]))
        else:
            publish(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
        """#
}
