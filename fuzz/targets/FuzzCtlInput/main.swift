// The ctl-input fuzz target's entry (tools/fuzz); a plain build links a no-op executable.
#if REGISTRYD_FUZZING
    import FuzzDriver

    runFuzzer { data, size in
        CtlInputFuzz.run(UnsafeBufferPointer(start: data, count: size))
        return 0
    }
#endif
