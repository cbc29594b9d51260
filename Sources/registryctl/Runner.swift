import ArgumentParser
import RegistryClient
import RegistryModel

/// Runs a command: connects to the daemon, calls the command's body, prints its result or its error
/// the way the options say, and ends with the exit status.
struct Runner {
    let options: GlobalOptions
    /// Print results (and JSON errors) on standard error, for commands whose standard output carries
    /// data (`export --output -`).
    let resultsToStandardError: Bool

    init(_ options: GlobalOptions, resultsToStandardError: Bool = false) {
        self.options = options
        self.resultsToStandardError = resultsToStandardError
    }

    /// Runs local preparation (reading input files) and reports its error as the command's.
    /// - Throws: `ExitCode` after printing the error.
    func prepare<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch {
            throw self.fail(error, names: .builtIn)
        }
    }

    /// Connects, runs `body` with the client and prints what it returns.
    /// - Throws: `ExitCode` with the status of the result or of the error, after printing it.
    func run<Result: CommandResult>(_ body: (RegistryConnection) async throws -> Result) async throws {
        let client: RegistryConnection
        do {
            client = try await RegistryConnection.connect(socketPath: self.options.socketPath)
        } catch let error as RegistryClientError {
            throw self.fail(SocketUnreachable(error, implicit: self.options.socketIsImplicit), names: .builtIn)
        } catch {
            throw self.fail(error, names: .builtIn)
        }
        let result: Result
        do {
            result = try await body(client)
        } catch {
            var names = AlgorithmNames.builtIn
            if !self.options.json, ErrorReport(error).needsAlgorithmNames {
                names = await AlgorithmNames.load(from: client)
            }
            await client.close()
            throw self.fail(error, names: names)
        }
        let names = !self.options.json && Result.namesAlgorithms ? await AlgorithmNames.load(from: client) : .builtIn
        await client.close()
        let text = self.options.json ? JSONOutput.document(result) : result.text(names)
        if self.resultsToStandardError {
            if !text.isEmpty { printError(text) }
        } else if !text.isEmpty {
            print(text)
        }
        if !self.options.json, let notice = result.notice { printError(notice) }
        if result.exitStatus != .success { throw ExitCode(result.exitStatus.rawValue) }
    }

    /// Prints `error` and returns the `ExitCode` to throw.
    func fail(_ error: any Error, names: AlgorithmNames) -> ExitCode {
        if let exit = error as? ExitCode { return exit }
        let report = ErrorReport(error)
        if self.options.json {
            let document = JSONOutput.document(report)
            if self.resultsToStandardError { printError(document) } else { print(document) }
        } else {
            for line in report.text(names) { printError(line) }
        }
        return ExitCode(ExitStatus(for: error).rawValue)
    }
}
