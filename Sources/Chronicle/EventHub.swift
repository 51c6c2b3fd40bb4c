import ChronicleSnapshot
import Foundation
import Synchronization

/// Fans record events out to every subscriber.
final class EventHub: Sendable {
    // Mutex makes the registry safe to share across tasks.
    private let continuations = Mutex<[UInt64: AsyncStream<RecordEvent>.Continuation]>([:])
    private let nextID = Atomic<UInt64>(0)

    func subscribe(bufferingNewest limit: Int) -> AsyncStream<RecordEvent> {
        let id = nextID.wrappingAdd(1, ordering: .relaxed).newValue
        let (stream, continuation) = AsyncStream.makeStream(of: RecordEvent.self, bufferingPolicy: .bufferingNewest(limit))
        continuation.onTermination = { [weak self] _ in
            _ = self?.continuations.withLock { $0.removeValue(forKey: id) }
        }
        continuations.withLock { $0[id] = continuation }
        return stream
    }

    func publish(_ events: [RecordEvent]) {
        guard !events.isEmpty else { return }
        let targets = continuations.withLock { Array($0.values) }
        for c in targets {
            for e in events { c.yield(e) }
        }
    }

    func finish() {
        let targets = continuations.withLock { s in
            defer { s.removeAll() }
            return Array(s.values)
        }
        for c in targets { c.finish() }
    }
}
