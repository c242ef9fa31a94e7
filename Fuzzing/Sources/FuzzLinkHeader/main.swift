// FuzzLinkHeader - the tree listing's pagination: `Link: <url>; rel="next"`.
import FuzzSupport
import Foundation
import HubClient

let base = "http://127.0.0.1:1/api/models/org/name/tree/main?recursive=true"

fuzzMain { data in
    let header = text(data)
    guard let next = HubClient.nextLink(header, relativeTo: base) else { return }
    // What comes out is fetched next: an absolute URL.
    expect(URL(string: next)?.scheme != nil, "next link '\(next)' from '\(header)' is not absolute")
}
