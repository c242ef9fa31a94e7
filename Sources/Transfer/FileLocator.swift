// FileLocator - where a file's bytes are fetched from, by one rule for the embedded engine and
// the worker: a file fetched as ranges is located once (the Hub's CDN redirect, checked against
// the tree's size), so each range goes straight to the CDN; any other file uses its resolve URL
// and follows the redirect per request. An expired CDN URL is located again by both.
import Foundation
import HubClient
import HubTypes

struct FileLocator: Sendable {
    let client: HubClient
    /// Files at or above this size go as ranges (`DownloadSettings.rangeThreshold`).
    let rangeThreshold: Int64

    /// The URL to start fetching `file` from.
    func source(of file: RepoFile, repo: RepoID, commit: String) throws -> String {
        file.size >= rangeThreshold ? try locate(file, repo: repo, commit: commit)
                                    : client.resolveURL(repo, commit: commit, path: file.path)
    }

    /// Asks the Hub where `file`'s bytes are now.
    /// - Throws: `HubError` from the Hub, or `.badResponse` when the location's size is not the tree's.
    func locate(_ file: RepoFile, repo: RepoID, commit: String) throws -> String {
        let location = try client.locate(repo, commit: commit, path: file.path)
        if let size = location.size, size != file.size {
            throw HubError.badResponse(url: location.url,
                                       reason: "\(file.path) is \(size) bytes there but \(file.size) in the tree")
        }
        return location.url
    }
}
