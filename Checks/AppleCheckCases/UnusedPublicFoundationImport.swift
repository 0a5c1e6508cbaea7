// expect (iOS): public import of 'Foundation' was not used
// a public import of Foundation whose only public use is NSObject (ObjectiveC's on Apple platforms)
public import AuthenticationServices
public import Foundation

public final class Presenter: NSObject {}
