import ArgumentParser
import FrameBus

/// `--effort fast|best` on `publish` and `capture` (the publisher's ``Publisher/Configuration/compressionEffort``).
extension SurfaceCodec.Effort: ExpressibleByArgument {}
