import PixelBuffers
import SampleBuffers

extension Publisher {
    // MARK: Cost and system pressure

    /// What each frame costs against the frame interval over the last second, and what is shed because of it
    /// (``PublisherCost``).
    ///
    /// Frames for subscribers of another format than the published one (the compressed variant) are converted on a
    /// thread of the publisher's own, never in ``publish(_:timing:discontinuity:)``: when that conversion takes
    /// longer than the frame interval, only those subscribers lose frames (a DROP for each frame skipped), and
    /// ``PublisherCost/isOverloaded`` says so, as a warning in the log does (at most every 10 s while it lasts).
    public var cost: PublisherCost { core.cost }

    /// How hard the system is pressed, and by what (``SystemPressureState``): nominal until the publisher's pressure
    /// monitor measures otherwise, or always when ``Configuration/systemPressurePolicy`` is nil.
    ///
    /// Changes are also given to ``Configuration/systemPressureHandler`` as they happen, logged, and sent to every
    /// subscriber that asked for them (docs/PROTOCOL.md, STATUS).
    public var systemPressureState: SystemPressureState { core.systemPressure.withLock { $0 } }
}
