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
        /// The watched descriptors and their events (`poll(2)` takes the whole set each time).
        private final class Interest {
            // Guarded by `lock`: a pool thread re-arms its connection.
            let lock = NSLock()
            var events: [Int32: Int16] = [:]
            var oneShot: Set<Int32> = []
            /// Bumped by every watch: a one-shot descriptor is disarmed after an event only if nobody re-armed it
            /// since the set was taken.
            var generation: [Int32: UInt64] = [:]
        }
        private let interest = Interest()

        init() throws {}

        func close() {}

        func watch(_ fd: Int32, read: Bool, write: Bool, new: Bool, oneShot: Bool = false) {
            interest.lock.lock()
            defer { interest.lock.unlock() }
            interest.events[fd] = (read ? Int16(POLLIN) : 0) | (write ? Int16(POLLOUT) : 0)
            interest.generation[fd, default: 0] &+= 1
            if oneShot { interest.oneShot.insert(fd) } else { interest.oneShot.remove(fd) }
        }

        func forget(_ fd: Int32) {
            interest.lock.lock()
            defer { interest.lock.unlock() }
            interest.events[fd] = nil
            interest.generation[fd] = nil
            interest.oneShot.remove(fd)
        }

        func wait(milliseconds: Int32) -> [Event] {
            interest.lock.lock()
            // Disarmed descriptors are left out (poll reports hang-ups even without events: no spinning on them).
            var descriptors = interest.events.filter { $0.value != 0 }.map {
                pollfd(fd: $0.key, events: $0.value, revents: 0)
            }
            let generations = interest.generation
            interest.lock.unlock()
            let count = poll(&descriptors, nfds_t(descriptors.count), milliseconds)
            guard count > 0 else { return [] }
            let ready = descriptors.filter { $0.revents != 0 }
            interest.lock.lock()
            for entry in ready
            where interest.oneShot.contains(entry.fd) && interest.generation[entry.fd] == generations[entry.fd] {
                interest.events[entry.fd] = 0
            }
            interest.lock.unlock()
            return ready.map { entry in
                Event(
                    fd: entry.fd, readable: entry.revents & Int16(POLLIN) != 0,
                    writable: entry.revents & Int16(POLLOUT) != 0,
                    failed: entry.revents & Int16(POLLERR | POLLHUP | POLLNVAL) != 0)
            }
        }
    #endif
}
