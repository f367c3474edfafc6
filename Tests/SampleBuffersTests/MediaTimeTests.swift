import SampleBuffers
import TestSupport
import Testing

private func time(_ value: Int64, _ timescale: Int32) -> MediaTime {
    MediaTime(value: value, timescale: timescale)
}

/// The five kinds of time, for exhaustive tables.
private let specials: [MediaTime] = [.invalid, .indefinite, .positiveInfinity, .negativeInfinity]

@Suite(.timeLimit(.minutes(5))) struct MediaTimeConstructionTests {
    @Test func constantsHaveCMTimeFields() {
        #expect(MediaTime.zero.value == 0 && MediaTime.zero.timescale == 1 && MediaTime.zero.flags == .valid)
        #expect(MediaTime.invalid.flags == [] && !MediaTime.invalid.isValid)
        #expect(MediaTime.indefinite.flags == [.valid, .indefinite] && MediaTime.indefinite.isIndefinite)
        #expect(MediaTime.positiveInfinity.flags == [.valid, .positiveInfinity])
        #expect(MediaTime.negativeInfinity.flags == [.valid, .negativeInfinity])
        #expect(MediaTime.positiveInfinity.isInfinite && MediaTime.negativeInfinity.isInfinite)
        #expect(MediaTime.Flags.all.rawValue == 0x1F)
    }

    @Test(arguments: [Int32(0), -1, .min])
    func nonPositiveTimescaleGivesInvalid(timescale: Int32) {
        #expect(MediaTime(value: 1, timescale: timescale).kind == .invalid)
        #expect(MediaTime(value: 1, timescale: timescale, flags: .valid).kind == .invalid)
        #expect(MediaTime(seconds: 1, preferredTimescale: timescale).kind == .invalid)
    }

    @Test func fieldInitializerAcceptsEveryConsistentCombination() {
        #expect(
            MediaTime(value: 3, timescale: 4, flags: .valid, epoch: 2) == MediaTime(value: 3, timescale: 4, epoch: 2)
        )
        #expect(MediaTime(value: 3, timescale: 4, flags: [.valid, .hasBeenRounded]).hasBeenRounded)
        // Special values are stored canonically whatever value and timescale came with them.
        let infinity = MediaTime(value: 99, timescale: -5, flags: [.valid, .positiveInfinity], epoch: 7)
        #expect(infinity.kind == .positiveInfinity && infinity.value == 0 && infinity.timescale == 0)
        #expect(infinity.epoch == 0)
        #expect(MediaTime(value: 0, timescale: 0, flags: [.valid, .indefinite]).isIndefinite)
        #expect(MediaTime(value: 0, timescale: 0, flags: [.valid, .negativeInfinity]).isNegativeInfinity)
    }

    /// Every one of the 256 low flag bytes: the initializer never traps and gives `invalid` for inconsistent ones.
    @Test func fieldInitializerRejectsEveryInconsistentCombination() {
        for raw in UInt32(0)...255 {
            let flags = MediaTime.Flags(rawValue: raw)
            let made = MediaTime(value: 5, timescale: 10, flags: flags)
            let specialCount = [MediaTime.Flags.positiveInfinity, .negativeInfinity, .indefinite]
                .filter { flags.contains($0) }.count
            let consistent = flags.contains(.valid) && flags.isSubset(of: .all) && specialCount <= 1
            #expect(made.isValid == consistent, "flags \(raw)")
            if consistent && specialCount == 0 { #expect(made.isNumeric && made.value == 5) }
        }
        #expect(MediaTime(value: 5, timescale: 0, flags: .valid).kind == .invalid)
        #expect(MediaTime(value: 5, timescale: -30, flags: .valid).kind == .invalid)
    }

    @Test func descriptionNamesTheValueAndTheSpecials() {
        #expect(time(1, 2).description == "1/2 (0.5 s)")
        #expect(
            MediaTime(value: 1, timescale: 4, flags: [.valid, .hasBeenRounded], epoch: 3).description
                == "~1/4 (0.25 s) epoch 3"
        )
        #expect(specials.map(\.description) == ["invalid", "indefinite", "+infinity", "-infinity"])
    }
}

@Suite(.timeLimit(.minutes(5))) struct MediaTimeArithmeticTests {
    @Test func sameTimescaleSumKeepsTheTimescale() {
        let sum = time(1001, 30000) + time(2002, 30000)
        #expect(sum.value == 3003 && sum.timescale == 30000 && !sum.hasBeenRounded)
    }

    @Test func sumPrefersTheLargerTimescaleWhenExact() {
        let quarter = time(1, 2) + time(1, 4)
        #expect(quarter.value == 3 && quarter.timescale == 4)
        let reversed = time(1, 4) + time(1, 2)
        #expect(reversed.value == 3 && reversed.timescale == 4)
        // 1001/30000 + 1/90000 = 3004/90000: exact in the larger timescale.
        let ntsc = time(1001, 30000) + time(1, 90000)
        #expect(ntsc.value == 3004 && ntsc.timescale == 90000 && !ntsc.hasBeenRounded)
    }

    @Test func sumFallsBackToTheSmallerTimescaleWhenOnlyItIsExact() {
        // 1/2 + 1/3 in timescales 2 and 3: 5/6 is exact in neither, so it uses the LCM 6; but 1/2 + 3/6 = 1 is
        // exact in 6 (larger) first.
        let lcm = time(1, 2) + time(1, 3)
        #expect(lcm.value == 5 && lcm.timescale == 6 && !lcm.hasBeenRounded)
        let whole = time(1, 2) + time(3, 6)
        #expect(whole.value == 6 && whole.timescale == 6)
        // Int64.max / 2 in timescale 4 would overflow; the smaller timescale 2 holds it exactly.
        let smaller = time(.max - 1, 2) + time(0, 4)
        #expect(smaller.value == .max - 1 && smaller.timescale == 2 && !smaller.hasBeenRounded)
    }

    @Test func sumOfNTSCAndAudioTimescalesUsesTheirLCM() {
        // 1001/30000 + 1/48000: LCM(30000, 48000) = 240000; 8008 + 5 = 8013.
        let sum = time(1001, 30000) + time(1, 48000)
        #expect(sum.value == 8013 && sum.timescale == 240_000 && !sum.hasBeenRounded)
        // 1/1001 + 1/1000 = 2001/1001000.
        let drop = time(1, 1001) + time(1, 1000)
        #expect(drop.value == 2001 && drop.timescale == 1_001_000 && !drop.hasBeenRounded)
    }

    @Test func sumWhoseLCMOverflowsIsRoundedToTheLargerTimescale() {
        // LCM(1e9, 90000) = 9e9 > Int32.max: 1 ns + 1/90000 s = 11112.11… ns, rounded to 11112.
        let sum = time(1, 1_000_000_000) + time(1, 90000)
        #expect(sum.value == 11112 && sum.timescale == 1_000_000_000 && sum.hasBeenRounded)
        // Rounding is sticky.
        let later = sum + time(1, 1_000_000_000)
        #expect(later.value == 11113 && later.hasBeenRounded)
    }

    @Test func sumThatOverflowsHalvesTheTimescale() {
        // 2 × (Int64.max / 1e9) = Int64.max / 5e8 exactly.
        let big = time(.max, 1_000_000_000)
        let double = big + big
        #expect(double.value == .max && double.timescale == 500_000_000 && !double.hasBeenRounded)
        #expect(double == big * 2)
        // Int64.max/90000 + Int64.max/48000 = 23·Int64.max/720000: fits first at 90000/4 = 22500 (rounded).
        let mixed = time(.max, 90000) + time(.max, 48000)
        #expect(mixed.timescale == 22500 && mixed.hasBeenRounded)
        let exactSeconds = Double(Int64.max) / 90000 + Double(Int64.max) / 48000
        #expect(abs(mixed.seconds - exactSeconds) <= 1.0 / 22500 + exactSeconds * 1e-15)
    }

    @Test func sumBeyondInt64SecondsIsInfinite() {
        #expect(time(.max, 1) + time(1, 1) == .positiveInfinity)
        #expect(time(.min, 1) - time(1, 1) == .negativeInfinity)
        #expect(time(.min, 1) + time(.min, 7) == .negativeInfinity)
        // Just inside: one below the edge stays numeric.
        #expect((time(.max - 1, 1) + time(1, 1)).value == .max)
    }

    @Test func subtractionIsExactAndCanBeNegative() {
        let difference = time(1, 30) - time(1, 25)
        #expect(difference == time(-1, 150) && difference.timescale == 150)
        #expect(time(5, 7) - time(5, 7) == .zero)
    }

    /// Every pair of the five kinds of time, against CMTime's rules for addition.
    @Test func additionOfSpecialValuesFollowsCMTime() {
        let numeric = time(3, 4)
        let kinds: [MediaTime] = specials + [numeric]
        for lhs in kinds {
            for rhs in kinds {
                let sum = lhs + rhs
                let expected: MediaTime.Kind
                if !lhs.isValid || !rhs.isValid {
                    expected = .invalid
                } else if (lhs.isPositiveInfinity && rhs.isNegativeInfinity)
                    || (lhs.isNegativeInfinity && rhs.isPositiveInfinity)
                {
                    expected = .invalid
                } else if lhs.isIndefinite || rhs.isIndefinite {
                    expected = .indefinite
                } else if lhs.isPositiveInfinity || rhs.isPositiveInfinity {
                    expected = .positiveInfinity
                } else if lhs.isNegativeInfinity || rhs.isNegativeInfinity {
                    expected = .negativeInfinity
                } else {
                    expected = .numeric
                }
                #expect(sum.kind == expected, "\(lhs) + \(rhs)")
            }
        }
        #expect(MediaTime.positiveInfinity - .positiveInfinity == .invalid)
        #expect(MediaTime.positiveInfinity - .negativeInfinity == .positiveInfinity)
        #expect(MediaTime.negativeInfinity - time(1, 1) == .negativeInfinity)
        #expect(time(1, 1) - .positiveInfinity == .negativeInfinity)
        #expect((time(1, 1) - .indefinite).isIndefinite)
    }

    @Test func arithmeticAcrossEpochsIsInvalid() {
        let a = MediaTime(value: 1, timescale: 1, epoch: 0)
        let b = MediaTime(value: 1, timescale: 1, epoch: 1)
        #expect((a + b).kind == .invalid)
        #expect((a - b).kind == .invalid)
        #expect((b + b).epoch == 1 && (b + b).value == 2)
    }

    @Test func negationSwapsInfinitiesAndHandlesInt64Min() {
        #expect(-MediaTime.positiveInfinity == .negativeInfinity)
        #expect(-MediaTime.negativeInfinity == .positiveInfinity)
        #expect((-MediaTime.invalid).kind == .invalid && (-MediaTime.indefinite).kind == .indefinite)
        #expect(-time(3, 4) == time(-3, 4))
        #expect(-time(.min, 1) == .positiveInfinity)
        let negated = -time(.min, 2)  // 2^62 s, exact in timescale 1
        #expect(negated.value == 1 << 62 && negated.timescale == 1 && !negated.hasBeenRounded)
        #expect(time(-3, 4).magnitude == time(3, 4) && MediaTime.negativeInfinity.magnitude == .positiveInfinity)
    }

    @Test func multiplicationByIntegersIsExact() {
        let frame = time(1001, 30000)
        let tenFrames = frame * 10
        #expect(tenFrames.value == 10010 && tenFrames.timescale == 30000)
        #expect(3 * frame == time(3003, 30000))
        #expect(frame * 0 == .zero)
        #expect(frame * -1 == time(-1001, 30000))
    }

    @Test func multiplicationByRatioKeepsOrWidensTheTimescale() {
        let frame = time(1001, 30000)
        let half = frame.multiplied(by: 1, dividedBy: 2)  // 1001/60000, exact in 60000
        #expect(half.value == 1001 && half.timescale == 60000 && !half.hasBeenRounded)
        let twoThirds = time(3, 30).multiplied(by: 2, dividedBy: 3)  // 2/30 exact
        #expect(twoThirds.value == 2 && twoThirds.timescale == 30)
        let negative = time(1, 3).multiplied(by: 1, dividedBy: -2)
        #expect(negative == time(-1, 6))
        // 1/1e9 × 1/7: 1/7e9 cannot be exact in Int32: rounded to 0 ns.
        let tiny = time(1, 1_000_000_000).multiplied(by: 1, dividedBy: 7)
        #expect(tiny.value == 0 && tiny.hasBeenRounded)
    }

    @Test func multiplicationOverflowHalvesTheTimescaleThenGoesInfinite() {
        let big = time(.max, 1_000_000_000)
        #expect((big * 2).value == .max && (big * 2).timescale == 500_000_000)
        #expect(time(.max, 1) * 2 == .positiveInfinity)
        #expect(time(.max, 1) * -2 == .negativeInfinity)
        #expect(time(1, 1) * Int.max == time(.max, 1))
        #expect(time(.min, 1).multiplied(by: .min, dividedBy: .min) == time(.min, 1))
    }

    @Test func multiplicationOfSpecialValues() {
        #expect((MediaTime.invalid * 2).kind == .invalid)
        #expect((MediaTime.indefinite * 2).isIndefinite)
        #expect(MediaTime.positiveInfinity * 3 == .positiveInfinity)
        #expect(MediaTime.positiveInfinity * -3 == .negativeInfinity)
        #expect(MediaTime.negativeInfinity.multiplied(by: -1, dividedBy: -4) == .negativeInfinity)
        #expect((MediaTime.positiveInfinity * 0).kind == .invalid)
        #expect(time(1, 1).multiplied(by: 1, dividedBy: 0).kind == .invalid)
    }
}

@Suite(.heavyWork, .timeLimit(.minutes(5))) struct MediaTimeComparisonTests {
    @Test func equalInstantsInDifferentTimescalesAreEqualAndHashAlike() {
        let halves = [time(1, 2), time(2, 4), time(3, 6), time(500_000_000, 1_000_000_000), time(45000, 90000)]
        #expect(Set(halves).count == 1)
        for a in halves { for b in halves { #expect(a == b && a.hashValue == b.hashValue) } }
        let rounded = MediaTime(value: 1, timescale: 2, flags: [.valid, .hasBeenRounded])
        #expect(rounded == time(1, 2) && rounded.hashValue == time(1, 2).hashValue)
    }

    /// All times −6/t … 6/t for t in 1…12: `==`, `<` and hashing agree with exact cross multiplication.
    @Test func comparisonMatchesRationalOrderOnAGrid() {
        var grid: [MediaTime] = []
        for timescale in Int32(1)...12 { for value in Int64(-6)...6 { grid.append(time(value, timescale)) } }
        for a in grid {
            for b in grid {
                let cross = a.value * Int64(b.timescale) - b.value * Int64(a.timescale)
                #expect((a == b) == (cross == 0))
                #expect((a < b) == (cross < 0))
                if a == b { #expect(a.hashValue == b.hashValue) }
            }
        }
    }

    @Test func comparisonIsExactWhereDoublesCannotTell() {
        // 2^60 + 1/4 s against 2^60 s: a Double (ulp 256 here) rounds both to 2^60.
        let a = time((1 << 62) + 1, 4)
        let b = time(1 << 61, 2)
        #expect(a.seconds == b.seconds)
        #expect(a != b && b < a && MediaTime.compare(b, a) == -1)
        #expect(time(.max, .max) < time(.max - 1, .max - 1))
        #expect(time(.max, 1_000_000_000) > time(.max - 1, 1_000_000_000))
        #expect(time(.max, 90000) > time(.max, 1_000_000_000))
        #expect(time(.min, 1) < time(.min + 1, 1) && time(.min, 1) < time(.min, 2))
    }

    @Test func specialValuesSortAsCMTimeCompareDoes() {
        let shuffled: [MediaTime] = [.invalid, .positiveInfinity, time(1, 2), .indefinite, .negativeInfinity, .zero]
        #expect(
            shuffled.sorted().map(\.kind) == [
                .negativeInfinity, .numeric, .numeric, .indefinite, .positiveInfinity, .invalid,
            ]
        )
        #expect(MediaTime.invalid == .invalid && MediaTime.indefinite == .indefinite)
        #expect(MediaTime.negativeInfinity < time(.min, 1) && time(.max, 1) < .indefinite)
        #expect(Set(specials + specials).count == 4)
    }

    @Test func laterEpochsAreLater() {
        let early = MediaTime(value: 1000, timescale: 1, epoch: 0)
        let late = MediaTime(value: 0, timescale: 1, epoch: 1)
        #expect(early < late && MediaTime.compare(late, early) == 1)
        #expect(MediaTime(value: 1, timescale: 2, epoch: 1) != MediaTime(value: 1, timescale: 2, epoch: 0))
        #expect(late < .indefinite)
    }
}

@Suite(.heavyWork, .timeLimit(.minutes(5))) struct MediaTimeConversionTests {
    @Test func convertScaleIsExactWhereItCanBe() {
        let converted = time(1001, 30000).convertScale(90000)
        #expect(converted.value == 3003 && converted.timescale == 90000 && !converted.hasBeenRounded)
        let back = converted.convertScale(30000)
        #expect(back.value == 1001 && !back.hasBeenRounded)
        let audio = time(1024, 48000).convertScale(1_000_000_000, method: .towardZero)
        #expect(audio.value == 21_333_333 && audio.hasBeenRounded)
    }

    @Test(arguments: [
        (MediaTime.RoundingMethod.halfAwayFromZero, Int64(333), Int64(-333), Int64(1), Int64(-1)),
        (.towardZero, 333, -333, 0, 0),
        (.awayFromZero, 334, -334, 1, -1),
        (.towardPositiveInfinity, 334, -333, 1, 0),
        (.towardNegativeInfinity, 333, -334, 0, -1),
    ])
    func convertScaleRoundsByMethod(
        method: MediaTime.RoundingMethod,
        third: Int64,
        minusThird: Int64,
        half: Int64,
        minusHalf: Int64
    ) {
        #expect(time(1, 3).convertScale(1000, method: method).value == third)
        #expect(time(-1, 3).convertScale(1000, method: method).value == minusThird)
        #expect(time(1, 2000).convertScale(1000, method: method).value == half)
        #expect(time(-1, 2000).convertScale(1000, method: method).value == minusHalf)
        #expect(time(1, 3).convertScale(1000, method: method).hasBeenRounded)
    }

    /// Every v/t → n for |v| ≤ 40, t, n in 1…16, and every method, against Double rounding (exact at this size).
    @Test func convertScaleMatchesAnIndependentOracleExhaustively() {
        let rules: [(MediaTime.RoundingMethod, FloatingPointRoundingRule)] = [
            (.halfAwayFromZero, .toNearestOrAwayFromZero), (.towardZero, .towardZero),
            (.awayFromZero, .awayFromZero), (.towardPositiveInfinity, .up), (.towardNegativeInfinity, .down),
        ]
        #expect(rules.count == MediaTime.RoundingMethod.allCases.count)
        for (method, rule) in rules {
            for timescale in Int32(1)...16 {
                for newTimescale in Int32(1)...16 {
                    for value in Int64(-40)...40 {
                        let exact = Double(value * Int64(newTimescale)) / Double(timescale)
                        let converted = time(value, timescale).convertScale(newTimescale, method: method)
                        #expect(converted.value == Int64(exact.rounded(rule)))
                        #expect(converted.hasBeenRounded == (exact.rounded() != exact))
                    }
                }
            }
        }
    }

    @Test func convertScaleOverflowIsInfiniteAndSpecialsPassThrough() {
        #expect(time(.max, 1).convertScale(1_000_000_000) == .positiveInfinity)
        #expect(time(.min, 48000).convertScale(1_000_000_000) == .negativeInfinity)
        let downscaled = time(.max, 1_000_000_000).convertScale(90000)
        #expect(downscaled.value == 830_103_483_316_930 && downscaled.hasBeenRounded)
        for special in specials { #expect(special.convertScale(600).kind == special.kind) }
        #expect(time(1, 2).convertScale(0).kind == .invalid)
    }

    @Test func secondsConversionRoundTrips() {
        #expect(MediaTime(seconds: 0.5, preferredTimescale: 600) == time(300, 600))
        #expect(!MediaTime(seconds: 0.5, preferredTimescale: 600).hasBeenRounded)
        let rounded = MediaTime(seconds: 1.25, preferredTimescale: 3)  // 3.75 → 4
        #expect(rounded.value == 4 && rounded.hasBeenRounded)
        for timescale: Int32 in [1, 600, 1000, 30000, 48000, 90000, 1_000_000_000] {
            for value: Int64 in [-1_000_000, -1001, -1, 0, 1, 1001, 3003, 1 << 40] {
                let original = time(value, timescale)
                let back = MediaTime(seconds: original.seconds, preferredTimescale: timescale)
                #expect(back == original, "\(original)")
            }
        }
        #expect(time(1001, 30000).seconds == 1001.0 / 30000.0)
        #expect(time(-7, 2).seconds == -3.5)
    }

    @Test func secondsEdgeCases() {
        #expect(MediaTime(seconds: .nan, preferredTimescale: 600).kind == .invalid)
        #expect(MediaTime(seconds: .infinity, preferredTimescale: 600) == .positiveInfinity)
        #expect(MediaTime(seconds: -.infinity, preferredTimescale: 600) == .negativeInfinity)
        #expect(MediaTime(seconds: 1e300, preferredTimescale: 600) == .positiveInfinity)
        #expect(MediaTime(seconds: -1e300, preferredTimescale: 600) == .negativeInfinity)
        // 1e12 s does not fit at 1e9 (1e21 > 9.2e18): the timescale halves until it does.
        let large = MediaTime(seconds: 1e12, preferredTimescale: 1_000_000_000)
        #expect(large.isNumeric && large.timescale < 1_000_000_000 && large.seconds == 1e12)
        #expect(MediaTime.positiveInfinity.seconds == .infinity && MediaTime.negativeInfinity.seconds == -.infinity)
        #expect(MediaTime.invalid.seconds.isNaN && MediaTime.indefinite.seconds.isNaN)
    }

    @Test func nanosecondsRoundTripExactlyOverTheWholeRange() {
        var generator = SystemRandomNumberGenerator()
        var samples: [Int64] = [.min, .min + 1, -1, 0, 1, .max - 1, .max, 1_000_000_000, -999_999_999]
        for _ in 0..<2000 { samples.append(Int64.random(in: .min ... .max, using: &generator)) }
        for nanoseconds in samples {
            let time = MediaTime(nanoseconds: nanoseconds)
            #expect(time.timescale == 1_000_000_000 && time.nanoseconds == nanoseconds)
        }
    }

    @Test func nanosecondsFromOtherTimescalesRound() {
        #expect(time(1, 3).nanoseconds == 333_333_333)
        #expect(time(2, 3).nanoseconds == 666_666_667)
        #expect(time(2, 3).nanoseconds(rounding: .towardZero) == 666_666_666)
        #expect(time(-2, 3).nanoseconds == -666_666_667)
        #expect(time(1001, 30000).nanoseconds == 33_366_667)
        #expect(time(1, 90000).nanoseconds == 11111)
        #expect(time(.max, 1).nanoseconds == nil)
        #expect(time(9_223_372_036, 1).nanoseconds == Int64(9_223_372_036_000_000_000))
        for special in specials { #expect(special.nanoseconds == nil) }
    }

    @Test func durationConversionRoundTrips() {
        #expect(MediaTime(Duration.milliseconds(1500)) == time(3, 2))
        #expect(MediaTime(Duration.nanoseconds(-5)) == time(-5, 1_000_000_000))
        let sub = MediaTime(Duration(secondsComponent: 0, attosecondsComponent: 1_500_000_000))  // 1.5 ns
        #expect(sub.value == 2 && sub.hasBeenRounded)
        #expect(time(1, 3).duration == Duration(secondsComponent: 0, attosecondsComponent: 333_333_333_333_333_333))
        #expect(time(-7, 2).duration == .milliseconds(-3500))
        #expect(time(.max, 1).duration == .seconds(Int64.max))
        #expect(MediaTime(Duration.seconds(Int64.max)) == .positiveInfinity)
        #expect(MediaTime.indefinite.duration == nil)
    }
}

@Suite(.timeLimit(.minutes(5))) struct HostClockTests {
    @Test func hostClockIsMonotonicInNanoseconds() {
        var previous = HostClock.now
        #expect(previous.timescale == 1_000_000_000 && previous > .zero)
        for _ in 0..<10_000 {
            let now = MediaTime.hostTime()
            #expect(now >= previous)
            previous = now
        }
    }
}

@Suite(.timeLimit(.minutes(5))) struct MediaTimeRangeTests {
    @Test func rangeIsHalfOpen() {
        let range = MediaTimeRange(start: time(1, 1), duration: time(1, 2))
        #expect(range.end == time(3, 2) && range.isValid && !range.isEmpty)
        #expect(range.contains(time(1, 1)) && range.contains(time(7, 5)) && !range.contains(time(3, 2)))
        #expect(!range.contains(MediaTime.invalid) && !range.contains(time(0, 1)))
        #expect(MediaTimeRange(start: time(1, 1), end: time(3, 2)) == range)
        #expect(range.contains(MediaTimeRange(start: time(5, 4), end: time(3, 2))))
    }

    @Test func invalidAndEmptyRanges() {
        #expect(!MediaTimeRange.invalid.isValid && MediaTimeRange.zero.isEmpty)
        #expect(!MediaTimeRange(start: .zero, duration: time(-1, 1)).isValid)
        #expect(!MediaTimeRange(start: .zero, duration: time(-1, 1)).contains(time(-1, 2)))
        #expect(MediaTimeRange.invalid.intersection(.zero) == .invalid)
    }

    @Test func intersectionOfRanges() {
        let a = MediaTimeRange(start: time(0, 1), end: time(2, 1))
        let b = MediaTimeRange(start: time(3, 2), end: time(5, 1))
        #expect(a.intersection(b) == MediaTimeRange(start: time(3, 2), end: time(2, 1)))
        let c = MediaTimeRange(start: time(10, 1), duration: time(1, 1))
        #expect(a.intersection(c).isEmpty && a.intersection(c).start == time(10, 1))
    }
}

@Suite(.timeLimit(.minutes(5))) struct SampleTimingInfoTests {
    @Test func timingDefaultsAndRange() {
        let timing = SampleTimingInfo(presentationTimeStamp: time(1001, 30000), duration: time(1001, 30000))
        #expect(timing.decodeTimeStamp.kind == .invalid)
        #expect(timing.presentationTimeRange.end == time(2002, 30000))
        #expect(SampleTimingInfo.invalid.presentationTimeStamp.kind == .invalid)
        #expect(SampleTimingInfo.invalid.duration.kind == .invalid)
        #expect(
            timing == SampleTimingInfo(presentationTimeStamp: time(1, 30) + time(1, 30000), duration: time(1001, 30000))
        )
    }
}

@Suite(.timeLimit(.minutes(5))) struct DroppedFrameReasonTests {
    @Test func rawValuesAreTheDocumentedWireValues() {
        #expect(DroppedFrameReason.allCases.map(\.rawValue) == [1, 2, 3, 4])
        #expect(DroppedFrameReason.allCases == [.frameWasLate, .outOfBuffers, .discontinuity, .workFellBehind])
        #expect(
            DroppedFrameReason.allCases.map(\.description)
                == ["FrameWasLate", "OutOfBuffers", "Discontinuity", "WorkFellBehind"]
        )
        #expect(DroppedFrameReasonInfo.allCases.map(\.rawValue) == [1, 2, 3, 4, 5])
        #expect(DroppedFrameReasonInfo.cameraModeSwitch.description == "CameraModeSwitch")
    }

    /// Every byte: only the documented values decode; 0 is reserved for "none".
    @Test func unknownRawValuesDecodeToNil() {
        for raw in UInt8.min...UInt8.max {
            #expect((DroppedFrameReason(rawValue: raw) != nil) == (1...4).contains(raw))
            #expect((DroppedFrameReasonInfo(rawValue: raw) != nil) == (1...5).contains(raw))
        }
    }

    @Test func discontinuityFlagBitsAreStable() {
        #expect(DiscontinuityFlags.unknown.rawValue == 1)
        #expect(DiscontinuityFlags.timeJump.rawValue == 2)
        #expect(DiscontinuityFlags.packetError.rawValue == 4)
        #expect(DiscontinuityFlags.streamDiscontinuity.rawValue == 8)
        #expect(DiscontinuityFlags.samplesDropped.rawValue == 64)
        #expect(DiscontinuityFlags.formatChange.rawValue == 1 << 16)
        #expect(DiscontinuityFlags([.formatChange, .samplesDropped]).rawValue == 0x1_0040)
    }
}
