import ChronicleCore
import ChronicleSnapshot
import Foundation
import Synchronization

/// Fans store events out to every subscriber, each with its own bounded
/// buffer. A subscriber that falls behind never loses an event silently:
/// once its buffer is full, the record events that do not fit are folded
/// into one ``StoreEvent/refetch(entities:)``, delivered after the buffered
/// events (see ``Subscriber``).
final class EventHub: Sendable {
    // Weak: a stream that is dropped without being cancelled lets go of its
    // subscriber, which is then pruned here.
    private struct WeakSubscriber {
        weak var subscriber: Subscriber?
    }

    private struct State {
        var subscribers: [UInt64: WeakSubscriber] = [:]
        var nextID: UInt64 = 0
        var finished = false
        /// Called as events are published, on the publishing task.
        var listeners: [UInt64: @Sendable ([RecordEvent]) -> Void] = [:]
    }

    // Mutex makes the registry safe to share across tasks.
    private let state = Mutex(State())

    /// A new stream of every event from now on, buffering at most `limit`
    /// of them for a consumer that does not keep up. Nil once finished.
    func subscribe(bufferLimit limit: Int) -> AsyncStream<StoreEvent>? {
        precondition(limit > 0, "a change stream's buffer limit must be at least 1, not \(limit)")
        let subscriber = Subscriber(limit: limit)
        let id: UInt64? = state.withLock { state in
            guard !state.finished else { return nil }
            state.nextID += 1
            state.subscribers[state.nextID] = WeakSubscriber(subscriber: subscriber)
            return state.nextID
        }
        guard let id else { return nil }
        return AsyncStream(unfolding: { await subscriber.next() }, onCancel: { [weak self] in
            subscriber.finish()
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        })
    }

    /// Delivers record events to every subscriber, then calls every listener.
    func publish(_ events: [RecordEvent]) {
        guard !events.isEmpty else { return }
        for subscriber in subscribers() { subscriber.deliver(events) }
        for listener in state.withLock({ Array($0.listeners.values) }) { listener(events) }
    }

    /// Adds a listener, called with every batch of record events as it is
    /// published (it must not block for long). Returns its token.
    func listen(_ body: @escaping @Sendable ([RecordEvent]) -> Void) -> UInt64 {
        state.withLock { state in
            state.nextID += 1
            state.listeners[state.nextID] = body
            return state.nextID
        }
    }

    /// Removes a listener.
    func stopListening(_ token: UInt64) {
        _ = state.withLock { $0.listeners.removeValue(forKey: token) }
    }

    /// Delivers the result of an automatic sync to every subscriber.
    func publish(sync event: StoreEvent) {
        for subscriber in subscribers() { subscriber.deliver(sync: event) }
    }

    /// Ends every stream (after the events they still buffer) and refuses
    /// new subscribers.
    func finish() {
        let targets = state.withLock { state in
            state.finished = true
            state.listeners.removeAll()
            defer { state.subscribers.removeAll() }
            return state.subscribers.values.compactMap(\.subscriber)
        }
        for subscriber in targets { subscriber.finish() }
    }

    private func subscribers() -> [Subscriber] {
        state.withLock { state in
            state.subscribers = state.subscribers.filter { $0.value.subscriber != nil }
            return state.subscribers.values.compactMap(\.subscriber)
        }
    }
}

/// One stream's buffer. Holds at most `limit` events; a record event that
/// does not fit (or that arrives while an overflow waits to be delivered)
/// adds its entity to the pending refetch instead, and the newest sync
/// result that does not fit waits beside it. The consumer gets the
/// buffered events in order, then the refetch, then that sync result.
final class Subscriber: Sendable {
    private struct State {
        var buffer: [StoreEvent] = []
        var head = 0
        var overflow: Set<String> = []
        var pendingSync: StoreEvent?
        var waiter: CheckedContinuation<StoreEvent?, Never>?
        var finished = false

        var count: Int { buffer.count - head }

        mutating func pop() -> StoreEvent? {
            if head < buffer.count {
                defer {
                    head += 1
                    if head == buffer.count { buffer.removeAll(keepingCapacity: true); head = 0 }
                }
                return buffer[head]
            }
            if !overflow.isEmpty {
                defer { overflow = [] }
                return .refetch(entities: overflow)
            }
            if let pendingSync {
                self.pendingSync = nil
                return pendingSync
            }
            return nil
        }
    }

    private let limit: Int
    // Mutex makes the buffer safe to share between publishers and the consumer.
    private let state = Mutex(State())

    init(limit: Int) {
        self.limit = limit
    }

    func deliver(_ events: [RecordEvent]) {
        let (waiter, first) = state.withLock { state -> (CheckedContinuation<StoreEvent?, Never>?, StoreEvent?) in
            guard !state.finished else { return (nil, nil) }
            for event in events {
                if state.overflow.isEmpty, state.count < limit {
                    state.buffer.append(.record(event))
                } else {
                    state.overflow.insert(event.entity)
                }
            }
            return Self.takeWaiter(&state)
        }
        waiter?.resume(returning: first)
    }

    func deliver(sync event: StoreEvent) {
        let (waiter, first) = state.withLock { state -> (CheckedContinuation<StoreEvent?, Never>?, StoreEvent?) in
            guard !state.finished else { return (nil, nil) }
            if state.overflow.isEmpty, state.pendingSync == nil, state.count < limit {
                state.buffer.append(event)
            } else {
                state.pendingSync = event
            }
            return Self.takeWaiter(&state)
        }
        waiter?.resume(returning: first)
    }

    /// Ends the stream once the consumer has read what is buffered.
    func finish() {
        let waiter = state.withLock { state in
            state.finished = true
            // A consumer waits only when nothing is buffered.
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: nil)
    }

    /// The next event, waiting for one; nil once finished and drained.
    func next() async -> StoreEvent? {
        await withCheckedContinuation { continuation in
            let ready: StoreEvent?? = state.withLock { state in
                if let event = state.pop() { return .some(event) }
                if state.finished { return .some(nil) }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    private static func takeWaiter(_ state: inout State) -> (CheckedContinuation<StoreEvent?, Never>?, StoreEvent?) {
        guard let waiter = state.waiter else { return (nil, nil) }
        state.waiter = nil
        return (waiter, state.pop())
    }
}
