import FanoutIndex

/// Text ids of up to `capacity` rows, looked up in one `StringTable` together
/// (`find(batch:into:)`, whose cache misses overlap) instead of one by one.
///
/// A reader that batches its lookups must resolve the batch before throwing
/// any error of its own, so that an earlier row's unknown id is still the
/// error reported, as in a row-by-row scan.
struct KeyBatch {
  static let capacity = 512

  /// A builder's plain arrays: appending a key is two array appends.
  private(set) var keys = BytePool.Builder()
  /// After `resolve(in:)`: each key's id, or -1 if absent.
  private(set) var ids: [Int32] = []

  var count: Int { keys.count }
  var isFull: Bool { keys.count == Self.capacity }

  mutating func append(_ key: UnsafeRawBufferPointer) { keys.append(key) }

  mutating func resolve(in table: StringTable) { table.find(batch: keys, into: &ids) }

  /// Empties the batch, keeping its storage.
  mutating func removeAll() { keys.removeAll() }

  /// Key `k` as text, for error messages.
  func name(_ k: Int) -> String { keys.string(k) }
}
