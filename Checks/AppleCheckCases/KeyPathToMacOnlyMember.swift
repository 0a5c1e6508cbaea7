// expect (iOS): is unavailable in iOS
// a key path to FileManager.homeDirectoryForCurrentUser (no call, no location on the key path's member)
import Foundation

let home = \FileManager.homeDirectoryForCurrentUser
