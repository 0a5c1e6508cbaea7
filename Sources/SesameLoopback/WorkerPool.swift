import Foundation

/// Threads that run jobs in order of submission, as many at once as there are jobs, up to `maximum`.
///
/// A thread is started only when a job finds every existing one busy (so a handler that blocks — a database, a
/// password hash, a test waiting on a semaphore — never holds up the others, up to the maximum); threads stay for
/// the next jobs until ``shutdown()``.
final class WorkerPool: @unchecked Sendable {
    // `jobs`, `threads`, `idle` and `stopping` are guarded by `condition`.
    private let condition = NSCondition()
    private var jobs: [@Sendable () -> Void] = []
    private var next = 0
    private var threads = 0
    private var idle = 0
    private var stopping = false
    private let maximum: Int
    private let name: String

    init(maximum: Int, name: String) {
        self.maximum = max(1, maximum)
        self.name = name
    }

    func submit(_ job: @escaping @Sendable () -> Void) {
        condition.lock()
        defer { condition.unlock() }
        jobs.append(job)
        // Idle threads only count once they take a job: start one whenever the jobs waiting outnumber them.
        if jobs.count - next > idle, threads < maximum {
            threads += 1
            let thread = Thread { [self] in work() }
            thread.name = name
            thread.start()
        } else {
            condition.signal()
        }
    }

    /// Whether jobs are waiting for a thread.
    var hasWaitingJobs: Bool {
        condition.lock()
        defer { condition.unlock() }
        return jobs.count - next > idle
    }

    /// Lets the threads end once the jobs already submitted are done.
    func shutdown() {
        condition.lock()
        stopping = true
        condition.broadcast()
        condition.unlock()
    }

    private func work() {
        while true {
            condition.lock()
            while next == jobs.count, !stopping {
                idle += 1
                condition.wait()
                idle -= 1
            }
            guard next < jobs.count else {
                threads -= 1
                condition.unlock()
                return
            }
            let job = jobs[next]
            next += 1
            if next == jobs.count || next > 1024 {
                jobs.removeFirst(next)
                next = 0
            }
            condition.unlock()
            job()
        }
    }
}
