import Glibc
import RegistryClient
import RegistryEngine
import RegistryModel
import RegistryProtocol
import SyntheticFaces
import Testing

/// The scan kernels through the real daemon: the level it reports, that `REGISTRY_KERNELS` lowers
/// it and `REGISTRY_PREFILTER=off` turns the prefilter off, and that identification and the
/// registration check give the same identifiers and scores, bit for bit, whichever is in use.
@Suite struct ScanKernelsEndToEndTests {
    /// 3,000 arcface templates (1,000 identifiers, three captures each): enough rows for the
    /// prefilter to apply (it starts at 2,048).
    static func templates() -> [(identifier: String, vector: [Float])] {
        var random = SeededRandom(seed: 42)
        func normal() -> Float {
            let u = max(random.uniform(), 1e-300)
            let v = random.uniform()
            return Float((-2 * log(u)).squareRoot() * cos(2 * .pi * v))
        }
        func unit(_ x: [Float]) -> [Float] {
            let norm = x.reduce(0) { $0 + $1 * $1 }.squareRoot()
            return x.map { $0 / norm }
        }
        var result: [(String, [Float])] = []
        for person in 0..<1_000 {
            let centre = unit((0..<128).map { _ in normal() })
            for _ in 0..<3 { result.append(("p\(person)", unit(centre.map { $0 + normal() * 0.03 }))) }
        }
        return result
    }

    struct Observed: Equatable {
        var identified: [[String]]
        var scores: [[Float]]
        var refusal: String
    }

    func observe(environment: [String]) async throws -> (observed: Observed, kernels: String, considered: UInt64) {
        let daemon = try Daemon(environment: environment)
        let client = try await daemon.client()
        let templates = Self.templates()
        for start in stride(from: 0, to: templates.count, by: 500) {
            let items = templates[start..<min(templates.count, start + 500)].map {
                ImportItem(identifier: $0.identifier, template: FaceTemplate(algorithm: 24, vector: $0.vector))
            }
            _ = try await client.importTemplates(items)
        }
        var observed = Observed(identified: [], scores: [], refusal: "")
        for q in 0..<8 {
            // Stored captures (a clear best), and every other one a mix of two people.
            var query = templates[q * 301].vector
            if q % 2 == 1 { query = zip(query, templates[q * 97 + 5].vector).map { $0 + $1 } }
            let result = try await client.identify(face: Face(FaceTemplate(algorithm: 24, vector: query)), autoEnrol: false, limit: 10)
            observed.identified.append(result.matches.map(\.identifier))
            observed.scores.append(result.matches.map(\.score))
        }
        // A capture of p7 registered under a new name: refused, naming p7 with its score.
        do {
            _ = try await client.register(identifier: "newcomer", face: Face(FaceTemplate(algorithm: 24, vector: templates[21].vector)))
        } catch let error as RegistryError {
            if case .registration(let decisive, _) = error.details, case .similarFace(let identifier, let score) = decisive.kind {
                observed.refusal = "\(identifier) \(score)"
            }
        }
        let stats = try await client.stats()
        await client.close()
        _ = daemon.stop()
        return (observed, stats.scanKernels, stats.prefilterRowsConsidered)
    }

    @Test func everyKernelLevelAndThePlainScanAnswerTheSame() async throws {
        let native = try await self.observe(environment: [])
        let scalar = try await self.observe(environment: ["REGISTRY_KERNELS=scalar"])
        let plain = try await self.observe(environment: ["REGISTRY_PREFILTER=off"])
        // Above arcface's identification threshold (0.6): the nudged capture's person first, and
        // for the mixes, both people.
        for q in stride(from: 0, to: 8, by: 2) { #expect(native.observed.identified[q].first == "p\(q * 301 / 3)") }
        #expect(native.observed.identified.allSatisfy { !$0.isEmpty })
        #expect(native.observed.refusal.hasPrefix("p7 "))
        #expect(scalar.observed == native.observed)
        #expect(plain.observed == native.observed)
        // What each reports: the machine's level (unless this test run lowers it), the forced one, off.
        if getenv("REGISTRY_KERNELS") == nil { #expect(native.kernels == Engine.scanKernels) }
        #expect(scalar.kernels == "scalar")
        #expect(plain.kernels.hasSuffix("prefilter off"))
        #expect(native.considered >= 8 * 3_000)
        #expect(scalar.considered >= 8 * 3_000)
        #expect(plain.considered == 0)
    }
}
