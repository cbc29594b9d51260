// The libFuzzer target (tools/fuzz). tools/fuzz's build defines REGISTRYD_FUZZING and links libFuzzer
// (Package.swift), whose driver this executable's main runs; a plain build links a no-op executable.
#if REGISTRYD_FUZZING
    import Glibc

    @_silgen_name("LLVMFuzzerRunDriver")
    func runFuzzerDriver(
        _ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
        _ test: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
    ) -> CInt

    var argc = CommandLine.argc
    var argv = CommandLine.unsafeArgv
    exit(
        runFuzzerDriver(&argc, &argv) { data, size in
            ConfigFuzz.run(UnsafeBufferPointer(start: data, count: size))
            return 0
        })
#endif
