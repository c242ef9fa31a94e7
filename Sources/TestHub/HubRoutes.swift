// HubRoutes - the Hub listener's endpoints: model info by revision, the tree listing with
// its Link pagination, paths-info, and resolve (302 to the CDN for LFS files, the body
// itself for small ones).
import Foundation

struct HubRoutes {
    let state: HubState

    func answer(_ request: HubRequest) -> HubResponse {
        let s = request.segments
        if s == ["_testhub", "counters"] { return counters() }
        if s.count >= 4, s[0] == "api", s[1] == "models" {
            return api(request, repo: "\(s[2])/\(s[3])", rest: Array(s.dropFirst(4)))
        }
        if s.count >= 5, s[2] == "resolve" {
            return resolve(request, repo: "\(s[0])/\(s[1])", revision: s[3], path: s.dropFirst(4).joined(separator: "/"))
        }
        return .hubError(404, code: nil, message: "Not Found")
    }

    // MARK: - API

    private func api(_ request: HubRequest, repo: String, rest: [String]) -> HubResponse {
        let endpoint = rest.first ?? ""
        let method = request.method
        guard endpoint == "paths-info" ? method == "POST" : (method == "GET" || method == "HEAD") else {
            return .hubError(405, code: nil, message: "Method \(method) not allowed here")
        }
        guard endpoint.isEmpty || (["revision", "tree", "paths-info", "xet-read-token"].contains(endpoint) && rest.count >= 2) else {
            return .hubError(404, code: nil, message: "Not Found")
        }
        guard let snapshot = state.catalog.snapshot(of: repo) else { return HubState.repoNotFound() }
        if let refusal = state.refusal(for: repo, request: request) { return refusal }
        // A `status` fault set on "<org>/<name>/@api" answers the API (a Hub that is there but
        // failing: the first contact's 503 keeps the retry ladder).
        if case .refuse(let status, let retryAfter) = state.faults.admission(for: "\(repo)/@api", onCDN: false) {
            return .hubError(status, code: nil, message: "injected fault: \(status) for \(repo)'s API",
                             headers: retryAfter.map { [("Retry-After", String($0))] } ?? [])
        }
        // Only `revision` may take an unencoded `refs/heads/main`; the others have a path after it.
        let revision = rest.count < 2 ? "main" : endpoint == "revision" ? rest.dropFirst().joined(separator: "/") : rest[1]
        guard snapshot.matches(revision: revision) else { return HubState.revisionNotFound(revision) }
        switch endpoint {
        case "xet-read-token":
            return xetReadToken()
        case "tree":
            return tree(request, snapshot: snapshot, under: rest.dropFirst(2).joined(separator: "/"))
        case "paths-info":
            return pathsInfo(request, snapshot: snapshot)
        default:
            return modelInfo(request, snapshot: snapshot)
        }
    }

    /// The test Hub's own Xet counters, for scripts that run it as a process (not a Hub endpoint).
    private func counters() -> HubResponse {
        let ledger = state.ledger
        return .json(.object([("reconstructions", .int(ledger.totalReconstructions)), ("xorbBytes", .int(ledger.totalXorbBytes)),
                              ("bridgeBytes", .int(ledger.totalBridgeBytes)), ("requests", .int(ledger.totalRequests))]))
    }

    /// A CAS access token, in the headers huggingface_hub reads and the JSON hf_xet's refresher reads.
    private func xetReadToken() -> HubResponse {
        let (token, expires) = state.newXetToken()
        return .json(.object([("casUrl", .string(state.cdnURL)), ("accessToken", .string(token)), ("exp", .int(expires))]),
                     headers: [("X-Xet-Cas-Url", state.cdnURL), ("X-Xet-Access-Token", token),
                               ("X-Xet-Token-Expiration", String(expires))])
    }

    private func modelInfo(_ request: HubRequest, snapshot: ServedTree) -> HubResponse {
        let blobs = HubRoutes.isTrue(request.queryValue("blobs"))
        let siblings: [OrderedJSON] = snapshot.files.map { file in
            var pairs: [(String, OrderedJSON)] = [("rfilename", .string(file.path))]
            if blobs {
                pairs.append(("blobId", .string(file.gitOid)))
                pairs.append(("size", .int(file.size)))
                if file.isLFS {
                    pairs.append(("lfs", .object([("sha256", .string(file.sha256)), ("size", .int(file.size)),
                                                  ("pointerSize", .int(file.pointerSize))])))
                }
            }
            return .object(pairs)
        }
        let repo = snapshot.repo
        let modified = HubResponse.isoDate(snapshot.lastModified)
        let idHash = RepoWriter.fnv1a64(repo)
        var fields: [(String, OrderedJSON)] = [
            ("_id", .string(String(idHash, radix: 16).leftPadded(to: 16) + "00000000")),
            ("id", .string(repo)),
            ("modelId", .string(repo)),
            ("author", .string(String(repo.split(separator: "/")[0]))),
            ("sha", .string(state.forgedCommit(repo) ?? snapshot.commit)),
            ("lastModified", .string(modified)),
            ("createdAt", .string(modified)),
            ("private", .bool(state.isPrivate(repo))),
            ("gated", state.isGated(repo) ? .string("auto") : .bool(false)),
            ("disabled", .bool(false)),
            ("downloads", .int(0)),
            ("likes", .int(0)),
            ("tags", .array([])),
            ("library_name", .null),
            ("siblings", .array(siblings)),
            ("spaces", .array([])),
            ("usedStorage", .int(snapshot.files.reduce(0) { $0 + $1.size })),
        ]
        // `expand` (or `expand[]`) asks for named properties only, as on the Hub.
        let wanted = Set(request.query.filter { $0.name == "expand" || $0.name == "expand[]" }.map(\.value))
        if !wanted.isEmpty {
            fields = fields.filter { $0.0 == "_id" || $0.0 == "id" || wanted.contains($0.0) }
        }
        return .json(.object(fields))
    }

    private func tree(_ request: HubRequest, snapshot: ServedTree, under directory: String) -> HubResponse {
        let recursive = HubRoutes.isTrue(request.queryValue("recursive"))
        let expand = HubRoutes.isTrue(request.queryValue("expand"))
        guard let listing = snapshot.listing(under: directory, recursive: recursive) else {
            return .hubError(404, code: "EntryNotFound", message: "\(directory) does not exist on \"main\"",
                             headers: [("X-Repo-Commit", snapshot.commit)])
        }
        // The Hub pages 1000 entries, 50 when expanded.
        let pageSize = expand ? min(state.treePageSize, 50) : state.treePageSize
        var start = 0
        if let cursor = request.queryValue("cursor") {
            guard let offset = TreeCursor.offset(from: cursor), offset <= listing.count else {
                return .hubError(400, code: nil, message: "Invalid cursor")
            }
            start = offset
        }
        let end = min(listing.count, start + pageSize)
        var page = listing[start ..< end].map { entry(for: $0, snapshot: snapshot, expand: expand) }
        if end == listing.count {
            for forged in state.forgedEntries(snapshot.repo) {
                page.append(.object([("type", .string("file")), ("oid", .string(String(repeating: "0", count: 40))),
                                     ("size", .int(forged.size)), ("path", .string(forged.path))]))
            }
            for json in state.rawForgedEntries(snapshot.repo) { page.append(.raw(json)) }
        }
        var headers: [(name: String, value: String)] = [("X-Repo-Commit", snapshot.commit)]
        if end < listing.count {
            let query = request.query.filter { $0.name != "cursor" }
                .map { "\(URLText.encodeComponent($0.name))=\(URLText.encodeComponent($0.value))" }
                + ["cursor=\(TreeCursor.make(offset: end))"]
            headers.append(("Link", "<\(state.baseURL)\(request.rawPath)?\(query.joined(separator: "&"))>; rel=\"next\""))
        }
        return .json(.array(page), headers: headers)
    }

    private func pathsInfo(_ request: HubRequest, snapshot: ServedTree) -> HubResponse {
        var paths: [String] = []
        var expand = false
        let type = request.header("Content-Type")?.lowercased() ?? ""
        if type.hasPrefix("application/json") {
            guard let object = try? JSONSerialization.jsonObject(with: request.body) as? [String: Any] else {
                return .hubError(400, code: nil, message: "Body must be a JSON object with \"paths\"")
            }
            if let list = object["paths"] as? [String] { paths = list } else if let one = object["paths"] as? String { paths = [one] }
            expand = (object["expand"] as? Bool) ?? HubRoutes.isTrue(object["expand"] as? String)
        } else {
            for (name, value) in URLText.parseQuery(Substring(String(decoding: request.body, as: UTF8.self))) {
                if name == "paths" || name == "paths[]" { paths.append(value) }
                if name == "expand" { expand = HubRoutes.isTrue(value) }
            }
        }
        let nodes = snapshot.nodes
        let byPath = Dictionary(nodes.map { ($0.path, $0) }, uniquingKeysWith: { first, _ in first })
        var seen = Set<String>()
        let found: [OrderedJSON] = paths.compactMap { raw in
            let path = raw.split(separator: "/").joined(separator: "/")
            guard seen.insert(path).inserted, let node = byPath[path] else { return nil }
            return entry(for: node, snapshot: snapshot, expand: expand)
        }
        return .json(.array(found), headers: [("X-Repo-Commit", snapshot.commit)])
    }

    /// One tree entry as the Hub writes it.
    private func entry(for node: TreeNode, snapshot: ServedTree, expand: Bool) -> OrderedJSON {
        var pairs: [(String, OrderedJSON)]
        switch node {
        case .directory(let dir):
            pairs = [("type", .string("directory")), ("oid", .string(dir.oid)), ("size", .int(0)), ("path", .string(dir.path))]
        case .file(let file):
            pairs = [("type", .string("file")), ("oid", .string(file.gitOid)), ("size", .int(file.size)), ("path", .string(file.path))]
            if file.isLFS {
                let oid = state.lfsOidPrefix ? "sha256:" + file.sha256 : file.sha256
                pairs.append(("lfs", .object([("oid", .string(oid)), ("size", .int(file.size)),
                                              ("pointerSize", .int(file.pointerSize))])))
                if let xet = state.xetFile(file, of: snapshot.repo) {
                    pairs.append(("xetHash", .string(xet.fileHash.hex)))
                }
            }
        }
        if expand {
            pairs.append(("lastCommit", .object([("id", .string(snapshot.commit)), ("title", .string("Upload with speech-testhub")),
                                                 ("date", .string(HubResponse.isoDate(snapshot.lastModified)))])))
            if case .file = node {
                pairs.append(("securityFileStatus", .object([
                    ("status", .string("safe")),
                    ("avScan", .object([("virusFound", .bool(false)), ("virusNames", .null)])),
                    ("pickleImportScan", .object([("highestSafetyLevel", .string("innocuous")), ("imports", .array([]))])),
                ])))
            }
        }
        return .object(pairs)
    }

    // MARK: - Resolve

    private func resolve(_ request: HubRequest, repo: String, revision: String, path: String) -> HubResponse {
        guard request.method == "GET" || request.method == "HEAD" else {
            return .hubError(405, code: nil, message: "Method \(request.method) not allowed here")
        }
        guard let snapshot = state.catalog.snapshot(of: repo) else { return HubState.repoNotFound() }
        if let refusal = state.refusal(for: repo, request: request) { return refusal }
        guard snapshot.matches(revision: revision) else { return HubState.revisionNotFound(revision) }
        guard let file = snapshot.file(at: path) else {
            return .hubError(404, code: "EntryNotFound", message: "Entry not found",
                             headers: [("X-Repo-Commit", snapshot.commit)])
        }
        let fileKey = "\(repo)/\(path)"
        var headers: [(name: String, value: String)] = [("X-Repo-Commit", snapshot.commit), ("ETag", file.etag)]
        guard file.isLFS else {
            return FileResponder(state: state).respond(to: request, file: file, fileKey: fileKey, onCDN: false, headers: headers)
        }
        state.ledger.recordFileRequest(fileKey)
        headers += [
            ("X-Linked-Etag", file.etag),
            ("X-Linked-Size", String(file.size)),
            ("Content-Type", "text/plain; charset=utf-8"),
        ]
        if let xet = state.xetFile(file, of: repo) {
            // A Xet-backed file: the redirect goes to the plain-HTTP bridge (another host), and
            // carries what a Xet client needs instead of following it.
            headers += [
                ("Location", state.bridgeLocation(for: file, in: snapshot)),
                ("X-Xet-Hash", xet.fileHash.hex),
                ("Link", "<\(state.baseURL)/api/models/\(URLText.encodePath(repo))/xet-read-token/\(snapshot.commit)>; rel=\"xet-auth\""),
            ]
        } else {
            headers.append(("Location", state.cdnLocation(for: file, in: snapshot)))
        }
        return HubResponse(status: 302, headers: headers)
    }

    static func isTrue(_ value: String?) -> Bool {
        guard let value = value?.lowercased() else { return false }
        return value == "true" || value == "1" || value == "yes"
    }
}

/// The opaque `cursor` of tree pages: the index of the page's first entry, base64url-encoded.
enum TreeCursor {
    static func make(offset: Int) -> String {
        Data("{\"offset\":\(offset)}".utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func offset(from cursor: String) -> Int? {
        var text = cursor.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while text.count % 4 != 0 { text += "=" }
        guard let data = Data(base64Encoded: text),
              let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
              let offset = object["offset"] as? Int, offset >= 0 else { return nil }
        return offset
    }
}
