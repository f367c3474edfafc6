import ArgumentParser

/// `framebus`: inspect formats, publish and subscribe to frames, and measure the codec and the bus.
@main
struct FrameBusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "framebus",
        abstract: "A compressed shared-memory video frame bus for Linux.",
        subcommands: [
            FormatsCommand.self, BenchCommand.self, PublishCommand.self, SubscribeCommand.self, DemoCommand.self,
            TopCommand.self,
            CaptureCommand.self,
        ]
    )
}

/// `framebus bench …`: the measurements.
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Measure the codec and the bus on this machine.",
        subcommands: [BenchCodecCommand.self, BenchBusCommand.self, BenchPlotCommand.self]
    )
}
