import ArgumentParser
import RegistryClient
import RegistryModel

/// `registryctl show IDENTIFIER`: an identifier's templates.
struct ShowCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Show an identifier's templates: id, algorithm, registration time, source, quality.",
        discussion: """
            CAPTURE QUALITY is the capture quality score of the face the template came from (when it \
            carried capture metadata), LANDMARK QUALITY the symmetry/coverage score of a landmark \
            template; "-" when there is none. Template data (biometric) is shown only with --data.
            """)

    @OptionGroup var options: GlobalOptions
    @OptionGroup var gallery: GalleryOptions

    @Argument(help: "The identifier.")
    var identifier: String

    @Flag(help: "Include the template data (Ver-ID form).")
    var data = false

    struct Result: CommandResult {
        var gallery: String
        var identifier: String
        var templates: [StoredTemplateJSON]

        func text(_ names: AlgorithmNames) -> String {
            var lines = ["\(Format.quoted(self.identifier)) in gallery \(self.gallery): \(Format.plural(self.templates.count, "template"))"]
            var table = Table(header: ["ID", "ALGORITHM", "REGISTERED", "SOURCE", "CAPTURE QUALITY", "LANDMARK QUALITY"])
            for template in self.templates {
                table.append([
                    "\(template.id)", names(template.algorithm), template.registeredAt, template.source,
                    template.quality.map { Format.fixed(Double($0), digits: 3) } ?? "-",
                    template.landmarkQuality.map { Format.fixed(Double($0), digits: 3) } ?? "-",
                ])
            }
            lines += table.lines(indent: "  ")
            for template in self.templates {
                guard let data = template.template else { continue }
                // Printed only because --data asked for it.
                let json = (try? JSONOutput.encode(data, pretty: false)) ?? ""
                lines.append("template \(template.id): \(json)")
            }
            return lines.joined(separator: "\n")
        }

        static var namesAlgorithms: Bool { true }
    }

    func run() async throws {
        let gallery = self.gallery.name
        try await Runner(self.options).run { client in
            let templates = try await client.templates(gallery: gallery, identifier: self.identifier, includeData: self.data)
            return Result(gallery: gallery, identifier: self.identifier, templates: templates.map(StoredTemplateJSON.init))
        }
    }
}
