import Foundation

#if canImport(CSQLite)
    import CSQLite
    private let transient = csesame_sqlite_transient()
#elseif canImport(SQLite3)
    import SQLite3
    private let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
#endif

/// A value in or out of SQLite.
enum SQLiteValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])

    var integer: Int64? {
        if case .integer(let value) = self { return value }
        return nil
    }
    var text: String? {
        if case .text(let value) = self { return value }
        return nil
    }
    var blob: [UInt8]? {
        if case .blob(let value) = self { return value }
        return nil
    }
}

/// One SQLite connection, used from many threads one at a time (every call takes the lock), with prepared
/// statements cached by their SQL.
final class SQLiteDatabase: @unchecked Sendable {
    // All access to `handle` and `statements` happens inside `lock`.
    private let lock = NSRecursiveLock()
    private let handle: OpaquePointer
    private var statements: [String: OpaquePointer] = [:]

    /// Opens (creating if needed) the database at `path`; `:memory:` for a private in-memory database.
    init(path: String) throws {
        if path != ":memory:" { try Self.checkPrivate(path) }
        var db: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX
        guard sqlite3_open_v2(path, &db, flags, nil) == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close(db)
            throw DevServerError("cannot open the database \(path): \(message)")
        }
        handle = db
        sqlite3_busy_timeout(db, 5000)
        if path != ":memory:" {
            try execute("PRAGMA journal_mode = WAL")
            try execute("PRAGMA synchronous = NORMAL")
            chmod(path, 0o600)
        }
        try execute("PRAGMA foreign_keys = ON")
    }

    /// The database holds the signing keys and password hashes: its folder, the file and SQLite's companions
    /// (`-wal`, `-shm`, `-journal`) must belong to this user and be writable by no one else (a file another user
    /// created beforehand, mode 0666, would receive them); a new file is made 0600 before SQLite opens it, and SQLite
    /// gives its companions the file's mode.
    ///
    /// - Throws: ``DevServerError`` naming the path.
    static func checkPrivate(_ path: String) throws {
        let folder = (path as NSString).deletingLastPathComponent
        try checkAncestors(of: folder.isEmpty ? FileManager.default.currentDirectoryPath : folder, for: path)
        var info = stat()
        guard stat(folder.isEmpty ? "." : folder, &info) == 0 else {
            throw DevServerError("cannot use the database \(path): its folder does not exist")
        }
        // Not even a sticky shared folder such as /tmp: another user could create a companion file there between
        // this check and SQLite's own open.
        guard info.st_uid == geteuid(), info.st_mode & 0o022 == 0 else {
            throw DevServerError(
                "refusing the database \(path): its folder belongs to another user or others can write to it "
                    + "(use a folder of your own, mode 0700 or 0755)")
        }
        for file in [path, path + "-wal", path + "-shm", path + "-journal"] {
            var fileInfo = stat()
            guard lstat(file, &fileInfo) == 0 else { continue }
            guard fileInfo.st_mode & S_IFMT == S_IFREG, fileInfo.st_uid == geteuid(), fileInfo.st_mode & 0o077 == 0
            else {
                throw DevServerError(
                    "refusing the database \(path): \(file) is not a private file of this user (mode 0600, not a link); "
                        + "remove it or pick another --db")
            }
        }
        // A new database starts 0600, so nothing is ever written to a file others can read.
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        if fd >= 0 { close(fd) }
    }

    /// Every folder on the way to `folder` must be one nobody else can swap out between this check and SQLite's
    /// later opens of the companions: owned by this user or root, and writable by others only when sticky (then
    /// nobody can rename this user's entries in it); a symbolic link on the way must belong to this user or root.
    private static func checkAncestors(of folder: String, for path: String) throws {
        let absolute =
            folder.hasPrefix("/") ? folder : FileManager.default.currentDirectoryPath + "/" + folder
        var current = ""
        for component in absolute.split(separator: "/") where !component.isEmpty {
            current += "/" + component
            var link = stat()
            guard lstat(current, &link) == 0 else { continue }  // a missing folder fails the folder check after
            if link.st_mode & S_IFMT == S_IFLNK, link.st_uid != geteuid(), link.st_uid != 0 {
                throw DevServerError("refusing the database \(path): \(current) is a link another user owns")
            }
            var info = stat()
            guard stat(current, &info) == 0 else { continue }
            let ownedSafely = info.st_uid == geteuid() || info.st_uid == 0
            let writableByOthers = info.st_mode & 0o022 != 0
            guard ownedSafely, !writableByOthers || info.st_mode & S_ISVTX != 0 else {
                throw DevServerError(
                    "refusing the database \(path): \(current) belongs to another user or others can write to it, "
                        + "so the folder could be swapped under the server (use a folder of your own)")
            }
        }
    }

    deinit {
        for statement in statements.values { sqlite3_finalize(statement) }
        sqlite3_close(handle)
    }

    private func error(_ what: String) -> DevServerError {
        DevServerError("\(what): \(String(cString: sqlite3_errmsg(handle)))")
    }

    /// Runs SQL without results (several statements allowed).
    func execute(_ sql: String) throws {
        try withLock {
            guard sqlite3_exec(handle, sql, nil, nil, nil) == SQLITE_OK else { throw error("SQL failed") }
        }
    }

    /// Runs one statement and returns its rows.
    @discardableResult
    func query(_ sql: String, _ parameters: [SQLiteValue] = []) throws -> [[SQLiteValue]] {
        try withLock {
            let statement = try prepared(sql)
            defer {
                sqlite3_reset(statement)
                sqlite3_clear_bindings(statement)
            }
            for (index, parameter) in parameters.enumerated() {
                try bind(parameter, at: Int32(index + 1), in: statement)
            }
            var rows: [[SQLiteValue]] = []
            while true {
                let status = sqlite3_step(statement)
                if status == SQLITE_DONE { break }
                guard status == SQLITE_ROW else { throw error("SQL step failed") }
                rows.append((0..<sqlite3_column_count(statement)).map { column(statement, $0) })
            }
            return rows
        }
    }

    /// The number of rows the last statement changed.
    var changes: Int { withLock { Int(sqlite3_changes(handle)) } }

    /// Runs `body` in an immediate transaction, committing if it returns and rolling back if it throws.
    func transaction<Result>(_ body: () throws -> Result) throws -> Result {
        try withLock {
            try execute("BEGIN IMMEDIATE")
            do {
                let result = try body()
                try execute("COMMIT")
                return result
            } catch {
                try? execute("ROLLBACK")
                throw error
            }
        }
    }

    private func withLock<Result>(_ body: () throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    private func prepared(_ sql: String) throws -> OpaquePointer {
        if let statement = statements[sql] { return statement }
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(handle, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            throw error("SQL prepare failed")
        }
        statements[sql] = statement
        return statement
    }

    private func bind(_ value: SQLiteValue, at index: Int32, in statement: OpaquePointer) throws {
        let status: Int32
        switch value {
        case .null: status = sqlite3_bind_null(statement, index)
        case .integer(let value): status = sqlite3_bind_int64(statement, index, value)
        case .real(let value): status = sqlite3_bind_double(statement, index, value)
        case .text(let value):
            // The byte length, never -1: a NUL inside the text must not cut it short ("alice@x\0evil" is not alice).
            // (A trailing 0 keeps the pointer valid for empty text; the length excludes it.)
            let bytes = value.utf8.map { CChar(bitPattern: $0) } + [0]
            status = bytes.withUnsafeBufferPointer { buffer in
                sqlite3_bind_text(statement, index, buffer.baseAddress, Int32(buffer.count - 1), transient)
            }
        case .blob(let value):
            status = value.withUnsafeBytes {
                sqlite3_bind_blob(statement, index, $0.baseAddress, Int32($0.count), transient)
            }
        }
        guard status == SQLITE_OK else { throw error("SQL bind failed") }
    }

    private func column(_ statement: OpaquePointer, _ index: Int32) -> SQLiteValue {
        switch sqlite3_column_type(statement, index) {
        case SQLITE_INTEGER: return .integer(sqlite3_column_int64(statement, index))
        case SQLITE_FLOAT: return .real(sqlite3_column_double(statement, index))
        case SQLITE_TEXT:
            guard let text = sqlite3_column_text(statement, index) else { return .null }
            return .text(String(cString: text))
        case SQLITE_BLOB:
            let count = Int(sqlite3_column_bytes(statement, index))
            guard count > 0, let pointer = sqlite3_column_blob(statement, index) else { return .blob([]) }
            return .blob(Array(UnsafeRawBufferPointer(start: pointer, count: count)))
        default:
            return .null
        }
    }
}

/// An error starting or configuring the development server.
public struct DevServerError: Error, CustomStringConvertible, Sendable {
    /// What went wrong.
    public let description: String

    /// Creates an error.
    public init(_ description: String) { self.description = description }
}
