import Foundation

/// Whether this run is under a sanitizer (`Scripts/sanitize.sh` sets `SESAME_SANITIZER`): tests whose point is a
/// time or CPU bound under load are off then, since ThreadSanitizer and AddressSanitizer slow everything 2-15 times;
/// their races and memory errors are still checked by every other test that drives the same code.
package let underSanitizer = ProcessInfo.processInfo.environment["SESAME_SANITIZER"]?.isEmpty == false

/// Whether the tests that hold over a thousand descriptors open run in this process (`SESAME_DESCRIPTOR_HEAVY=1`).
///
/// Foundation's `Process.run()` on Linux (swift-corelibs-foundation before its PR #5472: Swift 6.3.1 has the bug)
/// copies 256 bytes of every `/proc/self/fd` entry; with more than about 1,350 descriptors open, glibc's directory
/// buffer fills and the copy can run off mapped memory, killing the whole test process (seen in a parallel run: a
/// CLI test spawned `sesame` while the 1,000-connection test held 2,000 sockets). Those tests therefore run only in
/// a process that spawns nothing at the same time: `Scripts/test.sh` runs them after the main run, alone.
package let runsDescriptorHeavyTests = ProcessInfo.processInfo.environment["SESAME_DESCRIPTOR_HEAVY"] == "1"

/// Why a descriptor-heavy test did not run here.
package let descriptorHeavyNotice =
    "holds over a thousand descriptors: Scripts/test.sh runs it alone (SESAME_DESCRIPTOR_HEAVY=1), since Foundation's Process.run() in Swift 6.3.1 can crash the test process then"
