import Foundation

#if canImport(CSesameEpoll)
    import CSesameEpoll
#endif

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Readiness of many descriptors at once: epoll on Linux (through `CSesameEpoll`), poll(2) elsewhere — and on Linux
/// too when built with `SESAME_FORCE_POLL` (`Scripts/check-poll-loop.sh` runs the tests that way).
///
/// Level-triggered: a descriptor is reported for as long as it is ready and watched for that.
// @unchecked Sendable: epoll_ctl may be called from any thread (a pool thread re-arms its connection).
struct Poller: @unchecked Sendable {
    struct Event {
        let fd: Int32
        let readable: Bool
        let writable: Bool
        /// An error or hang-up (read to find out which; a hang-up may still have data).
        let failed: Bool
    }

    #if canImport(CSesameEpoll) && !SESAME_FORCE_POLL
        private let epoll: Int32

        init() throws {
            epoll = csesame_epoll_create()
            guard epoll >= 0 else { throw LoopbackError("epoll_create1 failed: \(String(cString: strerror(errno)))") }
        }

        func close() { closeDescriptor(epoll) }

        /// Watches `fd` for reading and/or writing (neither: only errors), replacing what was watched before.
        ///
        /// `oneShot`: after one event nothing more is reported until `fd` is watched again.
        func watch(_ fd: Int32, read: Bool, write: Bool, new: Bool, oneShot: Bool = false) {
            let events =
                (read ? UInt32(CSESAME_EPOLL_READ) : 0) | (write ? UInt32(CSESAME_EPOLL_WRITE) : 0)
                | (oneShot ? UInt32(CSESAME_EPOLL_ONESHOT) : 0)
            _ = csesame_epoll_watch(epoll, fd, events, new ? 1 : 0)
        }

        func forget(_ fd: Int32) { _ = csesame_epoll_forget(epoll, fd) }

        /// Waits up to `milliseconds` for events.
        func wait(milliseconds: Int32) -> [Event] {
            var fds = [Int32](repeating: 0, count: 256)
            var events = [UInt32](repeating: 0, count: 256)
            let count = Int(csesame_epoll_wait(epoll, &fds, &events, 256, milliseconds))
            return (0..<count).map { index in
                Event(
                    fd: fds[index], readable: events[index] & UInt32(CSESAME_EPOLL_READ) != 0,
                    writable: events[index] & UInt32(CSESAME_EPOLL_WRITE) != 0,
                    failed: events[index] & UInt32(CSESAME_EPOLL_FAILED) != 0)
            }
        }
    #else
        /// The watched descriptors as `poll(2)` takes them, kept from one wait to the next (a wait copies the array
        /// instead of rebuilding it: with a thousand connections a rebuild per wake-up was the loop's main cost).
        private final class Interest {
            // Guarded by `lock`: a pool thread re-arms its connection.
            let lock = NSLock()
            /// What poll(2) is given; a disarmed descriptor's entry holds -1, which poll(2) skips (it would report
            /// a hang-up even with no events asked for: no spinning on those).
            var entries: [pollfd] = []
            /// The descriptor of each entry (its `fd` is -1 while disarmed).
            var owners: [Int32] = []
            /// Per entry, whether one event disarms it.
            var oneShot: [Bool] = []
            /// Per entry, the watch that armed it (drawn from one counter, so a reused descriptor never matches).
            ///
            /// A one-shot descriptor is disarmed after an event only if nobody re-armed it since the wait began.
            var armedBy: [UInt64] = []
            var index: [Int32: Int] = [:]
            var watches: UInt64 = 0
        }
        private let interest = Interest()

        init() throws {}

        func close() {}

        func watch(_ fd: Int32, read: Bool, write: Bool, new: Bool, oneShot: Bool = false) {
            interest.lock.lock()
            defer { interest.lock.unlock() }
            let events = (read ? Int16(POLLIN) : 0) | (write ? Int16(POLLOUT) : 0)
            interest.watches &+= 1
            let entry = pollfd(fd: events == 0 ? -1 : fd, events: events, revents: 0)
            if let slot = interest.index[fd] {
                interest.entries[slot] = entry
                interest.oneShot[slot] = oneShot
                interest.armedBy[slot] = interest.watches
            } else {
                interest.index[fd] = interest.entries.count
                interest.entries.append(entry)
                interest.owners.append(fd)
                interest.oneShot.append(oneShot)
                interest.armedBy.append(interest.watches)
            }
        }

        func forget(_ fd: Int32) {
            interest.lock.lock()
            defer { interest.lock.unlock() }
            guard let slot = interest.index.removeValue(forKey: fd) else { return }
            let last = interest.entries.count - 1
            if slot != last {
                interest.entries[slot] = interest.entries[last]
                interest.owners[slot] = interest.owners[last]
                interest.oneShot[slot] = interest.oneShot[last]
                interest.armedBy[slot] = interest.armedBy[last]
                interest.index[interest.owners[slot]] = slot
            }
            interest.entries.removeLast()
            interest.owners.removeLast()
            interest.oneShot.removeLast()
            interest.armedBy.removeLast()
        }

        func wait(milliseconds: Int32) -> [Event] {
            interest.lock.lock()
            var descriptors = interest.entries
            let armedBy = interest.armedBy
            interest.lock.unlock()
            let count = poll(&descriptors, nfds_t(descriptors.count), milliseconds)
            guard count > 0 else { return [] }
            var ready: [Event] = []
            ready.reserveCapacity(Int(count))
            interest.lock.lock()
            defer { interest.lock.unlock() }
            for (position, entry) in descriptors.enumerated() where entry.fd >= 0 && entry.revents != 0 {
                ready.append(
                    Event(
                        fd: entry.fd, readable: entry.revents & Int16(POLLIN) != 0,
                        writable: entry.revents & Int16(POLLOUT) != 0,
                        failed: entry.revents & Int16(POLLERR | POLLHUP | POLLNVAL) != 0))
                // Looked up again: a descriptor forgotten (and its slot reused) since the copy is left alone.
                if let slot = interest.index[entry.fd], interest.oneShot[slot],
                    interest.armedBy[slot] == armedBy[position]
                {
                    interest.entries[slot].fd = -1
                }
            }
            return ready
        }
    #endif
}
