// ExportedTypes - the types of the layers below that the public API's signatures and errors use,
// named here so that an app's `import SpeechFetch` is its only import (docs/api.md, "Errors, and
// the one import"). Each error type is re-exported by name, the type itself (not a copy or an
// alias): a module that imports the layer too sees one type. The engine's names are aliases.
@_exported import CacheAdmin  // the cache's management, whole: `CacheAdmin`, its reports and options
@_exported import ModelCatalog  // the catalog's data, whole: `ModelCatalog`, `CatalogEntry`, `ModelComponent`
@_exported import enum HubClient.HubError
@_exported import enum ModelCache.CacheError
@_exported import enum ModelCache.MissingFiles
@_exported import enum Daemon.HandoffError
@_exported import enum Spool.FailureKind
@_exported import enum HubTypes.RepoError
@_exported import enum Transfer.XetDownloadError
@_exported import struct Curl.TransportError
@_exported import struct Curl.CurlUnavailable
@_exported import struct Digest.CryptoUnavailable
import ByteUnits
import Transfer

/// Progress of a download call, weighted by bytes over the whole file set.
public typealias DownloadProgress = TransferProgress
/// Tuning knobs (range size, concurrency, stall guard, retries); see docs/cache-and-offline.md.
public typealias DownloadSettings = Transfer.DownloadSettings
/// A bandwidth cap over all of a call's connections (`DownloadSettings.maxRate`), and the
/// parser of its rates (`20M`, `500K`).
public typealias RateCap = Transfer.RateCap
public typealias ByteRate = ByteUnits.ByteRate
/// A variable of the environment set to a value that cannot be read (`SPEECH_FETCH_MAX_RATE=20MB`).
public typealias InvalidSetting = Transfer.InvalidSetting
