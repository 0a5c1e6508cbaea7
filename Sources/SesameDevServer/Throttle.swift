/// Failures per key (an account, a browser) in a sliding window, so that a limit falls on whoever misbehaves and
/// on nobody else.
///
/// At most ``maximumKeys`` keys are kept: past that, keys whose failures have left the window go first, then those
/// whose last failure is oldest — never a key at its limit (a flood of new keys cannot grow memory, nor lift a
/// back-off; it can only make the quietest keys forget early).
struct FailureWindow {
    let limit: Int
    /// Seconds.
    let window: Int64
    private var failures: [String: [Int64]] = [:]
    private var lastSweep: Int64 = .min
    static let maximumKeys = 10_000

    init(limit: Int, window: Int64) {
        self.limit = limit
        self.window = window
    }

    /// Where the failures of new keys go when the table is full of keys at their limit.
    ///
    /// (Ten thousand keys in back-off at once.) One shared bucket that only records, so memory stays bounded. Nobody is judged by it —
    /// judging absent keys by a shared bucket would let a burst of new keys lock every innocent account out — so in
    /// that extreme state new keys are not limited until a sweep makes room.
    static let overflow = "\u{0}overflow"

    /// Whether `key` has `limit` failures of its own within the window ending `now`.
    func isOver(_ key: String, now: Int64) -> Bool {
        (failures[key]?.filter { $0 > now - window }.count ?? 0) >= limit
    }

    /// Counts a failure of `key` at `now`.
    mutating func record(_ key: String, now: Int64) {
        var key = key
        if failures[key] == nil, failures.count >= Self.maximumKeys {
            // A full table is swept at most once a second (a sweep walks every key).
            if lastSweep != now {
                lastSweep = now
                evict(now: now)
            }
            if failures.count >= Self.maximumKeys { key = Self.overflow }
        }
        var times = failures[key, default: []].filter { $0 > now - window }
        times.append(now)
        failures[key] = Array(times.suffix(limit))
    }

    /// How many keys are kept.
    var count: Int { failures.count }

    /// Forgets `key` (after a success).
    mutating func clear(_ key: String) { failures[key] = nil }

    private mutating func evict(now: Int64) {
        failures = failures.filter { $0.value.contains { $0 > now - window } }
        guard failures.count >= Self.maximumKeys else { return }
        // Keys at their limit are kept whatever happens (a flood of new keys must not lift a back-off); of the
        // others, the half with the newest failures.
        let over = failures.filter { $0.key == Self.overflow || isOver($0.key, now: now) }
        let others = failures.filter { !isOver($0.key, now: now) }.sorted {
            ($0.value.last ?? 0) > ($1.value.last ?? 0)
        }
        .prefix(max(0, Self.maximumKeys / 2 - over.count))
        failures = over.merging(others.map { ($0.key, $0.value) }) { first, _ in first }
    }
}

/// The per-account back-off of password checks (`/login`, the sign-in form, the device page).
///
/// After ``failuresBeforeBackOff`` wrong passwords within five minutes, an account's password is checked at most
/// once a second: more attempts are answered at once, without hashing, with the seconds to wait. A correct password
/// is still accepted whenever it is checked, and other accounts are not affected: nobody can lock another user out,
/// only slow down the guessing of one account's password (and the CPU it costs) to one guess a second.
struct PasswordBackOff {
    static let failuresBeforeBackOff = 5
    private var failures = FailureWindow(limit: failuresBeforeBackOff, window: 300)
    /// When a check was last let through for an account in back-off.
    private var lastChecked = FailureWindow(limit: 1, window: 1)

    /// Nil when `account`'s password may be checked now; else the seconds to wait.
    mutating func admit(_ account: String, now: Int64) -> Int64? {
        guard failures.isOver(account, now: now) else { return nil }
        if lastChecked.isOver(account, now: now) { return 1 }
        lastChecked.record(account, now: now)
        return nil
    }

    mutating func failed(_ account: String, now: Int64) { failures.record(account, now: now) }

    mutating func succeeded(_ account: String) {
        failures.clear(account)
        lastChecked.clear(account)
    }
}
