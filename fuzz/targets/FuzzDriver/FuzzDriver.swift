// libFuzzer's driver, which each fuzz target's main runs. tools/fuzz's build defines REGISTRYD_FUZZING
// and links libFuzzer (the end of Package.swift); a plain build compiles nothing here.
#if REGISTRYD_FUZZING
    import Glibc

    @_silgen_name("LLVMFuzzerRunDriver")
    private func runDriver(
        _ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
        _ test: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
    ) -> CInt

    /// Runs libFuzzer on the process's arguments with `test` as the target, and exits with its status.
    public func runFuzzer(_ test: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt) -> Never {
        var argc = CommandLine.argc
        var argv = CommandLine.unsafeArgv
        exit(runDriver(&argc, &argv, test))
    }
#endif
