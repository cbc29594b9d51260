// The frame fuzz target's entry (tools/fuzz); a plain build links a no-op executable.
#if REGISTRYD_FUZZING
    import FuzzDriver

    /// libFuzzer's custom mutator: a share of the mutations resize a field or repeat an element to a
    /// length or count at or around a request bound (LimitMutator), the rest are libFuzzer's own.
    @_cdecl("LLVMFuzzerCustomMutator")
    public func customMutator(_ data: UnsafeMutablePointer<UInt8>?, _ size: Int, _ maxSize: Int, _ seed: UInt32) -> Int {
        LimitMutator.mutate(data, size, maxSize, seed, layout: .frames)
    }

    runFuzzer { data, size in
        FrameFuzz.run(UnsafeBufferPointer(start: data, count: size))
        return 0
    }
#endif
