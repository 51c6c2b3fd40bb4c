import ChronicleCore
import Synchronization
import Testing

@Suite struct ClockTests {
    @Test func readingsStrictlyIncreaseWhenThePhysicalClockJumpsBack() {
        var clock = HybridClock()
        var previous = HybridTimestamp.zero
        for physical: UInt64 in [1000, 1000, 999, 500, 1001, 1001, 2000, 10, 10] {
            let t = clock.tick(physicalMilliseconds: physical)
            #expect(t > previous)
            #expect(t.milliseconds >= min(physical, previous.milliseconds))
            previous = t
        }
    }

    @Test func counterOverflowCarriesIntoMilliseconds() {
        var clock = HybridClock(last: HybridTimestamp(milliseconds: 5, counter: .max))
        let t = clock.tick(physicalMilliseconds: 1)
        #expect(t == HybridTimestamp(milliseconds: 6, counter: 0))
    }

    @Test func observedRemoteReadingsAreExceeded() {
        var clock = HybridClock()
        let remote = HybridTimestamp(milliseconds: 9_000, counter: 3)
        clock.observe(remote)
        #expect(clock.tick(physicalMilliseconds: 100) > remote)
    }

    /// Regression: a physical clock 9,000 years ahead (past 2^48 ms) was
    /// cut to 48 bits and read as the year 2107: the save it dated passed
    /// the last-millisecond check. It now reads just past the last one.
    @Test func aPhysicalClockPastTheLastMillisecondNeverWrapsIntoThePast() {
        var clock = HybridClock()
        let nineThousandYearsAhead: UInt64 = 1_700_000_000_000 + 9_000 * 365 * 86_400_000
        #expect(nineThousandYearsAhead > 1 << 48)
        #expect(clock.tick(physicalMilliseconds: nineThousandYearsAhead).milliseconds == HybridTimestamp.maxMilliseconds + 1)
        #expect(throws: ChronicleError.self) { try HybridTimestamp.checkPhysical(nineThousandYearsAhead, doing: "saving") }
        #expect(throws: Never.self) { try HybridTimestamp.checkPhysical(HybridTimestamp.maxMilliseconds, doing: "saving") }
    }

    @Test func manualClockMovesOnlyWhenTold() {
        let clock = ManualClock(milliseconds: 10)
        #expect(clock.nowMilliseconds() == 10)
        clock.advance(byMilliseconds: 5)
        #expect(clock.nowMilliseconds() == 15)
        clock.advance(byMilliseconds: -20)
        #expect(clock.nowMilliseconds() == 0)
    }

    @Test func recordIDsAreTimeOrderedVersion7AndStrictlyIncreasing() {
        var generator = RecordIDGenerator(seed: 1)
        var previous = RecordID(high: 0, low: 0)
        for ms: UInt64 in [1_700_000_000_000, 1_700_000_000_000, 1_699_999_999_000, 1_700_000_000_001] {
            for _ in 0..<100 {
                let id = generator.next(milliseconds: ms)
                #expect(id > previous)
                #expect((id.high >> 12) & 0xF == 7)
                #expect(id.low >> 62 == 0b10)
                previous = id
            }
        }
        #expect(previous.milliseconds == 1_700_000_000_001)
    }

    @Test func seededRandomIsReproducible() {
        var a = SeededRandom(seed: 99)
        var b = SeededRandom(seed: 99)
        #expect((0..<10).map { _ in a.next() } == (0..<10).map { _ in b.next() })
    }

    @Test func aManualClockWakesASleeperOnlyOnceAdvancedByTheDuration() async throws {
        let clock = ManualClock(milliseconds: 0)
        let woke = Mutex(false)
        let nap = Task {
            try await clock.sleep(for: .seconds(30))
            woke.withLock { $0 = true }
        }
        await clock.waitForSleepers(1)
        clock.advance(byMilliseconds: 29_999)
        try await Task.sleep(for: .milliseconds(20))
        #expect(woke.withLock { $0 } == false)
        #expect(clock.sleeperCount == 1)
        clock.advance(byMilliseconds: 1)
        try await nap.value
        #expect(woke.withLock { $0 })
        #expect(clock.sleeperCount == 0)
    }

    @Test func cancellingASleepOnAManualClockThrowsCancellationError() async throws {
        let clock = ManualClock(milliseconds: 0)
        let nap = Task { try await clock.sleep(for: .seconds(1)) }
        await clock.waitForSleepers(1)
        nap.cancel()
        await #expect(throws: CancellationError.self) { try await nap.value }
        #expect(clock.sleeperCount == 0)
    }

    @Test func theSystemClockSleepsForReal() async throws {
        let start = ContinuousClock.now
        try await SystemClock().sleep(for: .milliseconds(20))
        #expect(ContinuousClock.now - start >= .milliseconds(20))
    }
}
