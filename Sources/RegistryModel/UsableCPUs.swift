import Glibc

/// How many CPUs this process may use: the CPUs in its affinity mask, bounded by its cgroup's CPU
/// quota (v2 `cpu.max`, v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`), rounded up. A service started
/// with `CPUAffinity=` or `CPUQuota=`, or a container with a CPU limit, sizes its threads to that,
/// not to every online CPU (as NIO's `System.coreCount` does for its event loops).
public enum UsableCPUs {
    public static let count: Int = {
        var cpus = Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        // The affinity mask as the kernel reports it (Glibc's module does not export sched_getaffinity).
        if let status = KernelFile.text("/proc/self/status"), let allowed = UsableCPUs.allowed(status: status) { cpus = min(cpus, allowed) }
        if let quota = UsableCPUs.quota() { cpus = min(cpus, quota) }
        return max(1, cpus)
    }()

    /// The CPUs in `Cpus_allowed:` of a `/proc/<pid>/status` text (a hex mask, comma-separated words).
    static func allowed(status: String) -> Int? {
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Cpus_allowed:") }) else { return nil }
        var count = 0
        for character in line.dropFirst("Cpus_allowed:".count) where character.isHexDigit {
            count += character.hexDigitValue!.nonzeroBitCount
        }
        return count > 0 ? count : nil
    }

    /// The cgroup's quota in whole CPUs (rounded up), or nil when there is none.
    static func quota() -> Int? {
        let groups = KernelFile.text("/proc/self/cgroup")?.split(separator: "\n") ?? []
        // cgroup v2: "max 100000" or "150000 100000" in the process's own group.
        if let group = groups.first(where: { $0.hasPrefix("0::") }) {
            let path = "/sys/fs/cgroup" + group.dropFirst(3) + "/cpu.max"
            if let fields = KernelFile.text(path)?.split(whereSeparator: \.isWhitespace), fields.count == 2 {
                return self.cpus(quota: Int(fields[0]), period: Int(fields[1]))
            }
        }
        // cgroup v1: the process's group in the cpu hierarchy ("4:cpu,cpuacct:/system.slice/…").
        let number = { (path: String) in KernelFile.text(path)?.split(whereSeparator: \.isWhitespace).first.flatMap { Int($0) } }
        let cpuGroup =
            groups.lazy.map { $0.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false) }
            .first { $0.count == 3 && $0[1].split(separator: ",").contains("cpu") }.map { String($0[2]) } ?? "/"
        for root in ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"] {
            let directory = root + (cpuGroup == "/" ? "" : cpuGroup)
            if let quota = number(directory + "/cpu.cfs_quota_us") {
                return self.cpus(quota: quota, period: number(directory + "/cpu.cfs_period_us"))
            }
        }
        return nil
    }

    /// `quota` over `period`, rounded up; nil for no quota ("max", -1) or nonsense.
    static func cpus(quota: Int?, period: Int?) -> Int? {
        guard let quota, let period, quota > 0, period > 0 else { return nil }
        return (quota + period - 1) / period
    }
}
