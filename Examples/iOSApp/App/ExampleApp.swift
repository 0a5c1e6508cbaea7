import AuthenticationServices
import Sesame
import SesameApple
import SwiftUI

/// The app: a root view that switches on the session's state.
///
/// Compiled for iOS on Linux against stand-ins (Scripts/check-apple.sh); only Xcode builds and runs it.
@main
struct ExampleApp: App {
    @State private var model: AppModel?
    @State private var failure: String?

    var body: some Scene {
        WindowGroup {
            if let model {
                RootView(model: model)
            } else {
                ProgressView(failure ?? "Starting…")
                    .task { await start() }
            }
        }
    }

    private func start() async {
        // `sesame serve --port 8080 --client ios:com.example.sesame:/oauth` (your Mac's address on a device).
        guard let server = URL(string: "http://127.0.0.1:8080") else { return }
        do {
            model = try await AppModel.make(
                settings: .init(
                    issuer: server, clientID: "ios", redirectURI: "com.example.sesame:/oauth", restBase: server),
                store: KeychainTokenStore.keychain(service: "com.example.sesame"))
        } catch {
            failure = "Cannot reach the identity server."
        }
    }
}

/// Signed in, signed out, or not known yet (a locked Keychain at launch stays here: never "signed out").
struct RootView: View {
    let model: AppModel

    var body: some View {
        switch model.auth.status {
        case .signedIn: HomeView(model: model)
        case .signedOut: SignInView(model: model)
        case .unknown: ProgressView("Unlocking…")
        }
    }
}

struct SignInView: View {
    @Bindable var model: AppModel

    var body: some View {
        VStack(spacing: 16) {
            Button("Sign in with your browser") {
                Task {
                    // A single-window app's anchor; a multi-window one returns its scene's key window.
                    await model.signInWithOpenIDConnect(using: WebAuthenticationSessionAgent { ASPresentationAnchor() })
                }
            }
            TextField("Email", text: $model.email)
            SecureField("Password", text: $model.password)
            Button("Sign in with a password") { Task { await model.signInWithPassword() } }
            if let problem = model.problem { Text(problem) }
        }
    }
}

struct HomeView: View {
    let model: AppModel

    var body: some View {
        VStack(spacing: 16) {
            Text(model.profile.map { "Signed in as \($0)" } ?? "Signed in")
            Button("Call the API") { Task { await model.loadProfile() } }
            Button("Sign out") { Task { await model.signOut() } }
            if let problem = model.problem { Text(problem) }
        }
        .task { await model.loadProfile() }
    }
}
