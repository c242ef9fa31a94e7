// Messages - a library error as the one line `speech` prints: in the command line's words, with
// the options the user gave repeated in every suggested command, never Foundation's own text.
import Foundation
import HubClient
import ModelCache
import SpeechFetch

enum Messages {
    /// The reason for the user. `baseArgument` is ` --cache-base DIR` (or ` --cache-dir DIR`) as
    /// the user gave it, for suggested commands; `offlineBy` names what made the call offline.
    static func describe(_ error: Error, baseArgument: String = "", offlineBy: String? = nil,
                         catalog: Bool = false, environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        switch error {
        case CacheError.cacheMiss(let repo, let directory, let missing, let reason):
            var text = "\(reason): \(repo) is not complete in \(directory); \(missing.listed)"
            if let offlineBy { text += "; to fetch \(missing.paths.count == 1 ? "it" : "them"), \(offlineBy)" }
            return text
        case CacheError.notInRepo(let repo, let paths) where catalog:
            // A mirror that lacks the repo or has an old copy is the likelier cause than the catalog.
            let endpoint = HubEndpoint.fromEnvironment(environment).url
            let mirror = environment["HF_ENDPOINT"] != nil && HubEndpoint.ignoredValueWarning(environment) == nil
            return "\(endpoint)\(mirror ? " (HF_ENDPOINT)" : "") has no file \(paths.joined(separator: ", ")) in \(repo), which the model catalog lists; "
                + (mirror ? "a mirror may lack the repo or hold an older copy: check `speech resolve \(repo)`, or unset HF_ENDPOINT to ask https://huggingface.co; "
                          : "check `speech resolve \(repo)`; ")
                + "if the Hub itself lacks it, the catalog entry is out of date (docs/models.md)"
        case CacheError.notInRepo(let repo, let paths):
            return "\(repo) has no file \(paths.joined(separator: ", ")); check the file names and --include patterns against `speech resolve \(repo)`"
        case HandoffError.noDaemon(let repo, let spool):
            return "\(repo) is requested in \(spool) but no speech-fetchd serves it; start `speech-fetchd\(baseArgument.replacingOccurrences(of: "--cache-dir", with: "--cache-base"))` or run `speech download \(repo)\(baseArgument)` to fetch it in this process"
        case HandoffError.requestFailed(let repo, .cancelled, _):
            return "the download of \(repo) was cancelled (`speech cancel`); the bytes fetched so far are kept: run the download again to resume"
        case CacheAdminError.inFlight(let repo, let directory, let reasons):
            return "\(repo) is in flight in \(directory): \(reasons.joined(separator: "; ")); " + inFlightAdvice(repo, reasons, baseArgument)
        case let error as HubError:
            return describe(hub: error, environment: environment)
        case let error as DownloadError:
            if case .hubUnreachable(let repo, let directory, let missing, let cause) = error {
                let reason = cause.hasPrefix("could not reach the Hub") ? cause : "the Hub could not be reached (\(cause))"
                let endpoint = HubEndpoint.fromEnvironment(environment).url
                return "\(reason)\(proxyNote(environment)); \(repo) is not complete in \(directory): \(missing.listed); "
                    + "check the network and the endpoint \(endpoint) (HF_ENDPOINT), or use only what is cached: "
                    + "--offline (HF_HUB_OFFLINE=1)"
            }
            if case .servedByAnotherUser(let repo, let base, let user, let pid) = error {
                return "\(base) is served by a speech-fetchd running as \(user)\(pid.map { " (pid \($0))" } ?? ""); this process "
                    + "(\(accountName(geteuid()))) may not use its spool, and fetching \(repo) here would leave folders "
                    + "\(user) cannot write, so nothing was written. Run it as \(user): \(asUser(user))"
            }
            return "\(error)"
        default:
            let ns = error as NSError
            if ns.domain == NSCocoaErrorDomain || ns.domain == NSPOSIXErrorDomain { return describe(cocoa: error) }
            return String(describing: error)
        }
    }

    /// A uid's login name, or the uid.
    static func accountName(_ uid: uid_t) -> String {
        guard let pw = getpwuid(uid), let name = pw.pointee.pw_name else { return "\(uid)" }
        return String(cString: name)
    }

    /// How this account runs a command as `user`: `sudo -u USER` where sudo is installed; root
    /// without it (a Debian server set up with a root password has none) `runuser -u USER --`,
    /// which util-linux puts on every system: a printed command must work where it is printed.
    static func runAs(_ user: String) -> String {
        let sudo = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
            .contains { access("\($0)/sudo", X_OK) == 0 }
        return geteuid() == 0 && !sudo ? "runuser -u \(shellQuoted(user)) --" : "sudo -u \(shellQuoted(user))"
    }

    /// This very command line run as `user` (`runAs`), a token given on it left out.
    static func asUser(_ user: String, arguments: [String] = CommandLine.arguments) -> String {
        var words: [String] = []
        var hideNext = false
        for word in arguments {
            if hideNext { words.append("…"); hideNext = false; continue }
            if word == "--token" { hideNext = true }
            words.append(word.hasPrefix("--token=") ? "--token=…" : shellQuoted(word))
        }
        return ([runAs(user)] + words).joined(separator: " ")
    }

    /// A Hub refusal's advice when the token came from `--token`: that token is the one refused,
    /// so "set HF_TOKEN" would not help.
    static func tokenFromFlag(_ message: String) -> String {
        message.replacingOccurrences(of: "set HF_TOKEN to a token", with: "the token given with --token was refused: give a token")
    }

    /// What works for a model in flight: `speech wait`/`speech cancel` act on spool requests; a
    /// download running in a process of its own (no request: only its staging lock) is ended
    /// by that process, so name it.
    static func inFlightAdvice(_ repo: String, _ reasons: [String], _ baseArgument: String) -> String {
        let spool = reasons.contains { $0.hasPrefix("spool request") || $0.hasPrefix("the spool has plans") }
        if spool {
            return "wait for it (`speech wait \(repo)\(baseArgument)`) or withdraw it (`speech cancel \(repo)\(baseArgument)`), then try again"
        }
        let pids = reasons.flatMap { reason -> [String] in
            // "… (staging lock held by node@pid)"
            guard let range = reason.range(of: "held by "), let at = reason[range.upperBound...].lastIndex(of: "@") else { return [] }
            return [String(reason[reason.index(after: at)...].prefix { $0.isNumber })].filter { !$0.isEmpty }
        }
        let who = pids.isEmpty ? "the process downloading it" : "the process downloading it (pid \(Array(Set(pids)).sorted().joined(separator: ", ")))"
        return "\(who) is not speech-fetchd's, so `speech wait` and `speech cancel` do not see it: let it finish, or stop it "
            + "(Ctrl-C in its terminal\(pids.isEmpty ? "" : ", or kill \(Array(Set(pids)).sorted().joined(separator: " "))")), then try again"
    }

    private static func describe(hub error: HubError, environment: [String: String]) -> String {
        switch error {
        case .http(let status, let url, let message, _):
            if let proxy = proxy(for: url, environment) {
                return "HTTP \(status) through the proxy \(proxy) for \(url)" + (message.isEmpty ? "" : ": \(message)")
                    + (status == 407 ? " (the proxy wants credentials)" : status >= 502 ? " (the proxy may have answered; check it, or set no_proxy)" : "")
            }
            return error.description
        case .transport:
            return error.description + proxyNote(environment)
        default:
            return error.description
        }
    }

    /// A Foundation file error as "cannot <do> <path>: <reason>", never its domain and code.
    private static func describe(cocoa error: Error) -> String {
        let ns = error as NSError
        let path = (ns.userInfo[NSFilePathErrorKey] as? String) ?? (ns.userInfo[NSURLErrorKey] as? URL)?.path
        var reason = "error \(ns.code)"
        if let underlying = ns.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain {
            reason = String(cString: strerror(Int32(underlying.code)))
        } else if ns.domain == NSPOSIXErrorDomain {
            reason = String(cString: strerror(Int32(ns.code)))
        } else if ns.domain == NSCocoaErrorDomain {
            switch CocoaError.Code(rawValue: ns.code) {
            case .fileNoSuchFile, .fileReadNoSuchFile: reason = "no such file or directory"
            case .fileWriteNoPermission, .fileReadNoPermission: reason = "permission denied"
            case .fileWriteOutOfSpace: reason = "no space left on the device"
            case .fileWriteVolumeReadOnly: reason = "read-only file system"
            case .fileWriteFileExists: reason = "a file is in the way"
            default: reason = ns.code == 4 ? "no such file or directory" : "file error \(ns.code)"
            }
        }
        return path.map { "cannot create or write \($0): \(reason)" } ?? "file system error: \(reason)"
    }

    /// The proxy libcurl uses for `url` (http_proxy / https_proxy / all_proxy, minus no_proxy),
    /// with any user:password removed.
    static func proxy(for url: String, _ env: [String: String]) -> String? {
        guard let parts = URLComponents(string: url), let scheme = parts.scheme?.lowercased(), let host = parts.host?.lowercased() else { return nil }
        let noProxy = (env["no_proxy"] ?? env["NO_PROXY"] ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        if noProxy.contains(where: { $0 == "*" || (!$0.isEmpty && (host == $0 || host.hasSuffix("." + $0.trimmingCharacters(in: CharacterSet(charactersIn: "."))))) }) {
            return nil
        }
        // libcurl reads http_proxy in lower case only; the others in either case.
        let names = scheme == "https" ? ["https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"] : ["http_proxy", "all_proxy", "ALL_PROXY"]
        for name in names {
            if let value = env[name], !value.isEmpty { return redacted(value) }
        }
        return nil
    }

    private static func proxyNote(_ env: [String: String]) -> String {
        let endpoint = HubEndpoint.fromEnvironment(env)
        return proxy(for: endpoint.url, env).map { " through the proxy \($0)" } ?? ""
    }

    /// The line a retry prints: what failed, attempt k of n, the wait.
    static func retryLine(_ event: RetryEvent) -> String {
        let what = event.reason.contains(event.subject) ? event.reason : "\(event.subject): \(event.reason)"
        var line = "\(what); retrying, attempt \(event.attempt) of \(event.attempts) in \(String(format: "%.1f", event.wait)) s"
        if event.isUnreachable {
            line += " (nothing answered: Ctrl-C stops; SPEECH_FETCH_RETRY_ATTEMPTS=1 fails at once)"
        }
        return line
    }

    /// The JSON event of a retry.
    static func retryNotice(_ event: RetryEvent) -> RetryNotice {
        RetryNotice(subject: event.subject, reason: event.reason, attempt: event.attempt, attempts: event.attempts,
                    waitSeconds: event.wait, unreachable: event.isUnreachable)
    }

    /// A proxy URL without its credentials.
    static func redacted(_ value: String) -> String {
        guard var parts = URLComponents(string: value), parts.user != nil || parts.password != nil else { return value }
        parts.user = nil
        parts.password = nil
        return (parts.string ?? value) + " (credentials hidden)"
    }
}
