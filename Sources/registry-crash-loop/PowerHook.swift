import Glibc

/// The power-loss harness's side of a round (tools/power-loss): a program the loop runs at the
/// moments a cut may be aimed at, instead of signalling the daemon itself. Its words:
/// - `arm PHASE ROUND ATTEMPT`: the daemon is about to start (`start`, `restart`, `final-start`),
///   be loaded (`load`) or stopped with SIGTERM (`stop`, `final-stop`); the hook may set a trigger in
///   its file system that cuts the power inside that phase (kills the daemon, freezes the files).
/// - `cut PID`: cut the power now (the daemon, PID, is killed by the hook).
/// - `reset`: the daemon has ended; if the power was cut, drop or tear what was not synced and
///   remount, so the next start sees exactly what survived. Prints one line describing the cut,
///   or nothing when there was none.
/// A hook that fails (exit status not 0) fails the run: the loop cannot tell what happened.
struct PowerHook {
    let program: String

    /// Runs the hook with `words`; its standard output, trimmed.
    @discardableResult
    func run(_ words: [String]) throws -> String {
        var pipe: [Int32] = [0, 0]
        guard Glibc.pipe(&pipe) == 0 else { throw CrashLoopError("pipe: \(FrameConnection.errorText())") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, pipe[1], 1)
        posix_spawn_file_actions_addclose(&actions, pipe[0])
        let argv: [UnsafeMutablePointer<CChar>?] = ([self.program] + words).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, self.program, &actions, nil, argv, environ)
        close(pipe[1])
        defer { close(pipe[0]) }
        guard spawned == 0 else { throw CrashLoopError("cannot run the power hook \(self.program): \(String(cString: strerror(spawned)))") }
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(pipe[0], &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            output += buffer[0..<count]
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let text = String(decoding: output, as: UTF8.self)
        let ended = ExitStatus(waitStatus: status)
        guard ended == .exited(0) else {
            throw CrashLoopError("the power hook (\(words.joined(separator: " "))) ended with \(ended): \(text)")
        }
        return text.split(whereSeparator: \.isNewline).joined(separator: "; ")
    }

    func arm(_ phase: String, round: Int, attempt: Int = 1) throws {
        try self.run(["arm", phase, String(round), String(attempt)])
    }

    /// After the daemon ended: the cut's description, or nil when the power was not cut.
    func reset() throws -> String? {
        let line = try self.run(["reset"])
        return line.isEmpty ? nil : line
    }
}
