import Foundation
public import SesameJOSE

/// The `claims` request parameter (OIDC Core §5.5): which claims a client asks for in the ID token and in the
/// UserInfo answer, each voluntary or essential, optionally with the value(s) it expects.
struct ClaimsRequest: Sendable, Equatable {
    /// One requested claim (§5.5.1): `null`, or `{"essential"?, "value"?, "values"?}`.
    struct Entry: Sendable, Equatable {
        var essential = false
        var value: JOSEValue?
        var values: [JOSEValue]?
    }

    var idToken: [String: Entry] = [:]
    var userInfo: [String: Entry] = [:]

    var isEmpty: Bool { idToken.isEmpty && userInfo.isEmpty }

    /// Parses the parameter's JSON; members other than `id_token` and `userinfo` are ignored (§5.5).
    static func parse(_ text: String) -> Result<ClaimsRequest, OAuthFailure> {
        func invalid(_ why: String) -> Result<ClaimsRequest, OAuthFailure> {
            .failure(OAuthFailure("invalid_request", "claims: \(why)"))
        }
        guard let object = try? JOSEValue.parse(Data(text.utf8)).objectValue else {
            return invalid("the parameter must be a JSON object")
        }
        var request = ClaimsRequest()
        for member in object where member.name == "id_token" || member.name == "userinfo" {
            var entries: [String: Entry] = [:]
            switch member.value {
            case .null: break
            case .object(let claims):
                guard claims.count <= 100 else { return invalid("at most 100 claims per member") }
                for claim in claims {
                    guard !claim.name.isEmpty, claim.name.utf8.count <= 256 else {
                        return invalid("a claim name is empty or too long")
                    }
                    var entry = Entry()
                    switch claim.value {
                    case .null: break
                    case .object(let options):
                        if let essential = options["essential"] {
                            guard case .bool(let flag) = essential else { return invalid("essential is true or false") }
                            entry.essential = flag
                        }
                        entry.value = options["value"]
                        if let values = options["values"] {
                            guard let list = values.arrayValue else { return invalid("values is an array") }
                            entry.values = list
                        }
                    default: return invalid("\(claim.name) must be null or an object")
                    }
                    entries[claim.name] = entry
                }
            default: return invalid("\(member.name) must be an object")
            }
            if member.name == "id_token" { request.idToken = entries } else { request.userInfo = entries }
        }
        return .success(request)
    }

    /// The request as canonical JSON (sorted members), as stored with a code and a grant.
    var jsonText: String {
        func encode(_ entries: [String: Entry]) -> JOSEValue {
            var object = JOSEObject()
            for (name, entry) in entries.sorted(by: { $0.key < $1.key }) {
                var options = JOSEObject()
                if entry.essential { options["essential"] = true }
                if let value = entry.value { options["value"] = value }
                if let values = entry.values { options["values"] = .array(values) }
                object[name] = options.isEmpty ? .null : .object(options)
            }
            return .object(object)
        }
        var object = JOSEObject()
        if !idToken.isEmpty { object["id_token"] = encode(idToken) }
        if !userInfo.isEmpty { object["userinfo"] = encode(userInfo) }
        return JOSEValue.object(object).jsonString
    }

    /// Whether `value` is what `entry` asks for (any value when it names none), compared byte for byte.
    static func satisfies(_ value: JOSEValue, _ entry: Entry) -> Bool {
        if let wanted = entry.value, !exactlyEqual(wanted, value) { return false }
        if let allowed = entry.values, !allowed.contains(where: { exactlyEqual($0, value) }) { return false }
        return true
    }

    /// JSON equality with strings (and member names) compared by their UTF-8 bytes: Swift's `==` on `String`
    /// would take `jos\u{E9}` and `jose\u{301}` for the same `sub`.
    static func exactlyEqual(_ first: JOSEValue, _ second: JOSEValue) -> Bool {
        switch (first, second) {
        case (.string(let a), .string(let b)): return a.utf8.elementsEqual(b.utf8)
        case (.array(let a), .array(let b)):
            return a.count == b.count && zip(a, b).allSatisfy { exactlyEqual($0, $1) }
        case (.object(let a), .object(let b)):
            // Member names are unique (the parser refuses duplicates); their order does not matter.
            return a.count == b.count
                && a.allSatisfy { member in
                    b.contains { $0.name.utf8.elementsEqual(member.name.utf8) && exactlyEqual($0.value, member.value) }
                }
        case (.string, _), (_, .string), (.array, _), (_, .array), (.object, _), (_, .object): return false
        default: return first == second
        }
    }
}

/// The standard claims of OIDC Core §5.1 that each scope asks for (§5.4).
enum StandardClaims {
    static let byScope: [String: [String]] = [
        "profile": [
            "name", "family_name", "given_name", "middle_name", "nickname", "preferred_username", "profile", "picture",
            "website", "gender", "birthdate", "zoneinfo", "locale", "updated_at",
        ],
        "email": ["email", "email_verified"],
        "address": ["address"],
        "phone": ["phone_number", "phone_number_verified"],
    ]

    /// Every standard claim of the scopes above.
    static let all: Set<String> = Set(byScope.values.joined())

    /// The claims `scope` asks for.
    static func requested(by scope: [String]) -> [String] {
        scope.flatMap { byScope[$0] ?? [] }
    }
}

/// Claim values that may name the signed-in user: `${sub}`, `${email}`, `${email_local}` (before the `@`) and
/// `${client_id}` in any string of a template are replaced when a token is issued.
///
/// Templates come from a server's configuration (``DevServer/Configuration/claims``) and from each client
/// (``RegisteredClient/claims``); a configured user's own claims (``DevServer/SeededUser/claims``) are taken as they
/// are.
public enum ClaimTemplate {
    /// `value` with every placeholder replaced.
    public static func fill(_ value: JOSEValue, subject: String, email: String?, clientID: String) -> JOSEValue {
        switch value {
        case .string(let text):
            guard text.contains("${") else { return value }
            let local = email.map { String($0.prefix { $0 != "@" }) } ?? subject
            let values = ["sub": subject, "email": email ?? "", "email_local": local, "client_id": clientID]
            // One pass: a value that itself contains `${…}` is not expanded again.
            var result = ""
            var rest = Substring(text)
            while let open = rest.range(of: "${") {
                result += rest[..<open.lowerBound]
                let after = rest[open.upperBound...]
                if let close = after.firstIndex(of: "}"), let value = values[String(after[..<close])] {
                    result += value
                    rest = after[after.index(after: close)...]
                } else {
                    result += "${"
                    rest = after
                }
            }
            return .string(result + rest)
        case .array(let items):
            return .array(items.map { fill($0, subject: subject, email: email, clientID: clientID) })
        case .object(let object):
            var filled = JOSEObject()
            for member in object {
                filled[member.name] = fill(member.value, subject: subject, email: email, clientID: clientID)
            }
            return .object(filled)
        default: return value
        }
    }
}
