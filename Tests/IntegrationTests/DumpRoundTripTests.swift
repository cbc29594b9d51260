import Glibc
import RegistryClient
import RegistryModel
import TestSupport
import Testing

/// `registryctl export` and `import` carry a whole store between daemons: gallery definitions,
/// templates with their times, sources and qualities, and liveness profiles.
@Suite struct DumpRoundTripTests {
    /// Runs registryctl against `daemon`; its exit status and what it printed.
    static func registryctl(_ daemon: Daemon, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let binary = try #require(siblingExecutable("registryctl"))
        return try run([binary] + arguments + ["--socket", daemon.socketPath], log: daemon.directory + "/registryctl.out")
    }

    static func face(_ seed: Int) -> Face {
        var values = [Float](repeating: 0, count: 128)
        values[seed % 128] = 1
        values[(seed * 7 + 3) % 128] = 0.5
        return Face(FaceTemplate(algorithm: 24, vector: values))
    }

    /// The repository's examples/migration/ (this file is Tests/IntegrationTests/DumpRoundTripTests.swift).
    static func example(_ name: String) -> String {
        var parts = "\(#filePath)".split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(3)
        return parts.joined(separator: "/") + "/examples/migration/" + name
    }

    /// Everything a dump should carry, as a client sees it.
    static func state(_ client: inout RegistryConnection) async throws -> [String] {
        var lines: [String] = []
        for gallery in try await client.galleries().sorted(by: { $0.name < $1.name }) {
            lines.append("\(gallery.name) \(GalleryConfiguration(gallery)) identifiers=\(gallery.identifierCount)")
            var after: UInt64 = 0
            while true {
                let page = try await client.export(gallery: gallery.name, after: after)
                for stored in page.templates {
                    lines.append(
                        "  \(stored.identifier) \(stored.algorithm) \(stored.registeredAt) \(stored.source) \(String(describing: stored.quality)) "
                            + "\(String(describing: stored.landmarkQuality)) \(stored.template == nil ? "no data" : "\(stored.template!.data.hashValue)")"
                    )
                }
                guard let next = page.next else { break }
                after = next
            }
            for entry in try await client.exportLivenessProfiles(gallery: gallery.name).profiles {
                lines.append("  profile \(entry.identifier) \(entry.profile)")
            }
        }
        return lines
    }

    @Test func exportImportExportIsByteIdenticalAndImportingTwiceChangesNothing() async throws {
        let source = try Daemon()
        var client = try await source.client()
        // The default gallery, with a gap in its template ids.
        for index in 0..<6 { _ = try await client.register(identifier: "p\(index)", face: Self.face(index), force: true) }
        #expect(try await client.deleteIdentifier(identifier: "p2") == 1)
        // Landmarks migrating to landmarks-aligned: auto-enrolled templates.
        try await client.defineGallery(
            GalleryConfiguration(name: "doors", registries: [RegistryConfiguration(algorithm: 1000), RegistryConfiguration(algorithm: 1001)]))
        for name in ["alice", "bob", "carol"] {
            #expect(try Self.registryctl(source, ["register", name, Self.example("\(name)-landmarks.json"), "--gallery", "doors"]).status == 0)
            #expect(try Self.registryctl(source, ["authenticate", name, Self.example("\(name)-both.json"), "--gallery", "doors"]).status == 0)
        }
        // Thresholds, liveness policy and k of its own, and liveness profiles.
        try await client.defineGallery(
            GalleryConfiguration(
                name: "staff",
                registries: [
                    RegistryConfiguration(algorithm: 24, thresholds: Thresholds(authentication: 0.61, identification: 0.63, autoEnrolment: 0.7))
                ],
                liveness: LivenessPolicy(authenticate: true), livenessK: 2.5))
        for index in 0..<3 { _ = try await client.register(gallery: "staff", identifier: "s\(index)", face: Self.face(20 + index), force: true) }
        for index in 0..<2 {
            try await client.enrolLivenessProfile(gallery: "staff", identifier: "s\(index)", frames: enrolmentFrames(seed: UInt64(index + 1)))
        }
        // Quality gates, and no template: the definition alone travels.
        try await client.defineGallery(
            GalleryConfiguration(
                name: "lobby", registries: [RegistryConfiguration(algorithm: 24, minimumQuality: 0.4, minimumAutoEnrolmentQuality: 0.6)]))
        let expected = try await Self.state(&client)
        #expect(expected.contains { $0.contains("autoEnrolled") }, "\(expected)")
        #expect(expected.count { $0.hasPrefix("  profile ") } == 2)
        await client.close()

        let first = source.directory + "/first.dump"
        var result = try Self.registryctl(source, ["export", "--all", "--output", first])
        #expect(result.status == 0 && result.output.contains("exported 14 templates and 2 liveness profiles of 4 galleries"), "\(result.output)")

        let target = try Daemon()
        result = try Self.registryctl(target, ["import", first])
        #expect(result.status == 0 && result.output.contains("imported 14 templates"), "\(result.output)")
        #expect(result.output.contains("2 liveness profiles stored"), "\(result.output)")
        var copy = try await target.client()
        #expect(try await Self.state(&copy) == expected)
        #expect(try await copy.verify().problems.isEmpty)

        let second = target.directory + "/second.dump"
        #expect(try Self.registryctl(target, ["export", "--all", "--output", second]).status == 0)
        #expect(readFileBytes(second) == readFileBytes(first), "export → import → export differs")

        // Again: nothing changes, and the summary says what was skipped.
        result = try Self.registryctl(target, ["import", first])
        #expect(result.status == 0 && result.output.contains("imported 0 templates"), "\(result.output)")
        #expect(result.output.contains("14 already stored, skipped") && result.output.contains("2 already stored, skipped"), "\(result.output)")
        #expect(try await Self.state(&copy) == expected)

        // Duplicates only when asked; one gallery of the dump with --gallery.
        result = try Self.registryctl(target, ["import", first, "--gallery", "staff", "--duplicates"])
        #expect(result.status == 0 && result.output.contains("imported 3 templates into gallery staff"), "\(result.output)")
        let staff = try await copy.galleries().first { $0.name == "staff" }
        #expect(staff?.registries.first?.templateCount == 6)
        result = try Self.registryctl(target, ["import", first, "--gallery", "nowhere"])
        #expect(result.status != 0 && result.output.contains("holds no gallery 'nowhere'"), "\(result.output)")
        await copy.close()
    }

    /// An operator's definition on the target is not quietly replaced: a gallery the target defined
    /// itself keeps its definition even without templates (said so; --redefine replaces it), while a
    /// fresh daemon's default gallery (no template, the built-in definition) takes the dump's.
    @Test func importKeepsAnOperatorsDefinitionUnlessToldToRedefine() async throws {
        let source = try Daemon()
        var client = try await source.client()
        let lobby = GalleryConfiguration(name: "lobby", registries: [RegistryConfiguration(algorithm: 24, minimumQuality: 0.4)])
        let custom = GalleryConfiguration(
            name: GalleryConfiguration.defaultName,
            registries: [RegistryConfiguration(algorithm: 24, thresholds: Thresholds(authentication: 0.62, identification: 0.64, autoEnrolment: 0.7))]
        )
        try await client.defineGallery(lobby)
        try await client.defineGallery(custom)
        // As the daemon gives them back (defaults filled in).
        let sourceDefinitions = Dictionary(uniqueKeysWithValues: try await client.galleries().map { ($0.name, GalleryConfiguration($0)) })
        await client.close()
        let dump = source.directory + "/all.dump"
        #expect(try Self.registryctl(source, ["export", "--all", "--output", dump]).status == 0)

        let target = try Daemon()
        var copy = try await target.client()
        let own = GalleryConfiguration(name: "lobby", registries: [RegistryConfiguration(algorithm: 300)])
        try await copy.defineGallery(own)
        func definition(_ name: String) async throws -> GalleryConfiguration? {
            try await copy.galleries().first { $0.name == name }.map(GalleryConfiguration.init)
        }
        let ownDefinition = try await definition("lobby")
        var result = try Self.registryctl(target, ["import", dump])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains("gallery lobby is defined differently from the file: its definition is kept (--redefine"), "\(result.output)")
        #expect(try await definition("lobby") == ownDefinition && ownDefinition != sourceDefinitions["lobby"])
        #expect(
            try await definition(GalleryConfiguration.defaultName) == sourceDefinitions[GalleryConfiguration.defaultName],
            "the untouched default gallery takes the dump's")

        result = try Self.registryctl(target, ["import", dump, "--redefine"])
        #expect(result.status == 0 && result.output.contains("\ndefined lobby as the file does"), "\(result.output)")
        #expect(try await definition("lobby") == sourceDefinitions["lobby"])
        await copy.close()
    }

    static func write(_ bytes: [UInt8], to path: String) throws {
        guard let file = fopen(path, "wb") else { throw HarnessError("cannot create \(path)") }
        defer { fclose(file) }
        guard fwrite(bytes, 1, bytes.count, file) == bytes.count else { throw HarnessError("cannot write \(path)") }
    }

    /// Where each record's frame starts (after the 8-byte magic), from the length prefixes.
    static func frameStarts(_ bytes: [UInt8]) -> [Int] {
        var starts: [Int] = []
        var offset = 8
        while offset + 4 <= bytes.count {
            starts.append(offset)
            offset += 4 + bytes[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
        }
        return starts
    }

    /// Import checks a dump's trailer before it sends anything: a dump cut short at a record boundary
    /// (which would otherwise import as a smaller one) or with a changed byte is a bad input file
    /// (exit 65) that imports nothing. A dump in the format from before the trailer (REGDUMP1, no
    /// trailer) still imports, with a warning on standard error that it cannot be checked.
    @Test func importRefusesADumpCutShortOrDamagedAndWarnsOfOneWithoutTrailer() async throws {
        let source = try Daemon()
        var client = try await source.client()
        for index in 0..<5 { _ = try await client.register(identifier: "p\(index)", face: Self.face(index), force: true) }
        try await client.defineGallery(GalleryConfiguration(name: "staff", registries: [RegistryConfiguration(algorithm: 24)]))
        for index in 0..<3 { _ = try await client.register(gallery: "staff", identifier: "s\(index)", face: Self.face(40 + index), force: true) }
        let expected = try await Self.state(&client)
        await client.close()
        let path = source.directory + "/all.dump"
        #expect(try Self.registryctl(source, ["export", "--all", "--output", path]).status == 0)
        let bytes = try #require(readFileBytes(path))
        let starts = Self.frameStarts(bytes)
        // Two galleries, eight templates, the trailer.
        #expect(starts.count == 11)

        let target = try Daemon()
        var copy = try await target.client()
        let empty = try await Self.state(&copy)
        let cut = target.directory + "/cut.dump"
        // Cut before the trailer, in the second gallery, after the first gallery's definition, and
        // right after the magic.
        for records in [10, 7, 1, 0] {
            try Self.write(Array(bytes[..<starts[records]]), to: cut)
            let result = try Self.registryctl(target, ["import", cut])
            let end = records == 0 ? "its REGDUMP2 header" : "record \(records)"
            #expect(result.status == 65, "\(result.output)")
            #expect(result.output.contains("cut.dump: the dump ends after \(end) without its trailer: the file was cut short"), "\(result.output)")
        }
        // Cut inside a template's record.
        try Self.write(Array(bytes[..<((starts[3] + starts[4]) / 2)]), to: cut)
        var result = try Self.registryctl(target, ["import", cut])
        #expect(result.status == 65, "\(result.output)")
        #expect(
            result.output.contains("cut.dump: record 4 at byte \(starts[3]): truncated")
                && result.output.contains("the file was cut short, or damaged"), "\(result.output)")
        // A changed byte in the middle of the last template's data (the record still decodes).
        var damaged = bytes
        damaged[(starts[9] + starts[10]) / 2] ^= 0x10
        try Self.write(damaged, to: cut)
        result = try Self.registryctl(target, ["import", cut])
        #expect(result.status == 65 && result.output.contains("the file was damaged"), "\(result.output)")
        #expect(try await Self.state(&copy) == empty, "a refused dump imported something")

        // The old format, as the test writes it: the old magic, the same records, no trailer.
        let old = target.directory + "/old.dump"
        try Self.write(Array("REGDUMP1".utf8) + Array(bytes[8..<starts[10]]), to: old)
        let binary = try #require(siblingExecutable("registryctl"))
        let errors = target.directory + "/old.stderr"
        result = try run(
            ["/bin/sh", "-c", #"exec "$0" "$@" 2>"$ERRORS""#, binary, "import", old, "--socket", target.socketPath],
            environment: ["ERRORS=\(errors)"], log: target.directory + "/old.stdout")
        let warning = readFileText(errors)
        #expect(result.status == 0 && result.output.contains("imported 8 templates"), "\(result.output)")
        #expect(
            warning.contains("registryctl: warning: \(old) is a REGDUMP1 dump") && warning.contains("cannot be checked for being complete"),
            "standard error: \(warning)")
        #expect(try await Self.state(&copy) == expected)
        await copy.close()
    }
}
