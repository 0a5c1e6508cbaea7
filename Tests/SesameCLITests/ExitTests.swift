import Foundation
import Testing

/// libcrypto's state outlives `exit` (`LibCrypto`): a process that exits while another thread still hashes, or a
/// worker thread retires, does not crash after its work is done (seen: `sesame demo` under load, a few runs in a
/// hundred, SIGSEGV in `OPENSSL_cleanup` or in a retiring thread's destructor).
@Suite struct ExitTests {
    static let probe = CLIRunner.binary.deletingLastPathComponent().appendingPathComponent("sesame-exit-probe")

    @Test(
        "libcrypto still works after exit began, whether SesameJOSE, the libcurl or the URLSession transport used it first",
        arguments: ["jose", "transport", "urlsession"])
    func libcryptoOutlivesExit(firstUse: String) throws {
        let result = try CLIRunner.run(executable: Self.probe, [firstUse])
        #expect(result.status == 0, "status \(result.status): \(result.stderr.suffix(2000))")
    }
}
