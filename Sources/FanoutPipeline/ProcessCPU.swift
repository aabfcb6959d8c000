#if canImport(Glibc)
  import Glibc
#endif

/// The CPU time this process has used so far, every thread's.
struct ProcessCPU {
  var user: Double
  var system: Double

  static func now() -> ProcessCPU {
    var usage = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
    return ProcessCPU(user: seconds(usage.ru_utime), system: seconds(usage.ru_stime))
  }
}
