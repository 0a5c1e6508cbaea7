import Foundation
import SesameLoopback
import Testing

/// The real Linux keyring: a private D-Bus session bus with gnome-keyring-daemon (Debian `dbus`, `gnome-keyring`),
/// its files in the test's folder (never the user's keyring), both stopped when the test ends.
@Suite struct KeyringStoreTests {
    static let toolsAvailable: Bool = {
        let tools = ["/usr/bin/dbus-daemon", "/usr/bin/gnome-keyring-daemon", "/usr/bin/secret-tool"]
        let found = tools.allSatisfy { FileManager.default.isExecutableFile(atPath: $0) }
        if !found {
            print("◇ NOTICE: dbus-daemon, gnome-keyring-daemon or secret-tool missing; the keyring tests are skipped.")
        }
        return found
    }()

    /// Runs `body` (a shell function's body: `return 0` is success, another status names the check that failed)
    /// inside a private session bus with an unlocked keyring whose files live in `home`.
    ///
    /// `start_keyring` (re)starts the keyring from its file; `SESAME` is the CLI. Output goes to files (daemons
    /// would hold a pipe open); the log and the CLI's standard error come back.
    static func inPrivateKeyring(home: URL, _ body: String) throws -> (status: Int32, log: String) {
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        let log = home.appendingPathComponent("test.log").path
        let script = """
            exec 2>'\(log)'
            cd '\(home.path)'
            # The keyring's files (login.keyring) in the test's folder, never the user's.
            export XDG_DATA_HOME='\(home.path)/data' HOME='\(home.path)'
            export SESAME='\(CLIRunner.binary.path)' SESAME_HOME='\(home.path)/sesame'
            dbus-daemon --session --fork --print-address=3 --print-pid=4 3>bus.address 4>bus.pid </dev/null >/dev/null \
                || exit 10
            export DBUS_SESSION_BUS_ADDRESS=$(cat bus.address)
            keyring=
            start_keyring() {
                [ -n "$keyring" ] && { kill -9 $keyring 2>/dev/null; wait $keyring 2>/dev/null; }
                echo -n pw | gnome-keyring-daemon --foreground --unlock --components=secrets >/dev/null 2>&1 &
                keyring=$!
                # Wait (up to 10 s) until the keyring owns its bus name.
                for _ in $(seq 1 100); do
                    dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \\
                        org.freedesktop.DBus.NameHasOwner string:org.freedesktop.secrets 2>/dev/null | grep -q true \\
                        && return 0
                    sleep 0.1
                done
                return 1
            }
            start_keyring || exit 9
            run() {
            \(body)
            }
            run; status=$?
            kill -9 $keyring 2>/dev/null
            kill $(cat bus.pid) 2>/dev/null
            exit $status
            """
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", script]
        process.standardOutput = .null
        process.standardError = .null
        try process.run()
        process.waitUntilExit()
        return (process.terminationStatus, (try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
    }

    @Test(
        "--store keyring keeps credentials in GNOME Keyring (nothing on disk), is the default when a keyring answers, 24 processes across 2 s expiries share one refresh lock (0 reuse), and a locked keyring is exit 4 (unavailable, nothing deleted) until it is unlocked",
        .enabled(if: toolsAvailable, "dbus-daemon, gnome-keyring-daemon or secret-tool is not installed"))
    func keyring() throws {
        let server = try ServeProcess(["--access-token-ttl", "2"])
        let home = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: home) }
        let base = server.base.absoluteString
        let (status, log) = try Self.inPrivateKeyring(
            home: home,
            """
            echo pw-correct-horse | "$SESAME" register --rest '\(base)' --email kay@example.com || return 11
            "$SESAME" token >/dev/null || return 12
            "$SESAME" token --store keyring --force-refresh >/dev/null || return 13
            [ -e "$SESAME_HOME/credentials/default.json" ] && return 14
            # 24 processes across the expiry of a 2 s access token, a third forcing a refresh.
            for round in 1 2; do
                sleep 2.3
                pids=""
                for i in $(seq 1 24); do
                    if [ $((i % 3)) -eq 0 ]; then force=--force-refresh; else force=; fi
                    "$SESAME" token --store keyring $force >/dev/null &
                    pids="$pids $!"
                done
                for pid in $pids; do wait $pid || return 17; done
            done
            curl -s '\(base)/_dev/counters' | grep -q '"reuseDetections":0' || return 18
            "$SESAME" logout || return 15
            "$SESAME" status --store keyring >/dev/null 2>&1; [ $? -eq 3 ] || return 16
            # A locked keyring holding the item is "unavailable" (exit 4), never "not signed in".
            echo pw-correct-horse | "$SESAME" login --rest '\(base)' --email kay@example.com --store keyring || return 19
            dbus-send --session --print-reply --dest=org.freedesktop.secrets /org/freedesktop/secrets \\
                org.freedesktop.Secret.Service.Lock array:objpath:/org/freedesktop/secrets/collection/login \\
                >/dev/null || return 20
            "$SESAME" status >/dev/null; [ $? -eq 4 ] || return 21
            # Unlocked again (the user logs in: the keyring starts unlocked from its file), the same session is
            # there: nothing was deleted while it was locked.
            start_keyring || return 22
            "$SESAME" token >/dev/null || return 23
            [ -s data/keyrings/login.keyring ] || return 24
            return 0
            """)
        #expect(status == 0, "\(log)")
        #expect(!log.contains("pw-correct-horse"))
    }

    @Test(
        "A keyring item an earlier release wrote (no format) is read and rewritten in place in the current format; one a newer release wrote is unavailable (exit 4) and left exactly as it was",
        .enabled(if: toolsAvailable, "dbus-daemon, gnome-keyring-daemon or secret-tool is not installed"))
    func keyringMigration() throws {
        let server = try ServeProcess()
        let home = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: home) }
        let (status, log) = try Self.inPrivateKeyring(
            home: home,
            """
            item="xdg:schema dev.sesame.Credentials service dev.sesame.cli account default"
            echo pw-correct-horse | "$SESAME" register --rest '\(server.base.absoluteString)' --email lee@example.com \\
                --store keyring >/dev/null || return 11
            secret-tool lookup $item > current.json || return 12
            grep -q '"format":2' current.json || return 13
            # The item as the first release wrote it: the same members, no "format".
            python3 -c 'import json,sys; d=json.load(open("current.json")); d.pop("format"); print(json.dumps(d), end="")' \\
                > legacy.json || return 14
            secret-tool store --label='Sesame credentials (default)' $item < legacy.json || return 15
            secret-tool lookup $item | grep -q '"format"' && return 16
            "$SESAME" token --store keyring > token.txt || return 17
            python3 -c 'import json,sys; assert open("token.txt").read().strip() == json.load(open("legacy.json"))["accessToken"]' \\
                || return 18
            secret-tool lookup $item > migrated.json || return 19
            python3 -c 'import json; m=json.load(open("migrated.json")); l=json.load(open("legacy.json")); assert m.pop("format") == 2 and m == l' \\
                || return 20
            # A newer release's item: unavailable, never "not signed in", and not rewritten.
            printf '%s' '{"format":3,"accessToken":"a","tokenType":"Bearer"}' > newer.json
            secret-tool store --label='Sesame credentials (default)' $item < newer.json || return 21
            "$SESAME" token --store keyring >/dev/null; [ $? -eq 4 ] || return 22
            [ "$(secret-tool lookup $item)" = "$(cat newer.json)" ] || return 23
            return 0
            """)
        #expect(status == 0, "\(log)")
    }
}
