// Stand-in declarations of the SwiftUI API the sample iOS app uses (Examples/iOSApp/App), for type-checking only,
// written from Apple's documentation with the same names, labels, isolation and builders. Never linked or run.
// Like SwiftUI, it re-exports Foundation.
@_exported import Foundation
@_exported import ObjectiveC
import Observation

private func stub() -> Never { fatalError("Apple stand-in: type-checking only") }

@MainActor @preconcurrency public protocol View {
    associatedtype Body: View
    @ViewBuilder @MainActor @preconcurrency var body: Self.Body { get }
}

extension Never: View {
    public typealias Body = Never
    public var body: Never { stub() }
}

public struct EmptyView: View {
    public init() {}
    public var body: Never { stub() }
}

public struct TupleView<T>: View {
    public init(_ value: T) {}
    public var body: Never { stub() }
}

public struct _ConditionalContent<TrueContent: View, FalseContent: View>: View {
    public var body: Never { stub() }
}

extension Optional: View where Wrapped: View {
    public var body: Never { stub() }
}

@resultBuilder public struct ViewBuilder {
    public static func buildBlock() -> EmptyView { stub() }
    public static func buildBlock<Content: View>(_ content: Content) -> Content { content }
    public static func buildBlock<each Content: View>(_ content: repeat each Content) -> TupleView<(repeat each Content)> {
        stub()
    }
    public static func buildExpression<Content: View>(_ content: Content) -> Content { content }
    public static func buildIf<Content: View>(_ content: Content?) -> Content? { content }
    public static func buildEither<T: View, F: View>(first: T) -> _ConditionalContent<T, F> { stub() }
    public static func buildEither<T: View, F: View>(second: F) -> _ConditionalContent<T, F> { stub() }
}

public struct ModifiedContent<Content, Modifier>: View {
    public var body: Never { stub() }
}

extension View {
    /// Runs `action` when the view appears, cancelled when it disappears.
    public func task(
        priority: TaskPriority = .userInitiated, @_inheritActorContext _ action: @escaping @Sendable () async -> Void
    ) -> some View { ModifiedContent<Self, Void>() }
}

public struct Text: View {
    public init<S: StringProtocol>(_ content: S) {}
    public init(verbatim content: String) {}
    public var body: Never { stub() }
}

public struct Button<Label: View>: View {
    public init(action: @escaping @MainActor () -> Void, @ViewBuilder label: () -> Label) {}
    public var body: Never { stub() }
}

extension Button where Label == Text {
    public init<S: StringProtocol>(_ title: S, action: @escaping @MainActor () -> Void) {}
}

public struct ProgressView<Label: View, CurrentValueLabel: View>: View {
    public var body: Never { stub() }
}

extension ProgressView where CurrentValueLabel == EmptyView, Label == EmptyView {
    public init() {}
}

extension ProgressView where CurrentValueLabel == EmptyView, Label == Text {
    public init<S: StringProtocol>(_ title: S) {}
}

public struct TextField<Label: View>: View {
    public var body: Never { stub() }
}

extension TextField where Label == Text {
    public init<S: StringProtocol>(_ title: S, text: Binding<String>) {}
}

public struct SecureField<Label: View>: View {
    public var body: Never { stub() }
}

extension SecureField where Label == Text {
    public init<S: StringProtocol>(_ title: S, text: Binding<String>) {}
}

public struct VStack<Content: View>: View {
    public init(alignment: HorizontalAlignment = .center, spacing: CGFloat? = nil, @ViewBuilder content: () -> Content) {}
    public var body: Never { stub() }
}

public struct HorizontalAlignment: Sendable {
    public static let center = HorizontalAlignment()
    public static let leading = HorizontalAlignment()
}

public protocol DynamicProperty {}

@propertyWrapper @dynamicMemberLookup public struct Binding<Value> {
    public init(get: @escaping () -> Value, set: @escaping (Value) -> Void) {}
    public var wrappedValue: Value {
        get { stub() }
        nonmutating set { stub() }
    }
    public var projectedValue: Binding<Value> { self }
    public subscript<Subject>(dynamicMember keyPath: WritableKeyPath<Value, Subject>) -> Binding<Subject> { stub() }
}

@propertyWrapper public struct State<Value>: DynamicProperty {
    public init(wrappedValue value: Value) {}
    public init(initialValue value: Value) {}
    public var wrappedValue: Value {
        get { stub() }
        nonmutating set { stub() }
    }
    public var projectedValue: Binding<Value> { stub() }
}

extension State where Value: ExpressibleByNilLiteral {
    public init() {}
}

@propertyWrapper @dynamicMemberLookup public struct Bindable<Value> {
    public var wrappedValue: Value
    public var projectedValue: Bindable<Value> { self }
    public init(wrappedValue: Value) where Value: AnyObject & Observable { self.wrappedValue = wrappedValue }
    public init(_ wrappedValue: Value) where Value: AnyObject & Observable { self.wrappedValue = wrappedValue }
    public subscript<Subject>(dynamicMember keyPath: ReferenceWritableKeyPath<Value, Subject>) -> Binding<Subject>
    where Value: AnyObject { stub() }
}

@MainActor @preconcurrency public protocol Scene {
    associatedtype Body: Scene
    @SceneBuilder @MainActor @preconcurrency var body: Self.Body { get }
}

extension Never: Scene {}

@resultBuilder public struct SceneBuilder {
    public static func buildBlock<Content: Scene>(_ content: Content) -> Content { content }
}

public struct WindowGroup<Content: View>: Scene {
    public init(@ViewBuilder content: () -> Content) {}
    public var body: Never { stub() }
}

@MainActor @preconcurrency public protocol App {
    associatedtype Body: Scene
    @SceneBuilder @MainActor @preconcurrency var body: Self.Body { get }
    @MainActor @preconcurrency init()
}

extension App {
    @MainActor @preconcurrency public static func main() { stub() }
}

// UIKit, which SwiftUI re-exports on iOS: the scene and window API the examples use to find the key window.
// On iOS ASPresentationAnchor is UIWindow; here UIWindow is the AuthenticationServices stand-in's anchor.
import AuthenticationServices

public typealias UIWindow = ASPresentationAnchor

@MainActor open class UIScene: ObjectiveC.NSObject {}

@MainActor open class UIWindowScene: UIScene {
    open var keyWindow: UIWindow? { stub() }
}

@MainActor open class UIApplication: ObjectiveC.NSObject {
    public static var shared: UIApplication { stub() }
    open var connectedScenes: Set<UIScene> { stub() }
}

// Foundation on Apple platforms (iOS 16, macOS 13) has the standard folders as URL properties; Linux's has not.
extension URL {
    public static var applicationSupportDirectory: URL { stub() }
}
