/// The members of a JSON object, in document order, with unique names.
///
/// JOSE objects are small (a header has a handful of members, a claim set a few dozen), so members live in one
/// array and lookups scan it: no hashing, one allocation, and the document order kept for display. Equality
/// ignores order, as JSON object equality does.
public struct JOSEObject: Sendable, Hashable, RandomAccessCollection, ExpressibleByDictionaryLiteral {
    /// One member: a name and its value.
    public struct Member: Sendable, Hashable {
        /// The member name.
        public let name: String
        /// The member value.
        public var value: JOSEValue
        /// A hash of the name, so that lookups compare strings only when it matches.
        let fingerprint: UInt64

        /// Creates a member.
        public init(name: String, value: JOSEValue) {
            self.init(name: name, value: value, fingerprint: JOSEObject.fingerprint(of: name))
        }

        init(name: String, value: JOSEValue, fingerprint: UInt64) {
            self.name = name
            self.value = value
            self.fingerprint = fingerprint
        }

        /// Members are equal when their names and values are.
        public static func == (lhs: Member, rhs: Member) -> Bool { lhs.name == rhs.name && lhs.value == rhs.value }

        /// Hashes the name and value.
        public func hash(into hasher: inout Hasher) {
            hasher.combine(name)
            hasher.combine(value)
        }
    }

    /// FNV-1a over the UTF-8 bytes of a name, never 0.
    static func fingerprint(of name: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in name.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return hash | 1
    }

    /// The index of the member named `name`.
    private func index(of name: String) -> Int? {
        let fingerprint = Self.fingerprint(of: name)
        return members.firstIndex { $0.fingerprint == fingerprint && $0.name == name }
    }

    /// A member name with its fingerprint computed once, for lookups on hot paths.
    package struct Name: Sendable {
        package let name: String
        package let fingerprint: UInt64

        package init(_ name: String) {
            self.name = name
            self.fingerprint = JOSEObject.fingerprint(of: name)
        }
    }

    /// The value of the member `name` (a precomputed name).
    package subscript(name: Name) -> JOSEValue? {
        for member in members where member.fingerprint == name.fingerprint && member.name == name.name {
            return member.value
        }
        return nil
    }

    /// The members in document (or insertion) order.
    public private(set) var members: [Member]

    /// An empty object.
    public init() { members = [] }

    /// An object with the members of a dictionary, in name order.
    public init(_ dictionary: [String: JOSEValue]) {
        members = dictionary.sorted { $0.key < $1.key }.map { Member(name: $0.key, value: $0.value) }
    }

    /// An object from members the caller guarantees to be unique by name.
    package init(uniqueMembers: [Member]) { members = uniqueMembers }

    /// An object from a literal; a repeated name keeps the last value.
    public init(dictionaryLiteral elements: (String, JOSEValue)...) {
        members = []
        members.reserveCapacity(elements.count)
        for (name, value) in elements { self[name] = value }
    }

    /// The value of the member named `name`; setting nil removes the member.
    public subscript(name: String) -> JOSEValue? {
        get { index(of: name).map { members[$0].value } }
        set {
            if let index = index(of: name) {
                if let newValue { members[index].value = newValue } else { members.remove(at: index) }
            } else if let newValue {
                members.append(Member(name: name, value: newValue))
            }
        }
    }

    /// The members as a dictionary.
    public var dictionary: [String: JOSEValue] {
        Dictionary(members.map { ($0.name, $0.value) }, uniquingKeysWith: { _, last in last })
    }

    /// The member names in order.
    public var names: [String] { members.map(\.name) }

    /// The position of the first member.
    public var startIndex: Int { members.startIndex }
    /// The position after the last member.
    public var endIndex: Int { members.endIndex }
    /// The member at `position`.
    public subscript(position: Int) -> Member { members[position] }

    /// Objects are equal when they have the same names with equal values, in any order.
    public static func == (lhs: JOSEObject, rhs: JOSEObject) -> Bool {
        guard lhs.members.count == rhs.members.count else { return false }
        return lhs.members.allSatisfy { rhs[$0.name] == $0.value }
    }

    /// Hashes independently of member order.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(members.count)
        var combined = 0
        for member in members { combined ^= member.hashValue }
        hasher.combine(combined)
    }
}
