// ModelsCommand - `speech models`: the catalog with what of it is cached, as a table or JSON lines.
import ByteUnits
import CommandLineKit
import Foundation
import SpeechFetch

enum ModelsCommand {
    static let spec = CommandSpec(
        name: "speech models", summary: "The model catalog: name, CLI alias, repo, size, whether it is in the cache (docs/models.md).",
        options: [CacheCommand.baseOption, .flag("json", "one JSON object per model, one per line")])

    static func run(_ words: [String]) -> Never {
        let parsed = speechProgram.parse(spec, words)
        let base = parsed.value("cache-base").map { URL(fileURLWithPath: $0) }
        if parsed.flag("json") {
            for entry in ModelCatalog.all {
                var object: [String: Any] = ["model": entry.displayName, "aliases": entry.aliases, "repos": entry.repos,
                                             "task": entry.task, "cached": ModelCatalog.isCached(entry, cacheBaseDir: base)]
                if let size = entry.approximateSize { object["size"] = size }
                emitJSON(object)
            }
            exit(0)
        }
        var rows = [["model", "alias", "repo", "size", "cached"]]
        for entry in ModelCatalog.all {
            let size = entry.approximateSize.map { ByteFormat.string($0) } ?? "?"
            let cached = ModelCatalog.isCached(entry, cacheBaseDir: base) ? "yes" : "no"
            rows.append([entry.displayName, entry.aliases.first ?? "", entry.repos.joined(separator: " + "), size, cached])
        }
        emit(table(rows))
        exit(0)
    }

    static func table(_ rows: [[String]]) -> String {
        let columns = rows.first?.count ?? 0
        let widths = (0..<columns).map { c in rows.map { $0[c].count }.max() ?? 0 }
        return rows.map { row in
            row.enumerated().map { $0.element.padding(toLength: widths[$0.offset], withPad: " ", startingAt: 0) }
                .joined(separator: "  ").trimmingCharacters(in: .whitespaces) + "\n"
        }.joined()
    }
}
