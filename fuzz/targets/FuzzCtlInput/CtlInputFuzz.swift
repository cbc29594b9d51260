import RegistryCtlInput
import RegistryModel

/// One file's bytes through every registryctl input parser: a face file (template object, array of
/// them, or face object with capture metadata and depth frames), an export file (Ver-ID JSON records,
/// the protobuf stream and a dump with or without its trailer) and a liveness enrolment file; then
/// the syntax checker that positions JSON errors. Failures must be thrown `InputFileError`s naming the file, never crashes.
enum CtlInputFuzz {
    static let file = "input.json"

    static func run(_ input: UnsafeBufferPointer<UInt8>) {
        let bytes = Array(input)
        Self.expectFileError { () throws(InputFileError) in _ = try TemplateJSON.faceFile(from: bytes, file: Self.file) }
        Self.expectFileError { () throws(InputFileError) in _ = try TemplateJSON.importItems(from: bytes, file: Self.file) }
        Self.expectFileError { () throws(InputFileError) in _ = try TemplateJSON.enrolmentFrames(from: bytes, file: Self.file) }
        Self.expectFileError { () throws(InputFileError) in _ = try TemplateStreamReader.protobufItems(from: bytes, file: Self.file) }
        Self.expectFileError { () throws(InputFileError) in _ = try DumpFile.sections(from: bytes, file: Self.file) }
        if let problem = JSONSyntaxChecker.firstProblem(in: bytes) {
            precondition(problem.offset >= 0 && problem.offset <= bytes.count, "a syntax problem outside the document")
            let (line, column) = JSONSyntaxChecker.position(of: problem.offset, in: bytes)
            precondition(line >= 1 && column >= 1, "a syntax problem at an impossible position")
        }
    }

    static func expectFileError(_ body: () throws(InputFileError) -> Void) {
        do {
            try body()
        } catch {
            precondition(error.file == Self.file, "the error does not name the file")
        }
    }
}
