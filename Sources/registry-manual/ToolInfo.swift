/// The part of swift-argument-parser's `--experimental-dump-help` document (serialization version 0,
/// `ArgumentParserToolInfo.ToolInfoV0`) the pages are made from. That module is not a product of the
/// package, so its shape is mirrored here; unknown keys are ignored.
struct ToolInfo: Decodable {
    var serializationVersion: Int
    var command: CommandInfo
}

struct CommandInfo: Decodable {
    var superCommands: [String]?
    var commandName: String
    var abstract: String?
    var discussion: String?
    var shouldDisplay: Bool?
    var subcommands: [CommandInfo]?
    var arguments: [ArgumentInfo]?

    /// The command words from the root: `["registryctl", "delete", "identifier"]`.
    var path: [String] { (self.superCommands ?? []) + [self.commandName] }

    /// The subcommands a reader should see: not hidden ones, and not ArgumentParser's `help`, which
    /// only repeats `--help`.
    var visibleSubcommands: [CommandInfo] {
        (self.subcommands ?? []).filter { $0.shouldDisplay != false && $0.commandName != "help" }
    }

    var visibleArguments: [ArgumentInfo] { (self.arguments ?? []).filter(\.shouldDisplay) }

    /// Every command below this one, depth first, in declaration order.
    var descendants: [CommandInfo] { self.visibleSubcommands.flatMap { [$0] + $0.descendants } }
}

struct ArgumentInfo: Decodable {
    enum Kind: String, Decodable {
        case positional, option, flag
    }

    struct Name: Decodable {
        enum Kind: String, Decodable {
            case long, short, longWithSingleDash
        }

        var kind: Kind
        var name: String
    }

    var kind: Kind
    var shouldDisplay: Bool
    var isOptional: Bool
    var isRepeating: Bool
    var names: [Name]?
    var preferredName: Name?
    var valueName: String?
    var defaultValue: String?
    var allValues: [String]?
    var abstract: String?
    var discussion: String?

    /// `--help` and `--version`, which every command has and the synopsis leaves out.
    var isBuiltIn: Bool {
        self.kind == .flag && (self.names ?? []).contains { $0.kind == .long && ($0.name == "help" || $0.name == "version") }
    }

    /// The long name without dashes, when it has one.
    var longName: String? { (self.names ?? []).first { $0.kind == .long }?.name }
}
