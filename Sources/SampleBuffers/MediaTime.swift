/// A rational time: `value / timescale` seconds, with flags for the values that are not numbers.
///
/// The Swift counterpart of CoreMedia's `CMTime`. A numeric time is exact: 1001/30000 stays 1001/30000 through
/// addition, subtraction, comparison and hashing, and `1/2 == 2/4` (they are the same instant, so they are equal
/// and hash alike). The special values follow `CMTime`'s rules:
///
/// * ``invalid`` is contagious: any arithmetic with it gives ``invalid``.
/// * ``positiveInfinity`` + ``negativeInfinity`` is ``invalid``; an infinity plus a finite time is that infinity.
/// * ``indefinite`` (unknown, e.g. the duration of a live stream) plus anything valid is ``indefinite``.
/// * Times of different ``epoch``s cannot be added or subtracted (the result is ``invalid``); they are ordered by
///   epoch first.
/// * The total order, used by `<` and by sorting, is
///   `negativeInfinity < every numeric time < indefinite < positiveInfinity < invalid`.
///
/// ### Rounding policy of arithmetic
///
/// Sums, differences and products are computed exactly with 128-bit intermediates. The result timescale is, in
/// order of preference:
/// 1. the larger operand timescale, then the smaller one, if the exact result is representable there
///    (`1/30 + 1/30 = 2/30`, `1/2 + 1/4 = 3/4`);
/// 2. otherwise the least common multiple of the timescales, if it fits in `Int32` and the value in `Int64`
///    (`1/2 + 1/3 = 5/6`, `1/1001 + 1/1000 = 2001/1001000`);
/// 3. otherwise the exact result is rounded half away from zero to the larger timescale and ``hasBeenRounded``
///    is set. If even then the value does not fit in `Int64`, the timescale is halved (rounding again) until
///    it does; a magnitude that does not fit at timescale 1 becomes ``positiveInfinity`` or
///    ``negativeInfinity``.
///
/// ``hasBeenRounded`` is sticky: a result computed from a rounded operand is marked rounded too. It does not take
/// part in equality or hashing.
///
/// ```swift
/// let frame = MediaTime(value: 1001, timescale: 30000)   // one NTSC frame
/// let tenFrames = frame * 10                              // 10010/30000
/// tenFrames.seconds                                       // 0.3336666…
/// tenFrames.convertScale(90_000, method: .towardZero)     // 30030/90000, exact
/// ```
public struct MediaTime: Sendable {
    /// The numerator; meaningful only for a numeric time.
    public let value: Int64
    /// The number of units per second; positive for a numeric time, 0 for the special values.
    public let timescale: Int32
    /// Validity, rounding and the special values.
    public let flags: Flags
    /// Distinguishes otherwise equal times from different loops or sessions of one timeline; 0 normally.
    ///
    /// Numeric times in a larger epoch are later than every numeric time in a smaller one.
    public let epoch: Int64

    /// The flags of a ``MediaTime``, with `CMTimeFlags`' bit values (so they can travel on a wire unchanged).
    public struct Flags: OptionSet, Hashable, Sendable {
        public let rawValue: UInt32
        public init(rawValue: UInt32) { self.rawValue = rawValue }

        /// The time is valid (`kCMTimeFlags_Valid`, bit 0). Without it nothing else means anything.
        public static let valid = Flags(rawValue: 1 << 0)
        /// The value was rounded at some point (`kCMTimeFlags_HasBeenRounded`, bit 1).
        public static let hasBeenRounded = Flags(rawValue: 1 << 1)
        /// The time is +∞ (`kCMTimeFlags_PositiveInfinity`, bit 2).
        public static let positiveInfinity = Flags(rawValue: 1 << 2)
        /// The time is −∞ (`kCMTimeFlags_NegativeInfinity`, bit 3).
        public static let negativeInfinity = Flags(rawValue: 1 << 3)
        /// The time is unknown (`kCMTimeFlags_Indefinite`, bit 4).
        public static let indefinite = Flags(rawValue: 1 << 4)

        /// Every flag this type defines; other bits are rejected by ``MediaTime/init(value:timescale:flags:epoch:)``.
        public static let all: Flags = [.valid, .hasBeenRounded, .positiveInfinity, .negativeInfinity, .indefinite]
    }

    /// What kind of time this is, derived from ``flags``.
    public enum Kind: Hashable, Sendable {
        /// Not a time (``MediaTime/invalid``).
        case invalid
        /// A finite rational time.
        case numeric
        /// +∞.
        case positiveInfinity
        /// −∞.
        case negativeInfinity
        /// Unknown.
        case indefinite
    }

    private init(uncheckedValue value: Int64, timescale: Int32, flags: Flags, epoch: Int64) {
        self.value = value
        self.timescale = timescale
        self.flags = flags
        self.epoch = epoch
    }

    /// Creates a numeric time of `value / timescale` seconds (`CMTimeMake`).
    ///
    /// A timescale of zero or less gives ``invalid``.
    public init(value: Int64, timescale: Int32, epoch: Int64 = 0) {
        if timescale > 0 {
            self.init(uncheckedValue: value, timescale: timescale, flags: .valid, epoch: epoch)
        } else {
            self = .invalid
        }
    }

    /// Creates a time from its four fields, as received from a peer or a file; inconsistent fields give ``invalid``.
    ///
    /// The fields are accepted when: ``Flags-swift.struct/valid`` is set, no undefined flag bit is set, at most
    /// one of the infinities and ``Flags-swift.struct/indefinite`` is set, and a numeric time has a positive
    /// timescale. Anything else is ``invalid`` (never a trap), so hostile input cannot produce a time that breaks
    /// the arithmetic's invariants. The special values are stored canonically (value and timescale 0).
    public init(value: Int64, timescale: Int32, flags: Flags, epoch: Int64 = 0) {
        guard flags.contains(.valid), flags.isSubset(of: .all) else {
            self = .invalid
            return
        }
        let special = flags.intersection([.positiveInfinity, .negativeInfinity, .indefinite])
        let rounded = flags.intersection(.hasBeenRounded)
        switch special {
        case []:
            guard timescale > 0 else {
                self = .invalid
                return
            }
            self.init(uncheckedValue: value, timescale: timescale, flags: flags, epoch: epoch)
        case .positiveInfinity, .negativeInfinity, .indefinite:
            self.init(uncheckedValue: 0, timescale: 0, flags: special.union(.valid).union(rounded), epoch: 0)
        default:
            self = .invalid
        }
    }

    // MARK: Constants

    /// Zero seconds (`kCMTimeZero`): value 0, timescale 1.
    public static let zero = MediaTime(uncheckedValue: 0, timescale: 1, flags: .valid, epoch: 0)
    /// Not a time (`kCMTimeInvalid`): all fields zero.
    public static let invalid = MediaTime(uncheckedValue: 0, timescale: 0, flags: [], epoch: 0)
    /// An unknown time (`kCMTimeIndefinite`).
    public static let indefinite = MediaTime(uncheckedValue: 0, timescale: 0, flags: [.valid, .indefinite], epoch: 0)
    /// +∞ (`kCMTimePositiveInfinity`).
    public static let positiveInfinity = MediaTime(
        uncheckedValue: 0,
        timescale: 0,
        flags: [.valid, .positiveInfinity],
        epoch: 0
    )
    /// −∞ (`kCMTimeNegativeInfinity`).
    public static let negativeInfinity = MediaTime(
        uncheckedValue: 0,
        timescale: 0,
        flags: [.valid, .negativeInfinity],
        epoch: 0
    )

    /// The largest timescale (`kCMTimeMaxTimescale`).
    public static let maximumTimescale: Int32 = .max
    /// The timescale of nanosecond times such as ``HostClock/now``.
    public static let nanosecondTimescale: Int32 = 1_000_000_000

    // MARK: Classification

    /// What kind of time this is.
    public var kind: Kind {
        guard flags.contains(.valid) else { return .invalid }
        if flags.contains(.indefinite) { return .indefinite }
        if flags.contains(.positiveInfinity) { return .positiveInfinity }
        if flags.contains(.negativeInfinity) { return .negativeInfinity }
        return .numeric
    }

    /// Whether the time is valid (`CMTIME_IS_VALID`): numeric, infinite or indefinite.
    public var isValid: Bool { flags.contains(.valid) }
    /// Whether the time is a finite number (`CMTIME_IS_NUMERIC`).
    public var isNumeric: Bool { kind == .numeric }
    /// Whether the time is unknown (`CMTIME_IS_INDEFINITE`).
    public var isIndefinite: Bool { kind == .indefinite }
    /// Whether the time is +∞ (`CMTIME_IS_POSITIVE_INFINITY`).
    public var isPositiveInfinity: Bool { kind == .positiveInfinity }
    /// Whether the time is −∞ (`CMTIME_IS_NEGATIVE_INFINITY`).
    public var isNegativeInfinity: Bool { kind == .negativeInfinity }
    /// Whether the time is +∞ or −∞.
    public var isInfinite: Bool { isPositiveInfinity || isNegativeInfinity }
    /// Whether the value was rounded at some point (`CMTIME_HAS_BEEN_ROUNDED`).
    public var hasBeenRounded: Bool { flags.contains(.hasBeenRounded) }

    private func withFlags(adding extra: Flags) -> MediaTime {
        MediaTime(uncheckedValue: value, timescale: timescale, flags: flags.union(extra), epoch: epoch)
    }

    private func withEpoch(_ epoch: Int64) -> MediaTime {
        guard isNumeric else { return self }
        return MediaTime(uncheckedValue: value, timescale: timescale, flags: flags, epoch: epoch)
    }
}

// MARK: - Rounding and rescaling

extension MediaTime {
    /// How a value is rounded when it cannot be represented exactly in a timescale (`CMTimeRoundingMethod`).
    public enum RoundingMethod: Hashable, Sendable, CaseIterable {
        /// To the nearest value; halves away from zero (`kCMTimeRoundingMethod_RoundHalfAwayFromZero`).
        case halfAwayFromZero
        /// Toward zero, truncating (`kCMTimeRoundingMethod_RoundTowardZero`).
        case towardZero
        /// Away from zero (`kCMTimeRoundingMethod_RoundAwayFromZero`).
        case awayFromZero
        /// Toward +∞, the ceiling (`kCMTimeRoundingMethod_RoundTowardPositiveInfinity`).
        case towardPositiveInfinity
        /// Toward −∞, the floor (`kCMTimeRoundingMethod_RoundTowardNegativeInfinity`).
        case towardNegativeInfinity

        /// ``halfAwayFromZero`` (`kCMTimeRoundingMethod_Default`).
        public static let `default` = RoundingMethod.halfAwayFromZero
    }

    /// Converts to another timescale (`CMTimeConvertScale`).
    ///
    /// The value is computed exactly (128-bit) and rounded with `method` only when the time cannot be
    /// represented in `timescale`; then ``hasBeenRounded`` is set. If the converted value does not fit in `Int64`
    /// the result is ``positiveInfinity`` or ``negativeInfinity``. Special values are returned unchanged; a
    /// timescale of zero or less gives ``invalid``.
    ///
    /// ```swift
    /// MediaTime(value: 1001, timescale: 30000).convertScale(90_000)  // 3003/90000, exact
    /// MediaTime(value: 1, timescale: 3).convertScale(1000)           // 333/1000, rounded
    /// ```
    public func convertScale(_ timescale: Int32, method: RoundingMethod = .default) -> MediaTime {
        guard timescale > 0 else { return .invalid }
        guard isNumeric else { return self }
        if timescale == self.timescale { return self }
        let (scaled, exact) = Self.rescale(Int128(value), over: Int128(self.timescale), to: timescale, method: method)
        guard let newValue = Int64(exactly: scaled) else {
            return scaled > 0 ? .positiveInfinity : .negativeInfinity
        }
        return MediaTime(
            uncheckedValue: newValue,
            timescale: timescale,
            flags: exact ? flags : flags.union(.hasBeenRounded),
            epoch: epoch
        )
    }

    /// `numerator / denominator` expressed in `timescale` units, rounded with `method`, and whether it was exact.
    ///
    /// Requires `denominator > 0`. Splitting `numerator` into quotient and remainder keeps every intermediate
    /// product within 128 bits as long as `denominator < 2^96`: `remainder * timescale < 2^96 * 2^31`.
    static func rescale(
        _ numerator: Int128,
        over denominator: Int128,
        to timescale: Int32,
        method: RoundingMethod
    ) -> (value: Int128, exact: Bool) {
        let (quotient, remainder) = numerator.quotientAndRemainder(dividingBy: denominator)
        let scale = Int128(timescale)
        // quotient fits in 128 bits only with headroom for the multiplication if it is not huge; callers pass
        // quotients that fit in Int64 or check for overflow themselves.
        let (whole, wholeOverflow) = quotient.multipliedReportingOverflow(by: scale)
        if wholeOverflow { return (quotient.signum() >= 0 ? .max : .min, false) }
        let part = remainder * scale  // |remainder| < denominator < 2^96
        let (partQuotient, partRemainder) = part.quotientAndRemainder(dividingBy: denominator)
        let rounded =
            partQuotient
            + roundingAdjustment(
                quotient: partQuotient,
                remainder: partRemainder,
                divisor: denominator,
                method: method
            )
        let (total, totalOverflow) = whole.addingReportingOverflow(rounded)
        if totalOverflow { return (whole.signum() >= 0 ? .max : .min, false) }
        return (total, partRemainder == 0)
    }

    /// The correction (−1, 0 or +1) to add to a truncated quotient `quotient` (with `remainder` from dividing by
    /// the positive `divisor`) to round it with `method`.
    static func roundingAdjustment(
        quotient: Int128,
        remainder: Int128,
        divisor: Int128,
        method: RoundingMethod
    ) -> Int128 {
        guard remainder != 0 else { return 0 }
        // The remainder has the sign of the dividend; the true value lies strictly between quotient and
        // quotient + direction.
        let direction: Int128 = remainder > 0 ? 1 : -1
        switch method {
        case .towardZero:
            return 0
        case .awayFromZero:
            return direction
        case .towardPositiveInfinity:
            return direction > 0 ? 1 : 0
        case .towardNegativeInfinity:
            return direction < 0 ? -1 : 0
        case .halfAwayFromZero:
            // |remainder| * 2 >= divisor, computed without overflow: |remainder| >= divisor - |remainder|.
            let magnitude = remainder.magnitude
            return magnitude >= divisor.magnitude - magnitude ? direction : 0
        }
    }

    /// Builds the time closest to `numerator / denominator` seconds by the documented policy: the first timescale
    /// of `preferred` in which it is exact, then `denominator` itself, then rounding to `preferred[0]` (halving the
    /// timescale until the value fits), then ±∞.
    static func make(
        numerator: Int128,
        denominator: Int128,
        preferred: [Int32],
        rounded: Bool,
        epoch: Int64
    ) -> MediaTime {
        precondition(denominator > 0 && !preferred.isEmpty)
        let baseFlags: Flags = rounded ? [.valid, .hasBeenRounded] : .valid
        // A magnitude beyond Int64.max seconds fits no timescale.
        let wholeSeconds = numerator / denominator
        guard Int64(exactly: wholeSeconds) != nil else {
            return numerator > 0 ? .positiveInfinity : .negativeInfinity
        }
        for timescale in preferred where timescale > 0 {
            let (scaled, exact) = rescale(numerator, over: denominator, to: timescale, method: .default)
            if exact, let value = Int64(exactly: scaled) {
                return MediaTime(uncheckedValue: value, timescale: timescale, flags: baseFlags, epoch: epoch)
            }
        }
        if let timescale = Int32(exactly: denominator), let value = Int64(exactly: numerator) {
            return MediaTime(uncheckedValue: value, timescale: timescale, flags: baseFlags, epoch: epoch)
        }
        var timescale = preferred[0]
        while true {
            let (scaled, exact) = rescale(numerator, over: denominator, to: timescale, method: .default)
            if let value = Int64(exactly: scaled) {
                let flags = exact ? baseFlags : baseFlags.union(.hasBeenRounded)
                return MediaTime(uncheckedValue: value, timescale: timescale, flags: flags, epoch: epoch)
            }
            if timescale == 1 { return numerator > 0 ? .positiveInfinity : .negativeInfinity }
            timescale /= 2
        }
    }

    static func greatestCommonDivisor(_ a: Int128, _ b: Int128) -> Int128 {
        var (x, y) = (a.magnitude, b.magnitude)
        while y != 0 { (x, y) = (y, x % y) }
        return Int128(x)
    }
}

// MARK: - Arithmetic

extension MediaTime {
    /// The sum (`CMTimeAdd`), exact when it can be; see the rounding policy in the type's documentation.
    public static func + (lhs: MediaTime, rhs: MediaTime) -> MediaTime {
        let rounded = lhs.hasBeenRounded || rhs.hasBeenRounded
        switch (lhs.kind, rhs.kind) {
        case (.invalid, _), (_, .invalid):
            return .invalid
        case (.positiveInfinity, .negativeInfinity), (.negativeInfinity, .positiveInfinity):
            return .invalid
        case (.indefinite, _), (_, .indefinite):
            return .indefinite
        case (.positiveInfinity, _), (_, .positiveInfinity):
            return .positiveInfinity
        case (.negativeInfinity, _), (_, .negativeInfinity):
            return .negativeInfinity
        case (.numeric, .numeric):
            break
        }
        guard lhs.epoch == rhs.epoch else { return .invalid }
        if lhs.timescale == rhs.timescale {
            let sum = Int128(lhs.value) + Int128(rhs.value)
            if let value = Int64(exactly: sum) {
                return MediaTime(
                    uncheckedValue: value,
                    timescale: lhs.timescale,
                    flags: rounded ? [.valid, .hasBeenRounded] : .valid,
                    epoch: lhs.epoch
                )
            }
            return make(
                numerator: sum,
                denominator: Int128(lhs.timescale),
                preferred: [lhs.timescale],
                rounded: rounded,
                epoch: lhs.epoch
            )
        }
        let (a, b) = (Int128(lhs.timescale), Int128(rhs.timescale))
        let lcm = a / greatestCommonDivisor(a, b) * b  // < 2^62
        let numerator = Int128(lhs.value) * (lcm / a) + Int128(rhs.value) * (lcm / b)  // < 2^126
        return make(
            numerator: numerator,
            denominator: lcm,
            preferred: [max(lhs.timescale, rhs.timescale), min(lhs.timescale, rhs.timescale)],
            rounded: rounded,
            epoch: lhs.epoch
        )
    }

    /// The difference (`CMTimeSubtract`): `lhs + (-rhs)`, so `+∞ - +∞` is ``invalid``.
    public static func - (lhs: MediaTime, rhs: MediaTime) -> MediaTime {
        lhs + -rhs
    }

    /// The negation: −∞ for +∞ and the reverse; ``invalid`` and ``indefinite`` unchanged.
    ///
    /// Negating `Int64.min / t` cannot be exact in `t`; it is rounded by the arithmetic policy.
    public static prefix func - (time: MediaTime) -> MediaTime {
        switch time.kind {
        case .invalid, .indefinite: return time
        case .positiveInfinity: return .negativeInfinity.withFlags(adding: time.flags.intersection(.hasBeenRounded))
        case .negativeInfinity: return .positiveInfinity.withFlags(adding: time.flags.intersection(.hasBeenRounded))
        case .numeric: break
        }
        if time.value != .min {
            return MediaTime(
                uncheckedValue: -time.value,
                timescale: time.timescale,
                flags: time.flags,
                epoch: time.epoch
            )
        }
        return make(
            numerator: -Int128(time.value),
            denominator: Int128(time.timescale),
            preferred: [time.timescale],
            rounded: time.hasBeenRounded,
            epoch: time.epoch
        )
    }

    /// Adds in place.
    public static func += (lhs: inout MediaTime, rhs: MediaTime) { lhs = lhs + rhs }

    /// Subtracts in place.
    public static func -= (lhs: inout MediaTime, rhs: MediaTime) { lhs = lhs - rhs }

    /// The product with an integer (`CMTimeMultiply`); see ``multiplied(by:dividedBy:)``.
    public static func * (lhs: MediaTime, rhs: Int) -> MediaTime { lhs.multiplied(by: rhs) }

    /// The product with an integer (`CMTimeMultiply`); see ``multiplied(by:dividedBy:)``.
    public static func * (lhs: Int, rhs: MediaTime) -> MediaTime { rhs.multiplied(by: lhs) }

    /// The time multiplied by `multiplier / divisor` (`CMTimeMultiplyByRatio`), exact when it can be.
    ///
    /// The result keeps this time's timescale if the product is exact there, else takes `timescale × divisor`
    /// reduced to lowest terms if that fits in `Int32`, else is rounded by the arithmetic policy. Special
    /// values: ``invalid`` and ``indefinite`` stay as they are; an infinity times a positive ratio is itself,
    /// times a negative ratio the opposite infinity, times zero ``invalid``. A `divisor` of zero gives ``invalid``.
    public func multiplied(by multiplier: Int, dividedBy divisor: Int = 1) -> MediaTime {
        guard divisor != 0 else { return .invalid }
        let ratioSign = multiplier.signum() * divisor.signum()
        switch kind {
        case .invalid, .indefinite:
            return self
        case .positiveInfinity, .negativeInfinity:
            if ratioSign == 0 { return .invalid }
            return ratioSign > 0 ? self : -self
        case .numeric:
            break
        }
        var numerator = Int128(value) * Int128(multiplier)  // < 2^126
        var denominator = Int128(timescale) * Int128(divisor)  // < 2^94
        if denominator < 0 { (numerator, denominator) = (-numerator, -denominator) }
        if divisor == 1, let product = Int64(exactly: numerator) {
            return MediaTime(uncheckedValue: product, timescale: timescale, flags: flags, epoch: epoch)
        }
        let common = Self.greatestCommonDivisor(numerator, denominator)
        if common > 1 { (numerator, denominator) = (numerator / common, denominator / common) }
        return Self.make(
            numerator: numerator,
            denominator: denominator,
            preferred: [timescale],
            rounded: hasBeenRounded,
            epoch: epoch
        )
    }

    /// The absolute value (`CMTimeAbsoluteValue`); −∞ becomes +∞.
    public var magnitude: MediaTime {
        self < .zero.withEpoch(epoch) ? -self : self
    }
}

// MARK: - Comparison and hashing

extension MediaTime: Comparable, Hashable {
    /// The rank of each kind in the total order `−∞ < numeric < indefinite < +∞ < invalid` (`CMTimeCompare`).
    private var orderRank: Int {
        switch kind {
        case .negativeInfinity: 0
        case .numeric: 1
        case .indefinite: 2
        case .positiveInfinity: 3
        case .invalid: 4
        }
    }

    /// Compares two times (`CMTimeCompare`): −1, 0 or 1.
    ///
    /// Exact across timescales (128-bit cross multiplication); numeric times are ordered by ``epoch`` first;
    /// ``hasBeenRounded`` is ignored.
    public static func compare(_ lhs: MediaTime, _ rhs: MediaTime) -> Int {
        let (lhsRank, rhsRank) = (lhs.orderRank, rhs.orderRank)
        if lhsRank != rhsRank { return lhsRank < rhsRank ? -1 : 1 }
        guard lhsRank == 1 else { return 0 }
        if lhs.epoch != rhs.epoch { return lhs.epoch < rhs.epoch ? -1 : 1 }
        let left = Int128(lhs.value) * Int128(rhs.timescale)
        let right = Int128(rhs.value) * Int128(lhs.timescale)
        return left == right ? 0 : (left < right ? -1 : 1)
    }

    public static func == (lhs: MediaTime, rhs: MediaTime) -> Bool { compare(lhs, rhs) == 0 }

    public static func < (lhs: MediaTime, rhs: MediaTime) -> Bool { compare(lhs, rhs) < 0 }

    /// Hashes the time so that equal times hash alike: a numeric time by its epoch and its value in lowest terms.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(orderRank)
        guard isNumeric else { return }
        hasher.combine(epoch)
        let common = Self.greatestCommonDivisor(Int128(value), Int128(timescale))
        hasher.combine(Int128(value) / common)
        hasher.combine(Int128(timescale) / common)
    }
}

// MARK: - Seconds, nanoseconds, Duration

extension MediaTime {
    /// Creates the time closest to `seconds` in `preferredTimescale` (`CMTimeMakeWithSeconds`).
    ///
    /// Rounds half away from zero and sets ``hasBeenRounded`` when `seconds × preferredTimescale` is not an
    /// integer. If the value does not fit in `Int64` the timescale is halved until it does (as `CMTime` does);
    /// NaN gives ``invalid``, ±∞ gives ``positiveInfinity`` / ``negativeInfinity``. A timescale of zero or less
    /// gives ``invalid``.
    public init(seconds: Double, preferredTimescale: Int32) {
        guard preferredTimescale > 0, !seconds.isNaN else {
            self = .invalid
            return
        }
        if seconds.isInfinite {
            self = seconds > 0 ? .positiveInfinity : .negativeInfinity
            return
        }
        var timescale = preferredTimescale
        while true {
            let scaled = seconds * Double(timescale)
            let rounded = scaled.rounded(.toNearestOrAwayFromZero)
            // Int64(exactly:) rejects 2^63, the first Double above Int64.max.
            if let value = Int64(exactly: rounded) {
                let flags: Flags = rounded == scaled ? .valid : [.valid, .hasBeenRounded]
                self.init(uncheckedValue: value, timescale: timescale, flags: flags, epoch: 0)
                return
            }
            if timescale == 1 {
                self = seconds > 0 ? .positiveInfinity : .negativeInfinity
                return
            }
            timescale /= 2
        }
    }

    /// The time in seconds (`CMTimeGetSeconds`): ±∞ for the infinities, NaN for ``invalid`` and ``indefinite``.
    ///
    /// The division is done in `Double`, so it is as exact as a `Double` can be for values below 2^53.
    public var seconds: Double {
        switch kind {
        case .numeric:
            let (whole, remainder) = value.quotientAndRemainder(dividingBy: Int64(timescale))
            return Double(whole) + Double(remainder) / Double(timescale)
        case .positiveInfinity: return .infinity
        case .negativeInfinity: return -.infinity
        case .invalid, .indefinite: return .nan
        }
    }

    /// Creates an exact time of `nanoseconds` in timescale 1 000 000 000.
    public init(nanoseconds: Int64) {
        self.init(uncheckedValue: nanoseconds, timescale: Self.nanosecondTimescale, flags: .valid, epoch: 0)
    }

    /// The time in whole nanoseconds, rounded with `method`; `nil` unless numeric or if it overflows `Int64`.
    public func nanoseconds(rounding method: RoundingMethod = .default) -> Int64? {
        guard isNumeric else { return nil }
        let (scaled, _) = Self.rescale(
            Int128(value),
            over: Int128(timescale),
            to: Self.nanosecondTimescale,
            method: method
        )
        return Int64(exactly: scaled)
    }

    /// The time in whole nanoseconds, rounded half away from zero; `nil` unless numeric or if it overflows.
    public var nanoseconds: Int64? { nanoseconds(rounding: .default) }

    /// Creates a time from a `Duration`, in nanoseconds; attoseconds below a nanosecond are rounded half away
    /// from zero (setting ``hasBeenRounded``), and a duration beyond `Int64` nanoseconds becomes an infinity.
    public init(_ duration: Duration) {
        let attoseconds =
            Int128(duration.components.seconds) * 1_000_000_000_000_000_000
            + Int128(duration.components.attoseconds)
        let (scaled, exact) = Self.rescale(
            attoseconds,
            over: 1_000_000_000_000_000_000,
            to: Self.nanosecondTimescale,
            method: .default
        )
        guard let value = Int64(exactly: scaled) else {
            self = attoseconds > 0 ? .positiveInfinity : .negativeInfinity
            return
        }
        self.init(
            uncheckedValue: value,
            timescale: Self.nanosecondTimescale,
            flags: exact ? .valid : [.valid, .hasBeenRounded],
            epoch: 0
        )
    }

    /// The time as a `Duration`, to the nearest attosecond; `nil` unless numeric.
    public var duration: Duration? {
        guard isNumeric else { return nil }
        let (whole, remainder) = value.quotientAndRemainder(dividingBy: Int64(timescale))
        // Attoseconds of the fractional part: remainder × 10^18 / timescale, < 10^18, so it fits in Int64.
        let fraction = Int128(remainder) * 1_000_000_000_000_000_000
        let (quotient, rest) = fraction.quotientAndRemainder(dividingBy: Int128(timescale))
        let rounded =
            quotient
            + Self.roundingAdjustment(
                quotient: quotient,
                remainder: rest,
                divisor: Int128(timescale),
                method: .default
            )
        return Duration(secondsComponent: whole, attosecondsComponent: Int64(rounded))
    }
}

// MARK: - Description

extension MediaTime: CustomStringConvertible {
    /// `"1001/30000 (0.033367 s)"`, with `~` before the value when rounded and `epoch N` when not 0; the special
    /// values print as `invalid`, `indefinite`, `+infinity`, `-infinity`.
    public var description: String {
        switch kind {
        case .invalid: return "invalid"
        case .indefinite: return "indefinite"
        case .positiveInfinity: return "+infinity"
        case .negativeInfinity: return "-infinity"
        case .numeric: break
        }
        var text = hasBeenRounded ? "~" : ""
        text += "\(value)/\(timescale) (\(seconds) s)"
        if epoch != 0 { text += " epoch \(epoch)" }
        return text
    }
}
