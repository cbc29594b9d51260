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
        /// Each with its data when asked for (--data).
        var templates: [StoredTemplate]

        private enum CodingKeys: String, CodingKey { case gallery, identifier, templates }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(self.gallery, forKey: .gallery)
            try container.encode(self.identifier, forKey: .identifier)
            try container.encode(self.templates.map(Shown.init), forKey: .templates)
        }

        /// A stored template as `show` prints it: the model's encoding (its metadata) and, when it
        /// was fetched with its data, `template` in the Ver-ID form. Only here: no other encoding of
        /// a stored template carries biometric data.
        private struct Shown: Encodable {
            var stored: StoredTemplate

            func encode(to encoder: any Encoder) throws {
                try self.stored.encode(to: encoder)
                guard let template = self.stored.template else { return }
                var container = encoder.container(keyedBy: StoredTemplate.CodingKeys.self)
                try container.encode(VerIDTemplate(template), forKey: .template)
            }
        }

        func text(_ names: AlgorithmNames) -> String {
            var lines = ["\(Format.quoted(self.identifier)) in gallery \(self.gallery): \(Format.plural(self.templates.count, "template"))"]
            var table = Table(header: ["ID", "ALGORITHM", "REGISTERED", "SOURCE", "CAPTURE QUALITY", "LANDMARK QUALITY"])
            for template in self.templates {
                table.append([
                    "\(template.id)", names(template.algorithm), Timestamp.iso8601(micros: template.registeredAt), template.source.jsonName,
                    template.quality.map { Format.fixed(Double($0), digits: 3) } ?? "-",
                    template.landmarkQuality.map { Format.fixed(Double($0), digits: 3) } ?? "-",
                ])
            }
            lines += table.lines(indent: "  ")
            for template in self.templates {
                guard let data = template.template else { continue }
                // Printed only because --data asked for it.
                let json = (try? JSONOutput.encode(VerIDTemplate(data), pretty: false)) ?? ""
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
            return Result(gallery: gallery, identifier: self.identifier, templates: templates)
        }
    }
}

/// A template's data in the Ver-ID form, `{"version", "data": [...]}` or `{"version", "landmarks":
/// [{"name", "x", "y", "z"}]}` (only with `show --data`). Kept here, not as an encoding of the
/// model's FaceTemplate, so that templates are encoded only where a command is asked to print them.
struct VerIDTemplate: Encodable {
    var template: FaceTemplate

    init(_ template: FaceTemplate) {
        self.template = template
    }

    private enum CodingKeys: String, CodingKey { case version, data, landmarks }
    private enum LandmarkKeys: String, CodingKey { case name, x, y, z }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(self.template.algorithm, forKey: .version)
        switch self.template.data {
        case .vector(let values):
            try container.encode(values, forKey: .data)
        case .landmarks(let landmarks):
            var list = container.nestedUnkeyedContainer(forKey: .landmarks)
            for landmark in landmarks {
                var object = list.nestedContainer(keyedBy: LandmarkKeys.self)
                try object.encode(landmark.name, forKey: .name)
                try object.encode(landmark.x, forKey: .x)
                try object.encode(landmark.y, forKey: .y)
                try object.encode(landmark.z, forKey: .z)
            }
        }
    }
}
