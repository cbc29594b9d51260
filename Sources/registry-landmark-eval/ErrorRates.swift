/// Genuine and impostor scores of one algorithm in one condition, and what follows from them.
struct ErrorRates: Sendable {
    var genuine: [Float]
    var impostor: [Float]

    init(genuine: [Float], impostor: [Float]) {
        self.genuine = genuine.sorted()
        self.impostor = impostor.sorted()
    }

    /// The p-quantile (nearest rank) of sorted scores.
    static func quantile(_ sorted: [Float], _ p: Double) -> Float {
        guard !sorted.isEmpty else { return .nan }
        let rank = Int((p * Double(sorted.count)).rounded(.up)) - 1
        return sorted[min(max(rank, 0), sorted.count - 1)]
    }

    /// Genuine pairs scoring below `threshold` (refused), as a fraction.
    func falseRejection(at threshold: Float) -> Double {
        Double(self.genuine.partitioningIndex { $0 >= threshold }) / Double(max(self.genuine.count, 1))
    }

    /// Impostor pairs scoring at or above `threshold` (accepted), as a fraction.
    func falseAcceptance(at threshold: Float) -> Double {
        Double(self.impostor.count - self.impostor.partitioningIndex { $0 >= threshold }) / Double(max(self.impostor.count, 1))
    }

    /// The lowest threshold at which at most `rate` of the impostor pairs are accepted.
    func threshold(forFalseAcceptance rate: Double) -> Float {
        let allowed = Int((rate * Double(self.impostor.count)).rounded(.down))
        guard allowed < self.impostor.count else { return 0 }
        // Accepting only scores above the (allowed + 1)-th largest keeps `allowed` or fewer.
        return self.impostor[self.impostor.count - 1 - allowed].nextUp
    }
}

extension Array where Element == Float {
    /// The first index whose element satisfies `predicate` (monotone over the sorted array).
    func partitioningIndex(where predicate: (Float) -> Bool) -> Int {
        var low = 0
        var high = self.count
        while low < high {
            let middle = (low + high) / 2
            if predicate(self[middle]) { high = middle } else { low = middle + 1 }
        }
        return low
    }
}
