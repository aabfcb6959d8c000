import FanoutTestSupport
import Foundation
import Testing

/// The stage holds up: signals during the first load, a readiness file,
/// producers that never end a line, metrics that cannot be written.
@Suite("fanout stream holds up", .serialized)
struct StreamRobustnessTests {
  @Test("SIGHUP and SIGTERM while the first snapshot loads are kept, not fatal")
  func signalsWhileLoading() throws {
    let dir = makeTemporaryDirectory()
    let snapshot = dir + "/s.sqlite"
    try FileManager.default.copyItem(atPath: generated.snapshot, toPath: snapshot)
    // A writer holds the file: the first load waits for it.
    let writer = SQLiteSession(snapshot)
    #expect(writer.execute("BEGIN EXCLUSIVE") == nil)
    let stream = StreamProcess([
      "--snapshot", snapshot, "--out", dir + "/out", "--busy-timeout", "20000", "--ready-file",
      dir + "/ready",
    ])
    #expect(stream.wait { blocksTerminationSignals(stream.pid) })
    #expect(stream.stderr.isEmpty)
    usleep(300_000)
    stream.send(SIGHUP)
    usleep(200_000)
    #expect(kill(stream.pid, 0) == 0, "SIGHUP during the load must not end the stage")
    stream.send(SIGTERM)
    usleep(100_000)
    #expect(writer.execute("ROLLBACK") == nil)
    #expect(stream.waitForExit() == 0, "\(stream.stderr)")
    #expect(stream.stderr.contains("SIGTERM, received while loading"), "\(stream.stderr)")
    #expect(!FileManager.default.fileExists(atPath: dir + "/ready"))
  }

  /// The stage tells a reload by the file's identity, its mtime among it:
  /// in nanoseconds, a date past 2262 overflowed 64 bits and trapped.
  @Test("a snapshot dated in the year 2400 is watched and logged, not fatal")
  func farFutureSnapshot() throws {
    let dir = makeTemporaryDirectory()
    let snapshot = dir + "/s.sqlite"
    try FileManager.default.copyItem(atPath: generated.snapshot, toPath: snapshot)
    let year2400 = Date(timeIntervalSince1970: 13_569_465_600)
    try FileManager.default.setAttributes([.modificationDate: year2400], ofItemAtPath: snapshot)
    let stream = StreamProcess([
      "--snapshot", snapshot, "--out", dir + "/out", "--log-format", "json",
    ])
    stream.write(bytes(trafficLines.prefix(100)))
    #expect(stream.waitForExit() == 0, "\(stream.stderr)")
    #expect(stream.stderr.contains(#""modified":"2400-01-01T00:00:00.000Z""#), "\(stream.stderr)")
  }

  @Test("--ready-file appears, holding the pid, once the stage reads; removed at exit")
  func readyFile() throws {
    let dir = makeTemporaryDirectory()
    let ready = dir + "/ready"
    let stream = StreamProcess([
      "--snapshot", generated.snapshot, "--out", dir + "/out", "--ready-file", ready,
    ])
    #expect(stream.wait { FileManager.default.fileExists(atPath: ready) })
    #expect(readText(ready) == "\(stream.pid)\n")
    #expect(stream.stderr.contains("ready: reading standard input"))
    stream.write(bytes(trafficLines.prefix(100)))
    #expect(stream.waitForExit() == 0, "\(stream.stderr)")
    #expect(!FileManager.default.fileExists(atPath: ready))
  }

  @Test("a line that never ends is rejected with its number, and memory stays bounded")
  func endlessLine() throws {
    let stream = StreamProcess([
      "--snapshot", generated.snapshot, "--out", "-", "--max-line-bytes", "1000",
    ])
    stream.write(bytes([trafficLines[0]]))
    // 200 MB with no line end, then one, then an ordinary line.
    let chunk = [UInt8](repeating: UInt8(ascii: "x"), count: 1 << 20)
    for _ in 0..<200 { #expect(stream.write(chunk)) }
    let peak = peakResidentKiB(stream.pid)
    stream.write(Array("yyy\n".utf8) + bytes([trafficLines[1]]))
    #expect(stream.waitForExit() == 0, "\(stream.stderr)")
    #expect(peak.map { $0 < 150 * 1024 } == true, "peak \(String(describing: peak)) KiB")
    let (deliveries, records) = splitStandardOutput(stream.stdout)
    #expect(sum(records, "lines") == 3)
    #expect(sum(records, "rejected") == 1)
    #expect(
      deliveries.rejected
        == #"{"line":2,"error":"line longer than 1000 bytes (--max-line-bytes); skipped to the next line end"}"#
        + "\n")
    let expected = evalDeliveries(
      snapshot: generated.snapshot, input: bytes([trafficLines[0], trafficLines[1]]))
    #expect(deliveries.gateways == expected.gateways)
  }

  @Test("--metrics: an unwritable path is refused at start; a later failure is logged only")
  func metrics() throws {
    let dir = makeTemporaryDirectory()
    let refused = runProcess(
      fanoutExecutable,
      [
        "stream", "--snapshot", generated.snapshot, "--out", dir + "/out", "--metrics",
        dir + "/missing/metrics.json",
      ], input: bytes(trafficLines.prefix(10)))
    #expect(refused.status == 64, "\(refused.stderr)")
    #expect(refused.stderr.contains("--metrics '\(dir)/missing/metrics.json' cannot be written"))
    #expect(!FileManager.default.fileExists(atPath: dir + "/out"))

    let metricsDir = dir + "/metrics"
    try FileManager.default.createDirectory(atPath: metricsDir, withIntermediateDirectories: true)
    let stream = StreamProcess([
      "--snapshot", generated.snapshot, "--out", dir + "/out", "--metrics",
      metricsDir + "/m.json", "--status-seconds", "0.1",
    ])
    stream.write(bytes(trafficLines.prefix(500)))
    #expect(stream.wait { FileManager.default.fileExists(atPath: metricsDir + "/m.json") })
    try FileManager.default.removeItem(atPath: metricsDir)
    #expect(stream.wait { stream.stderr.contains("cannot write the metrics") })
    stream.write(bytes(trafficLines[500...]))
    #expect(stream.waitForExit() == 0, "\(stream.stderr)")
    let folder = SegmentFolder(dir + "/out")
    #expect(sum(folder.records, "lines") == trafficLines.count)
  }

  @Test("more producers than open files allow: the extra ones wait, the output is written")
  func manyProducers() throws {
    let dir = makeTemporaryDirectory()
    let socket = dir + "/in.sock"
    let stream = StreamProcess(
      [
        "--snapshot", generated.snapshot, "--out", dir + "/out", "--listen", socket, "--metrics",
        dir + "/metrics.json", "--status-seconds", "0.1", "--ready-file", dir + "/ready",
      ], openFileLimit: 80)
    #expect(stream.wait { FileManager.default.fileExists(atPath: dir + "/ready") })
    // 80 - 64 descriptors kept back: 16 producers; the rest wait in the backlog.
    let producers = (0..<100).compactMap { _ in connectProducer(socket, waiting: false) }
    #expect(producers.count > 60)
    #expect(stream.wait { stream.stderr.contains("new ones wait until one disconnects") })
    sendAll(producers[0], bytes(trafficLines))
    close(producers[0])
    #expect(stream.wait { stream.stderr.contains("producer 1 disconnected") })
    for fd in producers.dropFirst() { close(fd) }
    #expect(
      stream.wait {
        stream.stderr.components(separatedBy: "disconnected").count == producers.count + 1
      })
    stream.send(SIGTERM)
    #expect(stream.waitForExit() == 0, "\(stream.stderr.suffix(2000))")
    #expect(!stream.stderr.contains("cannot write the metrics"))
    let folder = SegmentFolder(dir + "/out")
    #expect(sum(folder.records, "lines") == trafficLines.count)
    #expect(
      folder.deliveries.gateways
        == evalDeliveries(snapshot: generated.snapshot, input: bytes(trafficLines)).gateways)
  }
}

/// The process's peak resident memory so far (VmHWM), in KiB.
func peakResidentKiB(_ pid: Int32) -> Int? {
  let status = readText("/proc/\(pid)/status")
  guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }) else {
    return nil
  }
  return Int(line.split(separator: " ").dropFirst().first ?? "")
}
