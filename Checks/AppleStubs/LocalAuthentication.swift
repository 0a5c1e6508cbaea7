// Stand-in declarations of LocalAuthentication (LAContext) for type-checking only.
import Foundation
@_exported import ObjectiveC  // re-exported, as Apple's framework module does

/// An authentication context: evaluated once, reusable for Keychain reads until invalidated.
open class LAContext: ObjectiveC.NSObject {
    public override init() {}
    /// The reason shown in the system's prompt.
    open var localizedReason: String = ""
    /// Ends the context: reads with it prompt again.
    open func invalidate() {}
}
