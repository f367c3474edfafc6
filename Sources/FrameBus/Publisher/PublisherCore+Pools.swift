import Foundation
import Logging
import PixelBuffers
import SampleBuffers
import SurfaceCompression
import Surfaces
import Synchronization
import SystemPackage

// Buffers from pools: taking them, following the pools' capacity and freed surfaces, retiring surfaces.

extension PublisherCore {
    /// Stops observing the pools still alive (their observers only hold the publisher weakly).
    func unfollowPools() {
        let followed = followedPools.withLock { pools in
            defer { pools.removeAll() }
            return Array(pools.values)
        }
        for entry in followed {
            if let pool = entry.pool, let observation = entry.observation {
                pool.removeSurfaceFreedObserver(observation)
            }
        }
    }

    // MARK: Buffers

    /// The work of ``Publisher``'s `makePixelBuffer` (documented there).
    func makePixelBuffer(from pool: PixelBufferPool) throws(FrameBusError) -> PixelBuffer {
        follow(pool)
        // A producer under back-pressure calls this until a buffer comes back: the threshold's case builds no string.
        do {
            if let buffer = try pool.pixelBufferIfAvailable() { return buffer }
            // Releases are reaped lazily while frames are published (§9.5): reap them now and try once more.
            withState { serviceRings(&$0) }
            if let buffer = try pool.pixelBufferIfAvailable() { return buffer }
        } catch {
            throw FrameBusError(.resourceFailure, "Publisher.makePixelBuffer", message: error.description)
        }
        throw FrameBusError(
            .outOfBuffers,
            "Publisher.makePixelBuffer",
            message: "the pool's allocation threshold is reached: every buffer is held by the producer or subscribers"
        )
    }

    /// The work of ``Publisher``'s `nextPixelBuffer` (documented there).
    func nextPixelBuffer(from pool: PixelBufferPool) async throws(FrameBusError) -> PixelBuffer {
        follow(pool)
        guard !isStopped else { throw FrameBusError(.closed, "Publisher.nextPixelBuffer") }
        // While we wait, every release wakes the loop thread (§9.5), which reaps it and so frees its buffer.
        withState { state in
            state.buffersWanted += 1
            serviceRings(&state)
        }
        doorbell.ring()
        defer { withState { $0.buffersWanted -= 1 } }
        do {
            return try await pool.nextPixelBuffer()
        } catch  where error.code == .cancelled {
            throw FrameBusError(.closed, "Publisher.nextPixelBuffer", message: "cancelled")
        } catch {
            throw FrameBusError(.resourceFailure, "Publisher.nextPixelBuffer", message: error.description)
        }
    }

    /// Follows the surfaces a pool frees (once per pool); for the producer's pool, learns its capacity too.
    func follow(_ pool: PixelBufferPool, isProducers: Bool = true) {
        // The pool a producer takes every frame from is the one followed last: then this takes no lock at all.
        if lastFollowedPool.load(ordering: .relaxed) == pool.id.rawValue { return }
        defer { lastFollowedPool.store(pool.id.rawValue, ordering: .relaxed) }
        let isNew = followedPools.withLock { pools in
            guard pools[pool.id] == nil else { return false }
            // Only pools still alive are kept, so the map is bounded by the pools in use.
            pools = pools.filter { $0.value.pool != nil }
            pools[pool.id] = FollowedPool(pool: pool)
            return true
        }
        guard isNew else { return }
        if isProducers, let threshold = pool.attributes.allocationThreshold {
            withState { $0.machine.learnPoolCapacity(threshold) }
        }
        // An observer of our own (docs/PROTOCOL.md §4.2, retiring): the application's handler and other
        // publishers' observers are called as well.
        let observation = pool.addSurfaceFreedObserver { [weak self] surfaceID in
            self?.surfaceFreed(surfaceID.rawValue)
        }
        followedPools.withLock { $0[pool.id]?.observation = observation }
    }

    /// The pool freed a surface, on whatever thread freed it: the producer's, a caller of `publish`, or the loop
    /// thread right after it unlocked (a subscriber's release dropped the last reference to a buffer of a pool that
    /// went away; ``withState(_:)`` drops such buffers outside the lock). The id is only noted here, without taking
    /// the state lock; the loop thread retires it.
    func surfaceFreed(_ surfaceID: UInt64) {
        freedSurfaces.withLock { $0.append(surfaceID) }
        doorbell.ring()
    }

    func retireFreedSurfaces(_ state: inout State) {
        let freed = freedSurfaces.withLock { freed in
            defer { freed.removeAll(keepingCapacity: true) }
            return freed
        }
        for surfaceID in freed {
            state.surfaceDescriptions[surfaceID] = nil
            perform(state.machine.surfaceFreed(surfaceID), &state)
        }
        // A surface from no followed pool (a pool used directly, a lone pixel buffer) is freed when its last
        // reference goes: the publisher holds it only weakly, and retires it once it is gone.
        let now = ProcessInfoShim.monotonicNanoseconds()
        guard now >= state.nextSurfaceSweep else { return }
        state.nextSurfaceSweep = now &+ Self.surfaceSweepInterval
        let gone = state.surfaceDescriptions.filter { $0.value.owner == nil }.map(\.key)
        for surfaceID in gone {
            state.surfaceDescriptions[surfaceID] = nil
            perform(state.machine.surfaceFreed(surfaceID), &state)
        }
    }

    /// How often the loop looks for described surfaces that went away outside followed pools.
    static let surfaceSweepInterval: UInt64 = 250_000_000
}
