import FanoutGenerator
import FanoutTestSupport
import Foundation
import Testing

/// Generated data: 1,500 users, 3,000 messages, every rule exercised.
let generated: (snapshot: String, traffic: String) = {
  let dir = makeTemporaryDirectory("fanout-stream-data")
  let report = try! Generator.run(
    GeneratorOptions(users: 1_500, messages: 3_000, seed: 5, profile: .chat, out: dir))
  return (report.snapshotPath, report.trafficPath)
}()

/// The generated traffic with a malformed line after every 400th line.
let trafficLines: [String] = {
  var lines: [String] = []
  for (k, line) in readText(generated.traffic).split(separator: "\n").enumerated() {
    lines.append(String(line))
    if k % 400 == 399 { lines.append(#"{"id":"broken-\#(k)","channel":"#) }
  }
  return lines
}()

func bytes(_ lines: some Sequence<String>) -> [UInt8] {
  Array(lines.map { $0 + "\n" }.joined().utf8)
}

/// What a run produced: decoded delivery lines per gateway, in order, and
/// the rejected lines.
struct Deliveries: Equatable, CustomStringConvertible {
  var gateways: [String: String] = [:]
  var rejected = ""

  var description: String {
    gateways.keys.sorted().map { "\($0): \(gateways[$0]!.count) bytes" }.joined(separator: ", ")
      + ", rejected: \(rejected.count) bytes"
  }
}

/// `fanout eval` on `input`: the reference the stream must agree with.
func evalDeliveries(snapshot: String, input: [UInt8]) -> Deliveries {
  let out = makeTemporaryDirectory("fanout-stream-eval") + "/out"
  let result = runProcess(
    fanoutExecutable, ["eval", "--snapshot", snapshot, "--messages", "-", "--out", out],
    input: input)
  if result.status != 0 { Issue.record("the reference eval failed: \(result.stderr)") }
  var deliveries = Deliveries(rejected: readText(out + "/rejected.ndjson"))
  for file in listDirectory(out) where file.hasSuffix(".ndjson.lz4") {
    let data = Array(FileManager.default.contents(atPath: out + "/" + file)!)
    deliveries.gateways[String(file.dropLast(".ndjson.lz4".count))] = String(
      decoding: decodeLZ4Frames(data)!, as: UTF8.self)
  }
  return deliveries
}

/// A stream's segment folder: every file under a final name, decoded, per
/// stream name in segment order.
struct SegmentFolder {
  var deliveries = Deliveries()
  var records: [[String: Any]] = []
  var segments: Set<Int> = []
  var partialFiles: [String] = []
  /// The running stage's lock file (left behind only by a stage that was killed).
  var hasLockFile = false

  init(_ dir: String) {
    for file in listDirectory(dir) {
      if file == ".fanout.lock" {
        hasLockFile = true
        continue
      }
      if file.hasPrefix(".") {
        partialFiles.append(file)
        continue
      }
      let name = file.replacingOccurrences(of: ".lz4", with: "")
        .replacingOccurrences(of: ".ndjson", with: "")
      guard let dash = name.lastIndex(of: "-"), let segment = Int(name[name.index(after: dash)...]),
        let contents = FileManager.default.contents(atPath: dir + "/" + file)
      else {
        Issue.record("\(file): not a segment's file, or gone")
        continue
      }
      let stream = String(name[..<dash])
      segments.insert(segment)
      let data = Array(contents)
      // listDirectory is sorted, so segments come in order.
      switch stream {
      case "batches":
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
          if let record = decodeRecord(line) { records.append(record) }
        }
      case "rejected":
        deliveries.rejected += String(decoding: data, as: UTF8.self)
      default:
        guard let text = decodeLZ4Frames(data) else {
          Issue.record("\(file): not whole LZ4 frames")
          continue
        }
        deliveries.gateways[stream, default: ""] += String(decoding: text, as: UTF8.self)
      }
    }
  }
}

/// Standard output of `--out -`, split by kind of line; delivery lines
/// lose their `"gateway"` tag, rejected lines their wrapper.
func splitStandardOutput(_ bytes: [UInt8]) -> (deliveries: Deliveries, records: [[String: Any]]) {
  var deliveries = Deliveries()
  var records: [[String: Any]] = []
  let lines = completeLines(bytes)
  if lines.count != bytes.count(where: { $0 == 0x0A }) || bytes.last.map({ $0 != 0x0A }) == true {
    Issue.record("standard output holds an empty or unfinished line")
  }
  for line in lines {
    if line.hasPrefix(#"{"gateway":""#) {
      let afterName = line.dropFirst(#"{"gateway":""#.count)
      guard let quote = afterName.firstIndex(of: "\"") else {
        Issue.record("a delivery line without its gateway: \(line.prefix(300))")
        continue
      }
      let gateway = String(afterName[..<quote])
      deliveries.gateways[gateway, default: ""] +=
        "{" + afterName[afterName.index(quote, offsetBy: 2)...] + "\n"
    } else if line.hasPrefix(#"{"rejected":"#) {
      deliveries.rejected += line.dropFirst(#"{"rejected":"#.count).dropLast() + "\n"
    } else {
      if let record = decodeRecord(line) { records.append(record) }
    }
  }
  return (deliveries, records)
}

func sum(_ records: [[String: Any]], _ key: String) -> Int {
  records.reduce(0) { $0 + (($1[key] as? Int) ?? 0) }
}

/// Copies `path` to `target` and renames it over it, as a producer replaces a snapshot.
func replaceAtomically(_ target: String, with path: String) {
  let aside = target + ".incoming"
  try? FileManager.default.removeItem(atPath: aside)
  try! FileManager.default.copyItem(atPath: path, toPath: aside)
  precondition(rename(aside, target) == 0)
}

func inode(_ path: String) -> Int {
  (try! FileManager.default.attributesOfItem(atPath: path)[.systemFileNumber] as! NSNumber).intValue
}

/// A producer's connection to the stage's `--listen` socket; nil if the
/// socket's backlog is full (only when `waiting` is false).
func connectProducer(_ socket: String, waiting: Bool = true) -> Int32? {
  let fd = Foundation.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
  precondition(fd >= 0)
  var address = sockaddr_un()
  address.sun_family = sa_family_t(AF_UNIX)
  withUnsafeMutableBytes(of: &address.sun_path) { raw in
    for (i, byte) in socket.utf8.enumerated() { raw[i] = byte }
  }
  let flags = fcntl(fd, F_GETFL)
  if !waiting { _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK) }
  let connected = withUnsafePointer(to: &address) {
    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
      connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
    }
  }
  guard connected == 0 else {
    if waiting { Issue.record("connect to \(socket): \(String(cString: strerror(errno)))") }
    close(fd)
    return nil
  }
  _ = fcntl(fd, F_SETFL, flags)
  return fd
}

/// Writes all of `data` to `fd`.
func sendAll(_ fd: Int32, _ data: [UInt8]) {
  var done = 0
  while done < data.count {
    let n = data.withUnsafeBytes { Foundation.write(fd, $0.baseAddress! + done, $0.count - done) }
    precondition(n > 0)
    done += n
  }
}
