// expect (iOS): 'Process' is unavailable in iOS
// Process named only as a parameter's type and in a cast
import Foundation

func describe(_ child: Process?) -> String { child == nil ? "none" : "one" }
func isChild(_ value: Any) -> Bool { value is Process }
