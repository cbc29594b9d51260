// libFuzzer entry point (tools/fuzz); a plain build links this as a no-op executable.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    DispatchFuzz.run(UnsafeBufferPointer(start: data, count: size))
    return 0
}
