import Foundation

/// Whether this run is under a sanitizer (`Scripts/sanitize.sh` sets `SESAME_SANITIZER`): tests whose point is a
/// time or CPU bound under load are off then, since ThreadSanitizer and AddressSanitizer slow everything 2-15 times;
/// their races and memory errors are still checked by every other test that drives the same code.
package let underSanitizer = ProcessInfo.processInfo.environment["SESAME_SANITIZER"]?.isEmpty == false
