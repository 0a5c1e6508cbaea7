import Foundation

/// Whether this run is under a sanitizer (`Scripts/sanitize.sh` sets `SESAME_SANITIZER`): tests whose point is a
/// time or CPU bound under load are off then, since ThreadSanitizer and AddressSanitizer slow everything 2-15 times;
/// their races and memory errors are still checked by every other test that drives the same code.
package let underSanitizer = ProcessInfo.processInfo.environment["SESAME_SANITIZER"]?.isEmpty == false

/// Whether the tests that hold over a thousand descriptors open run in this process (`SESAME_DESCRIPTOR_HEAVY=1`).
///
/// They hold 2,000 sockets under a one-minute limit, so `Scripts/test.sh` runs them after the main run, alone, where
/// the rest of the suite's servers neither share their descriptors nor slow them. (They were put apart when
/// Foundation's `Process.run()` crashed the test process at over about 1,350 descriptors; nothing here starts a
/// process through Foundation any more: `ChildProcess` does, and `Scripts/check-portability.sh` keeps it so.)
package let runsDescriptorHeavyTests = ProcessInfo.processInfo.environment["SESAME_DESCRIPTOR_HEAVY"] == "1"

/// Why a descriptor-heavy test did not run here.
package let descriptorHeavyNotice =
    "holds 2,000 sockets under a time limit: Scripts/test.sh runs it alone (SESAME_DESCRIPTOR_HEAVY=1), after the rest"
