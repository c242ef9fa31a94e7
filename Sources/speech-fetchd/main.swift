// speech-fetchd - the per-node supervisor of the worker pool (not built yet: see issue 4).
import Foundation

FileHandle.standardError.write(Data("""
speech-fetchd: the spool supervisor is not implemented yet; downloads run inside the caller \
(speech download). Track the daemon work in issue 4.

""".utf8))
exit(69)
