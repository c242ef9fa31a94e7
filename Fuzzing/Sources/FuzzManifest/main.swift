// FuzzManifest - the model manifest (`.speech-fetch.json`) and its quick JSON reader.
import FuzzSupport
import Foundation
import HubTypes
import ModelCache

func same(_ a: RepoSnapshot, _ b: RepoSnapshot) -> Bool {
    a.repo == b.repo && a.revision == b.revision && a.commit == b.commit && a.files == b.files
}

fuzzMain { data in
    if let value = JSONValue.parse(data) {
        // (Not compared with JSONSerialization on every input: the quick reader keeps a number's
        // text, so it rightly takes `1e99999`, which Foundation refuses as out of range.)
        if let quick = RepoSnapshot(json: value) {
            // The quick reader and JSONDecoder, the fallback, read a manifest alike.
            guard let slow = try? JSONDecoder().decode(RepoSnapshot.self, from: data) else {
                expect(false, "quick reader took a manifest JSONDecoder refuses"); return
            }
            expect(same(quick, slow), "quick reader and JSONDecoder disagree")
        }
    }
    guard let snapshot = RepoSnapshot.decode(data) else { return }
    // What readManifest returns survives writeManifest's encoding.
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    guard let again = (try? encoder.encode(snapshot)).flatMap(RepoSnapshot.decode) else {
        expect(false, "a read manifest does not read back after encoding"); return
    }
    expect(same(snapshot, again), "a manifest changes through encode and decode")
}
