import Foundation
import SesameJOSE

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `sesame demo`: the whole product in under a second — every step on an embedded dev server, narrated with what went over
/// the wire (secrets cut to a prefix and a length) and how long it took; exit 1 naming the step that failed.
struct DemoCommand: SesameCommand {
    static let json = OptionSpec("--json", "print one JSON object per step (and one for the summary) instead of text")
    static let pause = OptionSpec("--step", "pause after each step until Enter is pressed")
    static let secondProcess = OptionSpec(
        "--second-process", value: "DIR",
        "internal: what the demo runs as its other processes (DIR is its scratch folder)")

    static let spec = CommandSpec(
        words: ["demo"], summary: "the whole product in under a second, on an embedded dev server (loopback only)",
        arguments: nil,
        discussion: """
            Starts the development identity server on an ephemeral loopback port (SQLite in memory, 60-second access
            tokens) and runs, step by step: OpenID Connect sign-in (code + PKCE through the real sign-in form), the ID
            token verified against the JWKS, an API call, the token expiring under 50 concurrent calls (one refresh),
            two processes sharing one store (still one refresh), a network failure during a refresh (the session is
            kept), a DPoP-bound call with a server nonce, a stolen refresh token replayed (reuse detected, the family
            revoked), sign-out with revocation, forged JWTs rejected and the REST contract. Prints what went over the
            wire (never a whole secret) and a summary; exits 1 naming the first step that failed. Colour only on a
            terminal, never with NO_COLOR.
            """,
        options: [json, pause, secondProcess], examples: ["sesame demo", "sesame demo --json", "sesame demo --step"],
        exitCodes: [], command: Self.self)

    let emitsJSON: Bool
    let pauses: Bool
    let secondProcessFolder: String?

    init(_ arguments: ParsedArguments) throws {
        try arguments.noPositionals()
        emitsJSON = arguments.flag(Self.json)
        pauses = arguments.flag(Self.pause)
        secondProcessFolder = arguments.value(Self.secondProcess)
    }

    func run() async throws {
        if let folder = secondProcessFolder {
            try await DemoTour.secondProcess(folder: URL(fileURLWithPath: folder))
            return
        }
        let environment = ProcessInfo.processInfo.environment
        let colour = !emitsJSON && isatty(STDOUT_FILENO) == 1 && (environment["NO_COLOR"] ?? "").isEmpty
        let narrator = DemoNarrator(json: emitsJSON, colour: colour, pauses: pauses)
        try await DemoTour(narrator: narrator).run()
        narrator.summary()
        if let failed = narrator.firstFailure {
            throw CLIError(
                status: .failure, code: "demo_failed",
                message: "step \(failed.number) (\(failed.title)) failed: \(failed.failure ?? "a check did not hold")")
        }
    }
}

/// Prints the steps as text or JSON, times them, and keeps the summary.
final class DemoNarrator {
    struct Step {
        let number: Int
        let title: String
        var notes: [String] = []
        var wire: [String] = []
        var failure: String?
        var milliseconds = 0.0
        var ok: Bool { failure == nil }
    }

    let json: Bool
    let colour: Bool
    let pauses: Bool
    private(set) var steps: [Step] = []
    var firstFailure: Step? { steps.first { !$0.ok } }

    init(json: Bool, colour: Bool, pauses: Bool) {
        self.json = json
        self.colour = colour
        self.pauses = pauses
    }

    func paint(_ text: String, _ code: String) -> String { colour ? "\u{1B}[\(code)m\(text)\u{1B}[0m" : text }

    /// What a step's body reports.
    final class Log {
        var notes: [String] = []
        var failure: String?

        /// A line of narration.
        func note(_ text: String) { notes.append(text) }

        /// A promise checked: a failed one fails the step (the rest of the step still runs).
        func check(_ label: String, _ holds: Bool, _ detail: String = "") {
            notes.append((holds ? "✓ " : "✗ ") + label + (detail.isEmpty ? "" : ": \(detail)"))
            if !holds, failure == nil { failure = label }
        }
    }

    /// Runs one step; returns whether it held.
    ///
    /// A thrown error fails it too.
    @discardableResult
    func step(_ title: String, wire: DemoWire, _ body: (Log) async throws -> Void) async -> Bool {
        var step = Step(number: steps.count + 1, title: title)
        let log = Log()
        let started = ContinuousClock.now
        do {
            try await body(log)
        } catch {
            log.notes.append("✗ \(PrintableText.sanitized("\(error)", limit: 300))")
            log.failure = log.failure ?? PrintableText.sanitized("\(error)", limit: 200)
        }
        let elapsed = ContinuousClock.now - started
        step.milliseconds = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
        step.notes = log.notes
        step.wire = wire.drain()
        step.failure = log.failure
        steps.append(step)
        print(step)
        if pauses, !json {
            FileHandle.standardOutput.write(Data(paint("  (Enter for the next step)", "2").utf8))
            _ = readLine()
        }
        return step.ok
    }

    private func print(_ step: Step) {
        if json {
            let object: JOSEValue = [
                "step": .integer(Int64(step.number)), "title": .string(step.title), "ok": .bool(step.ok),
                "ms": .number((step.milliseconds * 10).rounded() / 10),
                "wire": .array(step.wire.map { .string($0) }), "notes": .array(step.notes.map { .string($0) }),
                "failure": step.failure.map { .string($0) } ?? .null,
            ]
            Swift.print(object.jsonString)
            return
        }
        let time = String(format: "%.1f ms", step.milliseconds)
        Swift.print("\n" + paint("▸ \(step.number). \(step.title)", "1") + paint("  \(time)", "2"))
        for line in step.wire { Swift.print(paint("    " + line, "2")) }
        for note in step.notes {
            let painted = note.hasPrefix("✓") ? paint(note, "32") : note.hasPrefix("✗") ? paint(note, "31") : note
            Swift.print("  " + painted)
        }
    }

    /// The summary table (text) or object (JSON).
    func summary() {
        let passed = steps.filter(\.ok).count
        if json {
            let object: JOSEValue = [
                "summary": .bool(true), "steps": .integer(Int64(steps.count)), "passed": .integer(Int64(passed)),
                "failed": .array(steps.filter { !$0.ok }.map { .integer(Int64($0.number)) }),
            ]
            Swift.print(object.jsonString)
            return
        }
        Swift.print("\n" + paint("Summary", "1"))
        let width = steps.map(\.title.count).max() ?? 10
        for step in steps {
            let mark = step.ok ? paint("✓", "32") : paint("✗", "31")
            let title = step.title.padding(toLength: width, withPad: " ", startingAt: 0)
            Swift.print(
                "  \(mark) \(String(format: "%2d", step.number)). \(title)  \(String(format: "%8.1f ms", step.milliseconds))"
            )
        }
        let total = steps.map(\.milliseconds).reduce(0, +)
        Swift.print(
            "\n\(passed) of \(steps.count) steps held in \(String(format: "%.2f", total / 1000)) s."
                + (passed == steps.count ? " Demo complete: every check behaved." : ""))
    }
}
