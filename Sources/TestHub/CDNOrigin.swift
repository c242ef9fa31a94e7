// CDNOrigin - the second listener, standing in for the CDN behind LFS redirects: signed
// URLs `/cdn/<org>/<name>/<commit>/<path>?sig=..&expires=..`, Range support, no auth needed.
import Foundation

struct CDNOrigin {
    let state: HubState

    func answer(_ request: HubRequest) -> HubResponse {
        guard request.method == "GET" || request.method == "HEAD" else {
            return .text(405, "method \(request.method) not allowed")
        }
        let s = request.segments
        if s.count == 3, s[0] == "v1" || s[0] == "v2", s[1] == "reconstructions" {
            return CASRoutes(state: state).reconstruction(request, version: s[0] == "v1" ? .v1 : .v2, hashText: s[2])
        }
        if s.count == 2, s[0] == "xorbs" {
            return CASRoutes(state: state).xorb(request, hashText: s[1])
        }
        guard s.count >= 5, s[0] == "cdn" || s[0] == "bridge" else { return .text(404, "no such object") }
        let repo = "\(s[1])/\(s[2])"
        let commit = s[3]
        let path = s.dropFirst(4).joined(separator: "/")
        if let refusal = checkSignature(request, object: "\(repo)/\(commit)/\(path)") { return refusal }
        guard let snapshot = state.catalog.snapshot(of: repo), snapshot.commit == commit.lowercased(),
              let file = snapshot.file(at: path) else {
            return .text(404, "no such object")
        }
        // The bridge: a Xet-backed file's bytes over plain HTTP, counted apart (bridgeBytes).
        return FileResponder(state: state).respond(to: request, file: file, fileKey: "\(repo)/\(path)", onCDN: true,
                                                   headers: [("ETag", "\"\(file.sha256)\"")],
                                                   channel: s[0] == "bridge" ? .bridge : .file)
    }

    /// A URL without `sig` is served as is (tests may build one by hand); a wrong
    /// signature or a past `expires` is refused like a real CDN would (403).
    private func checkSignature(_ request: HubRequest, object: String) -> HubResponse? {
        guard let sig = request.queryValue("sig") else { return nil }
        let expires = Int(request.queryValue("expires") ?? "") ?? 0
        let denied = { (why: String) in
            HubResponse(status: 403, headers: [("Content-Type", "application/xml")], body: .bytes(Data(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>AccessDenied</Code><Message>\(why)</Message></Error>".utf8)))
        }
        guard sig == state.signature(object: object, expires: expires) else {
            return denied("Signature does not match")
        }
        guard Double(expires) > Date().timeIntervalSince1970 else { return denied("Request has expired") }
        return nil
    }
}
