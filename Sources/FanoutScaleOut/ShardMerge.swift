import Dispatch
import FanoutKernel
import FanoutModel
import FanoutOutput
import FanoutPipeline
import FoundationEssentials
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// `fanout merge`: the output folders of `eval --mergeable` runs on every
/// shard of one split, merged into the files one `fanout eval` on the whole
/// snapshot writes — the same bytes (docs/scale-out.md).
///
/// Each shard's lines are in input order and start with their traffic line
/// number; a message's lines from several shards are merged by recipient
/// (users are in exactly one shard, so merging is ordering by user id).
public enum ShardMerge {
  /// What was merged: the merged summary's numbers.
  public struct Report: Sendable {
    public var shards: Int
    public var messages: Int
    public var pairs: Int
    public var delivered: Int
    public var seconds: Double
  }

  /// `step` is told the merge as it starts; `progress` the megabytes of
  /// the shards' files read and their fraction of all, now and then.
  public static func run(
    shardOutputs: [String], out: String, overwrite: Bool = false,
    step: ((String) -> Void)? = nil,
    progress: (@Sendable (_ megabytes: Int, _ fraction: Double?) -> Void)? = nil
  ) throws(PipelineError) -> Report {
    let clock = ContinuousClock()
    let started = clock.now
    let shards = try checkedShards(shardOutputs)
    let folder = try OutputFolder(
      claiming: out, mode: .fresh(overwrite: overwrite),
      inputs: shardOutputs.map { .init("shard", $0) })
    defer { folder.release() }
    var files: [PendingFile] = []
    do throws(OutputError) {
      let rejected = try PendingFile(directory: out, name: "rejected.ndjson")
      try rejected.write(shards[0].rejected)
      files.append(rejected)
      let names = mergedFileNames(shards)
      step?("merging \(names.count) files from \(shards.count) shards")
      files += try mergeFiles(
        names, of: shards, into: out,
        progress: progress.map { MergeProgress(names, of: shards, report: $0) })
    } catch {
      // The shards' files unreadable: refused; ours unwritable: an output error.
      if error.path.hasPrefix(out + "/") { throw .output(error) }
      throw .merge(error.description)
    }
    let summary = MergedSummary(shards.map(\.summary))
    let seconds = (clock.now - started).seconds
    do {
      let file = try PendingFile(directory: out, name: "summary.json")
      try file.write(summary.json(mergeSeconds: seconds))
      try PendingFile.commit(together: files + [file])
    } catch { throw .output(error) }
    return Report(
      shards: shards.count, messages: summary.messages, pairs: summary.sum(\.pairs),
      delivered: summary.sum(\.delivered), seconds: seconds)
  }

  // MARK: Checking the shards

  struct ShardOutput {
    let folder: String
    let summary: ShardSummary
    let label: ShardLabel
    let identity: [String]
    let rejected: [UInt8]
  }

  /// Every shard 0..<N exactly once, all of one split, from runs on the
  /// same traffic that wrote the same kinds of files, each complete
  /// (summary.json is written last) and each file exactly as its run wrote
  /// it: the names, sizes and XXH64 digests its summary lists, no more.
  static func checkedShards(_ folders: [String]) throws(PipelineError) -> [ShardOutput] {
    guard !folders.isEmpty else { throw .usage("fanout merge needs the shards' output folders") }
    var shards: [ShardOutput] = []
    for folder in folders {
      let shown = Bounded.quoted(folder)
      let summaryShown = Bounded.quoted(folder + "/summary.json")
      let data: Data
      do {
        data = Data(try readPlainFile(folder + "/summary.json", limit: 64 << 20))
      } catch {
        switch error {
        case .missing:
          throw .merge(
            "\(shown) has no summary.json: not an output folder of a completed `fanout eval --mergeable` run"
          )
        case .notPlain:
          throw .merge(
            "\(summaryShown) is not a regular file (a symbolic link, FIFO or device): "
              + "refused; run the shard again")
        case .tooLarge:
          throw .merge("\(summaryShown) is larger than 64 MiB: not a run's summary")
        case .system(let error):
          throw .merge("\(summaryShown) cannot be read: \(error.reason)")
        }
      }
      guard let summary = try? JSONDecoder().decode(ShardSummary.self, from: data),
        let shard = summary.shard
      else {
        throw .merge(
          "\(summaryShown) is not a `fanout eval --mergeable` run's (no readable \"shard\")")
      }
      guard shard.index >= 0, shard.index < shard.count else {
        throw .merge("\(summaryShown) has an unreadable \"shard\"")
      }
      guard let files = shard.files else {
        throw .merge(
          "\(summaryShown) lists no files (written by an older fanout): run "
            + "`fanout eval --mergeable` on the shard again")
      }
      try checkFiles(files, in: folder)
      let identity = [
        "\(shard.trafficLines)", shard.trafficDigest, shard.output, "\(summary.messages)",
        "\(summary.rejected)",
      ]
      guard let rejected = FileManager.default.contents(atPath: folder + "/rejected.ndjson") else {
        throw .merge("\(shown) has no rejected.ndjson: an incomplete output folder")
      }
      shards.append(
        ShardOutput(
          folder: folder, summary: summary,
          label: ShardLabel(index: shard.index, count: shard.count, split: shard.split),
          identity: identity, rejected: Array(rejected)))
    }
    let first = shards[0]
    for shard in shards where shard.label.count != first.label.count {
      throw .merge(
        "'\(shard.folder)' is shard \(shard.label) but '\(first.folder)' is shard \(first.label): "
          + "the shards come from splits into different numbers of shards")
    }
    for shard in shards where shard.label.split != first.label.split {
      throw .merge(
        "'\(shard.folder)' and '\(first.folder)' are shards of different splits (split "
          + "\(shard.label.split ?? "none") and \(first.label.split ?? "none")): merge only the "
          + "shards of one `fanout snapshot split`")
    }
    let count = first.label.count
    var byIndex = [ShardOutput?](repeating: nil, count: count)
    for shard in shards {
      if let other = byIndex[shard.label.index] {
        throw .merge("shard \(shard.label) is given twice: '\(other.folder)' and '\(shard.folder)'")
      }
      byIndex[shard.label.index] = shard
    }
    if let missing = byIndex.firstIndex(where: { $0 == nil }) {
      throw .merge("shard \(missing)/\(count) is missing: merge needs every shard's output folder")
    }
    let ordered = byIndex.map { $0! }
    for shard in ordered.dropFirst() {
      guard shard.identity == ordered[0].identity else {
        throw .merge(
          "'\(shard.folder)' and '\(ordered[0].folder)' were not run on the same traffic with the same "
            + "options (traffic lines, digest, output files, messages or rejected lines differ)")
      }
      guard shard.rejected == ordered[0].rejected else {
        throw .merge(
          "'\(shard.folder)' and '\(ordered[0].folder)' rejected different lines: not shards of one snapshot"
        )
      }
    }
    return ordered
  }

  /// Refuses a shard folder whose output files are not exactly those its
  /// summary lists: one missing, one more, or one whose size or digest
  /// differs (a byte changed inside an LZ4 frame, a file from another run).
  /// The digests are computed on all cores.
  static func checkFiles(_ files: [ShardSummary.File], in folder: String) throws(PipelineError) {
    let listed = Set(files.map(\.name))
    let present = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).filter {
      !$0.hasPrefix(".") && ($0.hasSuffix(".ndjson.lz4") || $0 == "rejected.ndjson")
    }
    if let extra = present.sorted().first(where: { !listed.contains($0) }) {
      throw .merge(
        "'\(folder)/\(extra)' is not among the files its run wrote (summary.json): "
          + "a file from elsewhere; remove it or run the shard again")
    }
    let found = FileResults<(bytes: Int, digest: UInt64)?>(count: files.count)
    DispatchQueue.concurrentPerform(iterations: files.count) { i in
      found.store(digest(of: folder + "/" + files[i].name), at: i)
    }
    for (file, seen) in zip(files, found.values) {
      guard let seen = seen ?? nil else {
        var info = stat()
        if lstat(folder + "/" + file.name, &info) == 0 && info.st_mode & S_IFMT != S_IFREG {
          throw .merge(
            "'\(folder)/\(file.name)' is not a regular file (a symbolic link, FIFO or device): "
              + "refused; run the shard again")
        }
        throw .merge("'\(folder)/\(file.name)' is missing: its run wrote it (summary.json)")
      }
      guard seen.bytes == file.bytes, ShardLabel.hex(seen.digest) == file.xxh64 else {
        throw .merge(
          "'\(folder)/\(file.name)' is not the file its run wrote (size or XXH64 digest "
            + "differs from summary.json): changed or damaged since; run the shard again")
      }
    }
  }

  /// The size and XXH64 of the file at `path`, read through; nil if it
  /// cannot be read (or is not a regular file).
  static func digest(of path: String) -> (bytes: Int, digest: UInt64)? {
    guard let fd = try? openPlainFile(path) else { return nil }
    defer { close(fd) }
    var stream = XXH64.Stream()
    var total = 0
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4 << 20, alignment: 64)
    defer { buffer.deallocate() }
    while true {
      let n = read(fd, buffer.baseAddress, buffer.count)
      if n < 0 && errno == EINTR { continue }
      guard n >= 0 else { return nil }
      if n == 0 { return (total, stream.finish()) }
      stream.update(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
      total += n
    }
  }

  /// The `.ndjson.lz4` files of any shard, in name order.
  static func mergedFileNames(_ shards: [ShardOutput]) -> [String] {
    var names = Set<String>()
    for shard in shards {
      names.formUnion(
        (shard.summary.shard?.files ?? []).map(\.name).filter { $0.hasSuffix(".ndjson.lz4") })
    }
    return names.sorted()
  }

  // MARK: Merging lines

  /// Each file merged on its own thread (files are independent).
  static func mergeFiles(
    _ names: [String], of shards: [ShardOutput], into out: String, progress: MergeProgress? = nil
  ) throws(OutputError) -> [PendingFile] {
    let results = FileResults<Result<PendingFile, OutputError>>(count: names.count)
    DispatchQueue.concurrentPerform(iterations: names.count) { n in
      let name = names[n]
      let result = Result { () throws(OutputError) -> PendingFile in
        let file = try LZ4FrameFile(directory: out, name: name)
        var readers: [LZ4LineReader] = []
        for shard in shards {
          // Each file as checked (`checkFiles`), checked again as it is read.
          guard let listed = shard.summary.shard?.files?.first(where: { $0.name == name }),
            let digest = UInt64(listed.xxh64, radix: 16)
          else { continue }
          readers.append(
            try LZ4LineReader(
              path: shard.folder + "/" + name, expecting: (listed.bytes, digest)))
        }
        try merge(
          readers, into: file, kind: MergedLines(fileNamed: name), progress: progress)
        try file.close()
        return file.file
      }
      results.store(result, at: n)
    }
    return try results.values.map { result throws(OutputError) in try result!.get() }
  }

  /// The shards' files read so far, out of all, told to `report` from
  /// whichever thread merges, one call at a time.
  final class MergeProgress: Sendable {
    private let total: Int
    private let report: @Sendable (Int, Double?) -> Void
    private let done = Mutex(0)

    init(
      _ names: [String], of shards: [ShardOutput],
      report: @escaping @Sendable (Int, Double?) -> Void
    ) {
      var total = 0
      for shard in shards {
        for name in names {
          var info = stat()
          if stat(shard.folder + "/" + name, &info) == 0 { total += Int(info.st_size) }
        }
      }
      self.total = max(total, 1)
      self.report = report
    }

    func add(_ bytes: Int) {
      done.withLock { done in
        done += bytes
        report(done >> 20, min(1, Double(done) / Double(total)))
      }
    }
  }

  /// One result per file, each set by the one iteration that merged it.
  final class FileResults<Value>: @unchecked Sendable {
    private let lock = Mutex(())
    private(set) var values: [Value?]
    init(count: Int) { values = Array(repeating: nil, count: count) }
    func store(_ value: Value, at n: Int) {
      lock.withLock { _ in values[n] = value }
    }
  }

  /// How a file's lines from several shards become one file's.
  enum MergedLines {
    /// Delivery lists: lines of one message from several shards become one
    /// line whose recipients are merged by user.
    case byRecipient
    /// Decisions: a message's lines from all shards are ordered by user.
    case byUser
    /// Contract v3's update lines: each read line's is in its reader's
    /// shard only, and keeps its line number (it is part of the line).
    case numbered

    init(fileNamed name: String) {
      self =
        name == "decisions.ndjson.lz4"
        ? .byUser : name == "updates.ndjson.lz4" ? .numbered : .byRecipient
    }
  }

  /// Merges the shards' lines in traffic line order, as `kind` says.
  static func merge(
    _ readers: [LZ4LineReader], into file: LZ4FrameFile, kind: MergedLines,
    progress: MergeProgress? = nil
  ) throws(OutputError) {
    var content = ContentBlocks()
    var pending: [UInt8] = []
    pending.reserveCapacity(flushBytes)
    var reported = 0
    func flush() throws(OutputError) {
      for block in ContentBlocks.compress(content.cut([pending])) { try file.append(blocks: block) }
      pending.removeAll(keepingCapacity: true)
      let read = readers.reduce(0) { $0 + $1.bytesRead }
      progress?.add(read - reported)
      reported = read
    }
    // A head is a slice of its reader's buffer: it is dropped before the
    // reader reads on, so the buffer is never copied.
    var heads = try readers.map { reader throws(OutputError) in try NumberedLine.next(reader) }
    func advance(_ r: Int) throws(OutputError) {
      heads[r] = nil
      heads[r] = try NumberedLine.next(readers[r])
    }
    var from: [Int] = []
    var groupBytes: [UInt8] = []
    var groupLines: [Range<Int>] = []
    while true {
      var number = Int.max
      for head in heads { if let head, head.number < number { number = head.number } }
      guard number < .max else { break }
      from.removeAll(keepingCapacity: true)
      for r in readers.indices where heads[r]?.number == number { from.append(r) }
      if from.count == 1 || kind == .numbered {
        // One shard has this line's recipients: its lines as they are.
        for r in from {
          while heads[r]?.number == number {
            heads[r]!.appendBody(to: &pending, numbered: kind == .numbered)
            try advance(r)
          }
        }
      } else {
        // Several shards: copies of their lines, then merged by user.
        groupBytes.removeAll(keepingCapacity: true)
        groupLines.removeAll(keepingCapacity: true)
        for r in from {
          while heads[r]?.number == number {
            let start = groupBytes.count
            heads[r]!.appendBody(to: &groupBytes)
            groupLines.append(start..<groupBytes.count)
            try advance(r)
          }
        }
        if kind == .byRecipient {
          try appendMergedRecipients(
            groupLines.map { groupBytes[$0] }, number: number, to: &pending, path: file.file.path)
        } else {
          let keys = try groupLines.map { range throws(OutputError) in
            try decisionUser(groupBytes[range], path: file.file.path)
          }
          for k in groupLines.indices.sorted(by: { precedes(keys[$0], $0, keys[$1], $1) }) {
            pending += groupBytes[groupLines[k]]
          }
        }
      }
      if pending.count >= flushBytes { try flush() }
    }
    try flush()
    for block in ContentBlocks.compress(content.rest()) { try file.append(blocks: block) }
  }

  static let flushBytes = 8 << 20

  /// One message's delivery lines from several shards, as one line:
  /// `{"message":…,"channel":…,"ts":…,"kind":…,"recipients":[` (the same in
  /// every shard), the recipients of all ordered by user, `]}`.
  static func appendMergedRecipients(
    _ lines: [ArraySlice<UInt8>], number: Int, to merged: inout [UInt8], path: String
  ) throws(OutputError) {
    var entries: [(key: ArraySlice<UInt8>, order: Int, bytes: ArraySlice<UInt8>)] = []
    var prefix: ArraySlice<UInt8> = []
    for body in lines {
      var i = body.startIndex
      _ = try JSONFields.string(in: body, after: #"{"message":"#, at: &i, path: path)
      _ = try JSONFields.string(in: body, after: #","channel":"#, at: &i, path: path)
      // Then ts (a number) and kind (a plain word): the first '[' opens the recipients.
      while i < body.endIndex && body[i] != UInt8(ascii: "[") { i += 1 }
      guard i < body.endIndex, body.count >= 3,
        body[(body.endIndex - 3)...].elementsEqual("]}\n".utf8)
      else { throw OutputError(path: path, reason: "a delivery line without its recipients") }
      i += 1
      let head = body[..<i]
      if prefix.isEmpty { prefix = head }
      guard head.elementsEqual(prefix) else {
        throw OutputError(
          path: path, reason: "line \(number) differs between shards outside its recipients")
      }
      let end = body.endIndex - 3
      while i < end {
        let start = i
        let key = try JSONFields.string(in: body, after: #"{"user":"#, at: &i, path: path)
        i = JSONFields.endOfObject(in: body, from: i)
        entries.append((key, entries.count, body[start..<i]))
        if i < end && body[i] == UInt8(ascii: ",") { i += 1 }
      }
    }
    merged += prefix
    for (n, entry) in entries.sorted(by: { precedes($0.key, $0.order, $1.key, $1.order) })
      .enumerated()
    {
      if n > 0 { merged.append(UInt8(ascii: ",")) }
      merged += entry.bytes
    }
    merged += "]}\n".utf8
  }

  /// A decision line's user id.
  static func decisionUser(_ body: ArraySlice<UInt8>, path: String) throws(OutputError)
    -> ArraySlice<UInt8>
  {
    var i = body.startIndex
    _ = try JSONFields.string(in: body, after: #"{"message":"#, at: &i, path: path)
    return try JSONFields.string(in: body, after: #","user":"#, at: &i, path: path)
  }

  /// User ids in byte order (the contract's), then the order met.
  static func precedes(_ a: ArraySlice<UInt8>, _ i: Int, _ b: ArraySlice<UInt8>, _ j: Int) -> Bool {
    a == b ? i < j : a.lexicographicallyPrecedes(b)
  }
}

/// A line of a `--mergeable` output: its traffic line number, and the line
/// as one-node output has it (`{"line":N,` becomes `{`), with its newline.
struct NumberedLine {
  var number: Int
  /// The line after `{"line":N,`, in its reader's buffer.
  var rest: ArraySlice<UInt8>

  /// The one-node line: `{` (`{"line":N,` when `numbered`), the rest, a
  /// newline.
  func appendBody(to bytes: inout [UInt8], numbered: Bool = false) {
    bytes.append(UInt8(ascii: "{"))
    if numbered {
      bytes += #""line":"#.utf8
      JSONText.appendDecimal(Int64(number), to: &bytes)
      bytes.append(UInt8(ascii: ","))
    }
    bytes += rest
    bytes.append(UInt8(ascii: "\n"))
  }

  static func next(_ reader: LZ4LineReader) throws(OutputError) -> NumberedLine? {
    guard let line = try reader.nextLine() else { return nil }
    let prefix = #"{"line":"#.utf8
    guard line.starts(with: prefix) else {
      throw OutputError(
        path: reader.path,
        reason: "a line without its line number: not `fanout eval --mergeable` output")
    }
    var i = line.startIndex + prefix.count
    var number = 0
    while i < line.endIndex, line[i] >= UInt8(ascii: "0"), line[i] <= UInt8(ascii: "9"),
      number < 1 << 50
    {
      number = number * 10 + Int(line[i] - UInt8(ascii: "0"))
      i += 1
    }
    guard i < line.endIndex, line[i] == UInt8(ascii: ",") else {
      throw OutputError(path: reader.path, reason: "an unreadable line number")
    }
    return NumberedLine(number: number, rest: line[(i + 1)...])
  }
}

/// Just enough JSON to read the fields merge orders by, in lines Fanout wrote.
enum JSONFields {
  /// The decoded bytes of the JSON string that follows `key` at `i`; `i`
  /// moves past it. Without escapes (the usual case) they are a slice of
  /// `bytes`; with them, of a decoded copy.
  static func string(in bytes: ArraySlice<UInt8>, after key: String, at i: inout Int, path: String)
    throws(OutputError) -> ArraySlice<UInt8>
  {
    var matched = true
    var k = i
    for byte in key.utf8 {
      guard k < bytes.endIndex, bytes[k] == byte else {
        matched = false
        break
      }
      k += 1
    }
    guard matched, k < bytes.endIndex, bytes[k] == UInt8(ascii: "\"") else {
      throw OutputError(path: path, reason: "expected \(key) in a line")
    }
    let start = k + 1
    var end = start
    while end < bytes.endIndex && bytes[end] != UInt8(ascii: "\"")
      && bytes[end] != UInt8(ascii: "\\")
    {
      end += 1
    }
    guard end < bytes.endIndex else {
      throw OutputError(path: path, reason: "an unterminated string in a line")
    }
    if bytes[end] == UInt8(ascii: "\"") {
      i = end + 1
      return bytes[start..<end]
    }
    i = start
    return try decoded(bytes, at: &i, path: path)[...]
  }

  /// Decodes the string whose content starts at `i`, up to its closing quote.
  static func decoded(_ bytes: ArraySlice<UInt8>, at i: inout Int, path: String)
    throws(OutputError) -> [UInt8]
  {
    var out: [UInt8] = []
    while i < bytes.endIndex {
      let b = bytes[i]
      i += 1
      if b == UInt8(ascii: "\"") { return out }
      guard b == UInt8(ascii: "\\"), i < bytes.endIndex else {
        out.append(b)
        continue
      }
      let e = bytes[i]
      i += 1
      switch e {
      case UInt8(ascii: "b"): out.append(8)
      case UInt8(ascii: "f"): out.append(12)
      case UInt8(ascii: "n"): out.append(10)
      case UInt8(ascii: "r"): out.append(13)
      case UInt8(ascii: "t"): out.append(9)
      case UInt8(ascii: "u"):
        var scalar = hex4(bytes, &i)
        if (0xD800..<0xDC00).contains(scalar), bytes[i...].starts(with: #"\u"#.utf8) {
          i += 2
          let low = hex4(bytes, &i)
          scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
        }
        out += Array(String(Character(Unicode.Scalar(scalar) ?? "\u{FFFD}")).utf8)
      default: out.append(e)
      }
    }
    throw OutputError(path: path, reason: "an unterminated string in a line")
  }

  static func hex4(_ bytes: ArraySlice<UInt8>, _ i: inout Int) -> UInt32 {
    var v: UInt32 = 0
    for _ in 0..<4 where i < bytes.endIndex {
      let c = bytes[i]
      let digit: UInt32 =
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(c - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt32(c - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt32(c - UInt8(ascii: "A") + 10)
        default: 0
        }
      v = v << 4 | digit
      i += 1
    }
    return v
  }

  /// The index after the object that `i` is inside of (depth 1), strings skipped.
  static func endOfObject(in bytes: ArraySlice<UInt8>, from start: Int) -> Int {
    var depth = 1
    var i = start
    var inString = false
    while i < bytes.endIndex && depth > 0 {
      let b = bytes[i]
      if inString {
        if b == UInt8(ascii: "\\") {
          i += 1
        } else if b == UInt8(ascii: "\"") {
          inString = false
        }
      } else if b == UInt8(ascii: "\"") {
        inString = true
      } else if b == UInt8(ascii: "{") {
        depth += 1
      } else if b == UInt8(ascii: "}") {
        depth -= 1
      }
      i += 1
    }
    return i
  }
}

/// A shard's summary.json, as `fanout merge` reads it.
struct ShardSummary: Decodable {
  struct Timings: Decodable {
    var load = 0.0, parse = 0.0, evaluate = 0.0, write = 0.0
  }
  struct File: Decodable {
    var name: String
    var bytes: Int
    var xxh64: String
  }
  struct Shard: Decodable {
    var index: Int
    var count: Int
    var split: String?
    var trafficLines: Int
    var trafficDigest: String
    var output: String
    var files: [File]?

    enum CodingKeys: String, CodingKey {
      case index, count, split, output, files
      case trafficLines = "traffic_lines"
      case trafficDigest = "traffic_digest"
    }
  }
  struct Notifications: Decodable {
    var hidden = 0, removed = 0, cancelled = 0, unread = 0
  }
  var messages: Int
  var reads: Int
  var notifications: Notifications?
  var rejected: Int
  var pairs: Int
  var delivered: Int
  var deferred: Int
  var deliveries: [String: Int]
  var suppressed: [String: Int]
  var seconds: Double
  var timings: Timings
  var shard: Shard?
}

/// The merged summary.json: counts summed (messages and rejections are
/// every shard's), keys in one-node order; times are the slowest shard's,
/// with each shard's under "timings".
struct MergedSummary {
  let shards: [ShardSummary]

  init(_ shards: [ShardSummary]) { self.shards = shards }

  var messages: Int { shards[0].messages }
  var rejected: Int { shards[0].rejected }

  func sum(_ count: (ShardSummary) -> Int) -> Int { shards.reduce(0) { $0 + count($1) } }

  /// Deliveries per gateway, summed, in byte order of the gateway name (as
  /// one run writes them), the gateways with none left out.
  var deliveries: [(String, Int)] {
    var totals: [String: Int] = [:]
    for shard in shards {
      for (name, value) in shard.deliveries { totals[name, default: 0] += value }
    }
    return totals.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
      .filter { totals[$0]! > 0 }.map { ($0, totals[$0]!) }
  }

  /// Contract v3's counts, summed (each user's notifications are in one
  /// shard), when the shards kept them.
  var notifications: NotificationCounters? {
    guard shards[0].notifications != nil else { return nil }
    var total = NotificationCounters()
    for shard in shards {
      let n = shard.notifications ?? .init()
      total.hidden += n.hidden
      total.removed += n.removed
      total.cancelled += n.cancelled
      total.unread += n.unread
    }
    return total
  }

  func json(mergeSeconds: Double) -> [UInt8] {
    let seconds = shards.map(\.seconds)
    let slowest = seconds.indices.max { seconds[$0] < seconds[$1] } ?? 0
    let pairs = sum(\.pairs)
    let slowestSeconds = seconds[slowest]
    func timings(_ shard: ShardSummary) -> [(String, JSONValue)] {
      let t = shard.timings
      return [("load", t.load), ("parse", t.parse), ("evaluate", t.evaluate), ("write", t.write)]
        .map { ($0, .number(Summary.seconds($1))) }
    }
    let perShard = shards.enumerated().map { (k, shard) in
      JSONValue.object(
        [("shard", .int(Int64(k))), ("seconds", .number(Summary.seconds(seconds[k])))]
          + timings(shard))
    }
    var fields = Summary.counts(
      messages: messages, reads: shards[0].reads, rejected: rejected, pairs: pairs,
      delivered: sum(\.delivered), deferred: sum(\.deferred), notifications: notifications,
      deliveries: deliveries,
      suppressed: Reason.allCases.map(\.name).map { name in
        (name, sum { $0.suppressed[name] ?? 0 })
      })
    fields += [
      ("seconds", .number(Summary.seconds(slowestSeconds))),
      (
        "pairs_per_second",
        .int(slowestSeconds > 0 ? Int64((Double(pairs) / slowestSeconds).rounded()) : 0)
      ),
      (
        "timings",
        .object(
          timings(shards[slowest]) + [
            ("merge", .number(Summary.seconds(mergeSeconds))), ("shards", .array(perShard)),
          ])
      ),
    ]
    return Summary.document(fields)
  }
}
