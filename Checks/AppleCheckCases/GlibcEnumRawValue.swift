// expect (macOS): exists only in Glibc
// Glibc's RUSAGE_SELF.rawValue outside a Linux-only #if (Darwin's RUSAGE_SELF is an Int32)
#if canImport(Glibc)
    import Glibc
#endif

func cpuSeconds() -> Int {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Int(usage.ru_utime.tv_sec)
}
