import SesameJOSE

/// What the server has done, for tests to assert on (`GET /_dev/counters`).
struct Counters: Sendable {
    var requests: [String: Int] = [:]
    var registrations = 0
    var logins = 0
    var refreshes = 0
    var refreshFailures = 0
    var reuseDetections = 0
    var appleExchanges = 0
    var logouts = 0
    var codeExchanges = 0
    var codeFailures = 0
    var codeReuses = 0
    var deviceGrants = 0
    var reuseGraceRefreshes = 0
    var revocations = 0
    var endSessions = 0
    /// Passwords hashed to be checked (a back-off answers without hashing).
    var passwordChecks = 0
    /// Clients registered at `/connect/register` (RFC 7591).
    var clientRegistrations = 0
    /// Token exchanges granted (RFC 8693).
    var tokenExchanges = 0
    var clientCredentialsGrants = 0
    var clientAuthenticationFailures = 0
    var deviceSessions = 0
    var nativeSSOExchanges = 0
    var deviceSessionsEnded = 0

    var jsonValue: JOSEValue {
        var requestCounts = JOSEObject()
        for (route, count) in requests.sorted(by: { $0.key < $1.key }) { requestCounts[route] = .integer(Int64(count)) }
        return [
            "requests": .object(requestCounts), "registrations": .integer(Int64(registrations)),
            "logins": .integer(Int64(logins)), "refreshes": .integer(Int64(refreshes)),
            "refreshFailures": .integer(Int64(refreshFailures)), "reuseDetections": .integer(Int64(reuseDetections)),
            "appleExchanges": .integer(Int64(appleExchanges)), "logouts": .integer(Int64(logouts)),
            "codeExchanges": .integer(Int64(codeExchanges)), "codeFailures": .integer(Int64(codeFailures)),
            "codeReuses": .integer(Int64(codeReuses)), "deviceGrants": .integer(Int64(deviceGrants)),
            "reuseGraceRefreshes": .integer(Int64(reuseGraceRefreshes)),
            "revocations": .integer(Int64(revocations)), "endSessions": .integer(Int64(endSessions)),
            "passwordChecks": .integer(Int64(passwordChecks)),
            "clientRegistrations": .integer(Int64(clientRegistrations)),
            "tokenExchanges": .integer(Int64(tokenExchanges)),
            "clientCredentialsGrants": .integer(Int64(clientCredentialsGrants)),
            "clientAuthenticationFailures": .integer(Int64(clientAuthenticationFailures)),
            "deviceSessions": .integer(Int64(deviceSessions)),
            "nativeSSOExchanges": .integer(Int64(nativeSSOExchanges)),
            "deviceSessionsEnded": .integer(Int64(deviceSessionsEnded)),
        ]
    }
}
