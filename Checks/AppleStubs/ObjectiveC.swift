// Stand-in for the ObjectiveC module, for type-checking only: where Apple declares NSObject and NSObjectProtocol.
// On Apple platforms they come from ObjectiveC (below Foundation, which re-exports it), not from Foundation as on
// Linux, so a file whose only public use of Foundation is NSObject gets "public import of 'Foundation' was not used
// in public declarations" there. The Apple check copy (Scripts/apple_check_copy.py) spells NSObject as
// `ObjectiveC.NSObject` and imports this module wherever a file imports Foundation, so the warning shows here too.
// Only what our sources and the other stand-ins use is declared.

/// The root class (Apple: `NSObject`).
open class NSObject: NSObjectProtocol {
    public init() {}
    open func isEqual(_ object: Any?) -> Bool { fatalError("Apple stand-in: type-checking only") }
    open var hash: Int { fatalError("Apple stand-in: type-checking only") }
    open var description: String { fatalError("Apple stand-in: type-checking only") }
}

/// What every Objective-C object answers (Apple: `NSObjectProtocol`).
public protocol NSObjectProtocol: AnyObject {
    func isEqual(_ object: Any?) -> Bool
    var hash: Int { get }
    var description: String { get }
}

// The Swift overlay's conformances (Apple: `isEqual` and `hash` behind `==` and `hash(into:)`).
extension NSObject: Hashable, CustomStringConvertible {
    public static func == (lhs: NSObject, rhs: NSObject) -> Bool { lhs.isEqual(rhs) }
    public func hash(into hasher: inout Hasher) { hasher.combine(hash) }
}
