// The shared argument parser: what it accepts, what it refuses, and with which one line.
import CommandLineKit
import XCTest

final class CommandSpecTests: XCTestCase {
    let spec = CommandSpec(name: "speech download", operands: "<repo> [FILE]...", summary: "test",
                           options: [.value("include", "GLOB", "i"), .flag("quiet", short: "q", "q"), .flag("offline", "o")],
                           minOperands: 1, maxOperands: 2)

    func parsed(_ words: [String]) throws -> ParsedArguments {
        guard case .run(let p) = try spec.parse(words) else { XCTFail("not a run"); throw UsageError("x") }
        return p
    }

    func refusal(_ words: [String]) -> String? {
        do { _ = try spec.parse(words); return nil } catch { return "\(error)" }
    }

    func testOptionsFlagsAndOperandsInAnyOrder() throws {
        let p = try parsed(["--include", "*.json", "org/x", "-q", "--include=a.bin", "config.json"])
        XCTAssertEqual(p.operands, ["org/x", "config.json"])
        XCTAssertEqual(p.values("include"), ["*.json", "a.bin"])
        XCTAssertTrue(p.flag("quiet"))
        XCTAssertFalse(p.flag("offline"))
        XCTAssertEqual(try parsed(["org/x", "--", "--odd-name"]).operands, ["org/x", "--odd-name"])
    }

    func testAnOptionalValueTakesOnlyAPathOrAnEqualsSign() throws {
        let spec = CommandSpec(name: "d", operands: "<repo> [FILE]...", summary: "",
                               options: [.optionalValue("hf-cache", "DIR", "h")], minOperands: 1, maxOperands: nil)
        func run(_ words: [String]) throws -> ParsedArguments {
            guard case .run(let p) = try spec.parse(words) else { throw UsageError("x") }
            return p
        }
        XCTAssertEqual(try run(["org/x", "--hf-cache"]).value("hf-cache"), "")
        XCTAssertEqual(try run(["org/x", "--hf-cache", "/tmp/hf"]).value("hf-cache"), "/tmp/hf")
        XCTAssertEqual(try run(["org/x", "--hf-cache=hf"]).value("hf-cache"), "hf")
        let file = try run(["org/x", "--hf-cache", "config.json"])
        XCTAssertEqual(file.value("hf-cache"), "", "a file name is an operand, not the directory")
        XCTAssertEqual(file.operands, ["org/x", "config.json"])
    }

    func testAnOptionalValueTakesTheNextWordWhenItCannotBeAnOperandOrNamesADirectory() throws {
        // `speech cache prune --hf-cache relative/dir`: prune takes no operand.
        let prune = CommandSpec(name: "prune", summary: "s", options: [.optionalValue("hf-cache", "DIR", "h")])
        guard case .run(let p) = try prune.parse(["--hf-cache", "relative/dir"]) else { return XCTFail("not run") }
        XCTAssertEqual(p.value("hf-cache"), "relative/dir")
        XCTAssertEqual(p.operands, [])
        guard case .run(let bare) = try prune.parse(["--hf-cache"]) else { return XCTFail("not run") }
        XCTAssertEqual(bare.value("hf-cache"), "", "no word after it: the default")
        // `speech download org/x --hf-cache relative/dir` where relative/dir exists.
        let download = CommandSpec(name: "download", operands: "<org/name> [FILE]...", summary: "s",
                                   options: [.optionalValue("hf-cache", "DIR", "h")], minOperands: 1, maxOperands: nil)
        let cwd = FileManager.default.currentDirectoryPath
        let temp = FileManager.default.temporaryDirectory.appendingPathComponent("spec-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: temp.appendingPathComponent("relative/dir"), withIntermediateDirectories: true)
        defer {
            _ = FileManager.default.changeCurrentDirectoryPath(cwd)
            try? FileManager.default.removeItem(at: temp)
        }
        XCTAssertTrue(FileManager.default.changeCurrentDirectoryPath(temp.path))
        guard case .run(let d) = try download.parse(["org/x", "--hf-cache", "relative/dir"]) else { return XCTFail("not run") }
        XCTAssertEqual(d.value("hf-cache"), "relative/dir")
        XCTAssertEqual(d.operands, ["org/x"])
        guard case .run(let f) = try download.parse(["org/x", "--hf-cache", "weights/model.bin"]) else { return XCTFail("not run") }
        XCTAssertEqual(f.value("hf-cache"), "", "a repo file that is no directory here stays a FILE")
        XCTAssertEqual(f.operands, ["org/x", "weights/model.bin"])
    }

    func testHelpAndVersionWinAnywhere() throws {
        guard case .help = try spec.parse(["org/x", "-h"]) else { return XCTFail("-h is help") }
        guard case .help = try spec.parse(["--help"]) else { return XCTFail("--help is help, even without operands") }
        guard case .version = try spec.parse(["--version"]) else { return XCTFail("--version") }
        XCTAssertTrue(spec.help.contains("--include GLOB"), spec.help)
        XCTAssertTrue(spec.help.contains("-q, --quiet"), spec.help)
    }

    func testUnknownFlagsExtraOperandsAndMissingValuesAreRefusedInOneLine() {
        XCTAssertEqual(refusal(["org/x", "-x"]), "speech download: unknown option -x")
        XCTAssertEqual(refusal(["org/x", "--frob"]), "speech download: unknown option --frob")
        XCTAssertEqual(refusal(["org/x", "a", "b"]), "speech download: unexpected argument b")
        XCTAssertEqual(refusal(["org/x", "--include"]), "speech download: --include needs a value (GLOB)")
        XCTAssertEqual(refusal(["org/x", "--quiet=yes"]), "speech download: --quiet takes no value")
        XCTAssertEqual(refusal([]), "speech download: missing <repo> [FILE]...")
        XCTAssertEqual(refusal(["org/x", "-qx"]), "speech download: unknown option -qx")
        XCTAssertEqual(refusal(["org/x", "--include", ""]), "speech download: --include needs a value, not an empty string")
    }

    func testAnAliasIsTheSameOptionAndANearMissGetsAHint() throws {
        let hf = CommandSpec(name: "speech download", operands: "<repo>", summary: "test",
                             options: [Option.value("cache-dir", "DIR", "d").alias("local-dir"), .flag("offline", "o")],
                             minOperands: 1, maxOperands: 1, optionHints: ["max-workers": "HF_DOWNLOAD_RANGE_CONCURRENCY sets that"])
        guard case .run(let p) = try hf.parse(["org/x", "--local-dir", "D"]) else { return XCTFail("not a run") }
        XCTAssertEqual(p.value("cache-dir"), "D", "--local-dir is --cache-dir")
        func refusal(_ words: [String]) -> String {
            do { _ = try hf.parse(words); return "" } catch { return "\(error)" }
        }
        XCTAssertEqual(refusal(["org/x", "--cache-dri", "D"]), "speech download: unknown option --cache-dri; did you mean --cache-dir?")
        XCTAssertEqual(refusal(["org/x", "--cache_dir", "D"]), "speech download: unknown option --cache_dir; did you mean --cache-dir?")
        XCTAssertEqual(refusal(["org/x", "--ofline"]), "speech download: unknown option --ofline; did you mean --offline?")
        XCTAssertEqual(refusal(["org/x", "--max-workers", "8"]), "speech download: unknown option --max-workers; HF_DOWNLOAD_RANGE_CONCURRENCY sets that")
        XCTAssertEqual(refusal(["org/x", "--zzz"]), "speech download: unknown option --zzz")
    }
}
