import Testing

@testable import RegistryEngine
@testable import RegistryModel

/// The capture quality score of the capture quality design: each normalisation at its boundaries and
/// midpoint, the weights, renormalisation, rating bands, the weakest component, missing inputs.
@Suite struct CaptureQualityTests {
    /// A capture on which every component normalises to 1.0: confidence 1, the face 25 % of the image
    /// (200 × 200 in 400 × 400), frontal, 200 px, sharpness 300, brightness 128 ± 40.
    static func perfect() -> CaptureMetadata {
        CaptureMetadata(
            detectorConfidence: 1, faceBox: FaceBox(x: 100, y: 100, width: 200, height: 200), imageWidth: 400,
            imageHeight: 400, yaw: 0, pitch: 0, roll: 0, sharpness: 300, brightnessMean: 128, brightnessStdDev: 40)
    }

    /// `perfect()` without the optional inputs (sharpness, brightness).
    static func perfectCore() -> CaptureMetadata {
        var capture = perfect()
        capture.sharpness = nil
        capture.brightnessMean = nil
        capture.brightnessStdDev = nil
        return capture
    }

    // MARK: Normalisations

    @Test func confidenceIsTheDetectorConfidenceClampedToTheUnitInterval() {
        #expect(CaptureQuality.normalisedConfidence(-0.5) == 0)
        #expect(CaptureQuality.normalisedConfidence(0) == 0)
        #expect(CaptureQuality.normalisedConfidence(0.25) == 0.25)
        #expect(CaptureQuality.normalisedConfidence(0.5) == 0.5)
        #expect(CaptureQuality.normalisedConfidence(1) == 1)
        #expect(CaptureQuality.normalisedConfidence(1.5) == 1)
    }

    @Test func sizeRisesFromTwoToTwentyPercentOfTheImage() {
        // Areas over a 100 × 100 image: the fraction in percent is the face area / 100.
        #expect(CaptureQuality.normalisedSize(faceArea: 0, imageArea: 10_000) == 0)
        #expect(CaptureQuality.normalisedSize(faceArea: 100, imageArea: 10_000) == 0)  // 1 %
        #expect(CaptureQuality.normalisedSize(faceArea: 200, imageArea: 10_000) == 0)  // 2 %
        #expect(CaptureQuality.normalisedSize(faceArea: 650, imageArea: 10_000) == 0.25)  // 6.5 %
        #expect(CaptureQuality.normalisedSize(faceArea: 1_100, imageArea: 10_000) == 0.5)  // 11 %
        #expect(CaptureQuality.normalisedSize(faceArea: 2_000, imageArea: 10_000) == 1)  // 20 %
        #expect(CaptureQuality.normalisedSize(faceArea: 5_000, imageArea: 10_000) == 1)  // 50 %
        #expect(CaptureQuality.normalisedSize(faceArea: 10_000, imageArea: 10_000) == 1)  // 100 %
        // No image area: nothing to measure against.
        #expect(CaptureQuality.normalisedSize(faceArea: 100, imageArea: 0) == 0)
    }

    @Test func sizeInAnAssessmentIsTheBoxAreaOverTheImageArea() throws {
        var capture = Self.perfect()
        capture.imageWidth = 1_000
        capture.imageHeight = 1_000
        // 200 × 550 = 110 000 px² of 1 000 000: 11 %.
        capture.faceBox = FaceBox(x: 0, y: 0, width: 200, height: 550)
        #expect(try #require(CaptureQuality.assess(capture)).components[.size] == 0.5)
        // 100 × 200 = 20 000 px²: 2 %.
        capture.faceBox = FaceBox(x: 0, y: 0, width: 100, height: 200)
        #expect(try #require(CaptureQuality.assess(capture)).components[.size] == 0)
        // 400 × 500 = 200 000 px²: 20 %.
        capture.faceBox = FaceBox(x: 0, y: 0, width: 400, height: 500)
        #expect(try #require(CaptureQuality.assess(capture)).components[.size] == 1)
        // An image whose Int area would overflow still works: the area is computed in Double.
        capture.imageWidth = 1 << 40
        capture.imageHeight = 1 << 40
        #expect(try #require(CaptureQuality.assess(capture)).components[.size] == 0)
    }

    @Test func angleFallsFromFrontalToFortyFiveDegreesOnEachAxis() {
        let cases: [(degrees: Float, expected: Float)] = [
            (0, 1), (11.25, 0.75), (22.5, 0.5), (45, 0), (60, 0), (-22.5, 0.5), (-45, 0), (-60, 0),
        ]
        for (degrees, expected) in cases {
            #expect(CaptureQuality.normalisedAngle(yaw: degrees, pitch: 0, roll: 0) == expected, "yaw \(degrees)")
            #expect(CaptureQuality.normalisedAngle(yaw: 0, pitch: degrees, roll: 0) == expected, "pitch \(degrees)")
            #expect(CaptureQuality.normalisedAngle(yaw: 0, pitch: 0, roll: degrees) == expected, "roll \(degrees)")
        }
    }

    @Test func angleIsSetByTheLargestDeviation() {
        #expect(CaptureQuality.normalisedAngle(yaw: 11.25, pitch: -22.5, roll: 5) == 0.5)
        #expect(CaptureQuality.normalisedAngle(yaw: 22.5, pitch: 22.5, roll: 22.5) == 0.5)
        #expect(CaptureQuality.normalisedAngle(yaw: 10, pitch: 5, roll: -45) == 0)
    }

    @Test func resolutionRisesFromThirtyTwoToOneHundredSixtyPixels() {
        #expect(CaptureQuality.normalisedResolution(facePixelSize: 0) == 0)
        #expect(CaptureQuality.normalisedResolution(facePixelSize: 16) == 0)
        #expect(CaptureQuality.normalisedResolution(facePixelSize: 32) == 0)
        #expect(CaptureQuality.normalisedResolution(facePixelSize: 64) == 0.25)
        #expect(CaptureQuality.normalisedResolution(facePixelSize: 96) == 0.5)
        #expect(CaptureQuality.normalisedResolution(facePixelSize: 160) == 1)
        #expect(CaptureQuality.normalisedResolution(facePixelSize: 400) == 1)
    }

    @Test func resolutionUsesTheFacePixelSizeElseTheShorterSideOfTheBox() throws {
        var capture = Self.perfect()
        capture.faceBox = FaceBox(x: 0, y: 0, width: 96, height: 400)
        #expect(try #require(CaptureQuality.assess(capture)).components[.resolution] == 0.5)
        capture.faceBox = FaceBox(x: 0, y: 0, width: 400, height: 96)
        #expect(try #require(CaptureQuality.assess(capture)).components[.resolution] == 0.5)
        capture.facePixelSize = 32
        #expect(try #require(CaptureQuality.assess(capture)).components[.resolution] == 0)
        capture.facePixelSize = 160
        #expect(try #require(CaptureQuality.assess(capture)).components[.resolution] == 1)
        // A non-finite pixel size counts as missing: the box stands in.
        capture.facePixelSize = .nan
        #expect(try #require(CaptureQuality.assess(capture)).components[.resolution] == 0.5)
        capture.facePixelSize = .infinity
        #expect(try #require(CaptureQuality.assess(capture)).components[.resolution] == 0.5)
    }

    @Test func sharpnessRisesFromTwentyToThreeHundred() {
        #expect(CaptureQuality.normalisedSharpness(laplacianVariance: 0) == 0)
        #expect(CaptureQuality.normalisedSharpness(laplacianVariance: 20) == 0)
        #expect(CaptureQuality.normalisedSharpness(laplacianVariance: 90) == 0.25)
        #expect(CaptureQuality.normalisedSharpness(laplacianVariance: 160) == 0.5)
        #expect(CaptureQuality.normalisedSharpness(laplacianVariance: 300) == 1)
        #expect(CaptureQuality.normalisedSharpness(laplacianVariance: 5_000) == 1)
    }

    @Test func lightingIsFullBetweenNinetyAndOneSeventyAndFallsToThirtyAndTwoThirty() {
        let cases: [(mean: Float, expected: Float)] = [
            (0, 0), (30, 0), (45, 0.25), (60, 0.5), (90, 1), (128, 1), (170, 1), (200, 0.5), (215, 0.25),
            (230, 0), (255, 0),
        ]
        for (mean, expected) in cases {
            #expect(CaptureQuality.normalisedLighting(brightnessMean: mean) == expected, "mean \(mean)")
        }
    }

    @Test func lightingIsScaledByContrastUpToAStandardDeviationOfThirty() {
        #expect(CaptureQuality.normalisedLighting(brightnessMean: 128, brightnessStdDev: 0) == 0)
        #expect(CaptureQuality.normalisedLighting(brightnessMean: 128, brightnessStdDev: 7.5) == 0.25)
        #expect(CaptureQuality.normalisedLighting(brightnessMean: 128, brightnessStdDev: 15) == 0.5)
        #expect(CaptureQuality.normalisedLighting(brightnessMean: 128, brightnessStdDev: 30) == 1)
        #expect(CaptureQuality.normalisedLighting(brightnessMean: 128, brightnessStdDev: 80) == 1)
        // The factor multiplies the brightness score.
        #expect(CaptureQuality.normalisedLighting(brightnessMean: 60, brightnessStdDev: 15) == 0.25)
        #expect(CaptureQuality.normalisedLighting(brightnessMean: 200, brightnessStdDev: 30) == 0.5)
        #expect(CaptureQuality.normalisedLighting(brightnessMean: 30, brightnessStdDev: 60) == 0)
    }

    @Test func lightingInAnAssessmentNeedsTheMeanAndUsesTheStandardDeviationWhenGiven() throws {
        var capture = Self.perfectCore()
        #expect(try #require(CaptureQuality.assess(capture)).components[.lighting] == nil)
        // The standard deviation alone does not make a lighting component.
        capture.brightnessStdDev = 15
        #expect(try #require(CaptureQuality.assess(capture)).components[.lighting] == nil)
        capture.brightnessMean = 128
        #expect(try #require(CaptureQuality.assess(capture)).components[.lighting] == 0.5)
        capture.brightnessStdDev = nil
        #expect(try #require(CaptureQuality.assess(capture)).components[.lighting] == 1)
        capture.brightnessMean = 200
        #expect(try #require(CaptureQuality.assess(capture)).components[.lighting] == 0.5)
    }

    // MARK: Weights and score

    @Test func theWeightsAreThoseOfTheSeed() {
        #expect(QualityComponent.allCases == [.confidence, .size, .angle, .resolution, .sharpness, .lighting])
        #expect(QualityComponent.allCases.map(\.weight) == [0.30, 0.25, 0.20, 0.15, 0.05, 0.05])
        #expect(QualityComponent.allCases.filter(\.isOptional) == [.sharpness, .lighting])
    }

    @Test func aPerfectCaptureScoresOne() throws {
        let assessment = try #require(CaptureQuality.assess(Self.perfect()))
        #expect(assessment.score == 1)
        #expect(assessment.rating == .excellent)
        #expect(
            assessment.components == [.confidence: 1, .size: 1, .angle: 1, .resolution: 1, .sharpness: 1, .lighting: 1])
    }

    @Test func eachComponentAtZeroCostsItsWeight() throws {
        let zeroed: [(component: QualityComponent, zero: (inout CaptureMetadata) -> Void, expected: Float)] = [
            (.confidence, { $0.detectorConfidence = 0 }, 0.70),
            // 200 × 200 in 2 000 × 2 000: 1 %; the face is still 200 px.
            (
                .size,
                {
                    $0.imageWidth = 2_000
                    $0.imageHeight = 2_000
                }, 0.75
            ),
            (.angle, { $0.yaw = 45 }, 0.80),
            (.resolution, { $0.facePixelSize = 32 }, 0.85),
            (.sharpness, { $0.sharpness = 20 }, 0.95),
            (.lighting, { $0.brightnessMean = 30 }, 0.95),
        ]
        for (component, zero, expected) in zeroed {
            var capture = Self.perfect()
            zero(&capture)
            let assessment = try #require(CaptureQuality.assess(capture))
            #expect(assessment.components[component] == 0, "\(component)")
            #expect(assessment.components.filter { $0.key != component }.values.allSatisfy { $0 == 1 }, "\(component)")
            #expect(assessment.score == expected, "\(component)")
            #expect(assessment.score == 1 - component.weight, "\(component)")
            #expect(assessment.weakest == component, "\(component)")
        }
    }

    @Test func weightsAreRenormalisedOverThePresentComponents() throws {
        // Core only: the weights sum to 0.90.
        var capture = Self.perfectCore()
        #expect(try #require(CaptureQuality.assess(capture)).score == 1)
        #expect(try #require(CaptureQuality.assess(capture)).components.count == 4)
        capture.detectorConfidence = 0
        #expect(try #require(CaptureQuality.assess(capture)).score == Float(0.60 / 0.90))
        capture.detectorConfidence = 1
        capture.facePixelSize = 32
        #expect(try #require(CaptureQuality.assess(capture)).score == Float(0.75 / 0.90))
        // Core and sharpness: the weights sum to 0.95 (without renormalisation this would be 0.90).
        capture.facePixelSize = nil
        capture.sharpness = 20
        #expect(try #require(CaptureQuality.assess(capture)).components.count == 5)
        #expect(try #require(CaptureQuality.assess(capture)).score == Float(0.90 / 0.95))
        // Core and lighting: the weights sum to 0.95.
        capture.sharpness = nil
        capture.brightnessMean = 30
        #expect(try #require(CaptureQuality.assess(capture)).components.count == 5)
        #expect(try #require(CaptureQuality.assess(capture)).score == Float(0.90 / 0.95))
        // Both optional components present at 0: nothing to renormalise, 1 − 0.05 − 0.05.
        capture.sharpness = 20
        #expect(try #require(CaptureQuality.assess(capture)).score == 0.90)
        // The score function itself: one component is its own score.
        #expect(CaptureQuality.score([.sharpness: 0.25]) == 0.25)
        #expect(CaptureQuality.score([:]) == 0)
    }

    @Test func aCaptureAtEveryMidpointScoresAHalf() throws {
        let capture = CaptureMetadata(
            detectorConfidence: 0.5, faceBox: FaceBox(x: 0, y: 0, width: 200, height: 550), imageWidth: 1_000,
            imageHeight: 1_000, yaw: 0, pitch: -22.5, roll: 10, facePixelSize: 96, sharpness: 160, brightnessMean: 60,
            brightnessStdDev: 30)
        let assessment = try #require(CaptureQuality.assess(capture))
        #expect(
            assessment.components == [
                .confidence: 0.5, .size: 0.5, .angle: 0.5, .resolution: 0.5, .sharpness: 0.5, .lighting: 0.5,
            ])
        #expect(assessment.score == 0.5)
        #expect(assessment.rating == .fair)
        // All tied: the heaviest component is the weakest.
        #expect(assessment.weakest == .confidence)
    }

    @Test func aMixedCaptureScoresTheWeightedMean() throws {
        // confidence 0.9, size 0.5, angle 0.75, resolution 0.25, no optional components:
        // (0.30 × 0.9 + 0.25 × 0.5 + 0.20 × 0.75 + 0.15 × 0.25) / 0.90 = 0.5825 / 0.90.
        let capture = CaptureMetadata(
            detectorConfidence: 0.9, faceBox: FaceBox(x: 0, y: 0, width: 200, height: 550), imageWidth: 1_000,
            imageHeight: 1_000, yaw: 11.25, pitch: 0, roll: 0, facePixelSize: 64)
        let assessment = try #require(CaptureQuality.assess(capture))
        #expect(assessment.components == [.confidence: 0.9, .size: 0.5, .angle: 0.75, .resolution: 0.25])
        #expect(assessment.score == Float(0.5825 / 0.90))
        #expect(assessment.rating == .good)
        #expect(assessment.weakest == .resolution)
    }

    // MARK: Rating

    @Test func ratingBandsTakeTheHigherBandOnTheirEdges() {
        #expect(QualityRating(score: 1) == .excellent)
        #expect(QualityRating(score: 0.8) == .excellent)
        #expect(QualityRating(score: 0.79999) == .good)
        #expect(QualityRating(score: 0.6) == .good)
        #expect(QualityRating(score: 0.59999) == .fair)
        #expect(QualityRating(score: 0.4) == .fair)
        #expect(QualityRating(score: 0.39999) == .poor)
        #expect(QualityRating(score: 0) == .poor)
        #expect(QualityRating(score: .nan) == .poor)
    }

    @Test func anAssessmentCarriesTheRatingOfItsScore() throws {
        // Confidence 0 and size 0 with the optional components present: 1 − 0.30 − 0.25 = 0.45.
        var capture = Self.perfect()
        capture.detectorConfidence = 0
        capture.imageWidth = 2_000
        capture.imageHeight = 2_000
        let assessment = try #require(CaptureQuality.assess(capture))
        #expect(assessment.score == 0.45)
        #expect(assessment.rating == .fair)
        capture.yaw = 45  // − 0.20 = 0.25
        #expect(try #require(CaptureQuality.assess(capture)).score == 0.25)
        #expect(try #require(CaptureQuality.assess(capture)).rating == .poor)
    }

    // MARK: Weakest component

    @Test func theWeakestComponentIsTheLowestWithTiesToTheLargerWeight() throws {
        var capture = Self.perfect()
        capture.sharpness = 90  // 0.25
        capture.facePixelSize = 96  // 0.5
        #expect(try #require(CaptureQuality.assess(capture)).weakest == .sharpness)
        // Angle ties with sharpness at 0.25: angle weighs more.
        capture.yaw = 33.75
        #expect(try #require(CaptureQuality.assess(capture)).components[.angle] == 0.25)
        #expect(try #require(CaptureQuality.assess(capture)).weakest == .angle)
        // Confidence joins the tie and weighs most.
        capture.detectorConfidence = 0.25
        #expect(try #require(CaptureQuality.assess(capture)).weakest == .confidence)
        // Sharpness and lighting weigh the same: the first declared is named.
        capture = Self.perfect()
        capture.sharpness = 20
        capture.brightnessMean = 30
        #expect(try #require(CaptureQuality.assess(capture)).weakest == .sharpness)
        // Ties are resolved on weight, not on order: resolution ties with lighting and wins.
        capture = Self.perfect()
        capture.brightnessMean = 60
        capture.facePixelSize = 96
        #expect(try #require(CaptureQuality.assess(capture)).weakest == .resolution)
    }

    // MARK: Missing and non-finite inputs

    @Test func aCaptureWithoutMetadataMissesEveryCoreInput() {
        let capture = CaptureMetadata()
        #expect(CaptureQuality.assess(capture) == nil)
        #expect(
            CaptureQuality.missingInputs(capture) == [
                "detectorConfidence", "faceBox", "imageWidth", "imageHeight", "yaw", "pitch", "roll",
            ])
    }

    @Test func eachMissingCoreInputMakesTheAssessmentNilAndIsNamed() {
        #expect(CaptureQuality.missingInputs(Self.perfect()).isEmpty)
        let removals: [(name: String, remove: (inout CaptureMetadata) -> Void)] = [
            ("detectorConfidence", { $0.detectorConfidence = nil }),
            ("faceBox", { $0.faceBox = nil }),
            ("imageWidth", { $0.imageWidth = nil }),
            ("imageHeight", { $0.imageHeight = nil }),
            ("yaw", { $0.yaw = nil }),
            ("pitch", { $0.pitch = nil }),
            ("roll", { $0.roll = nil }),
        ]
        for (name, remove) in removals {
            var capture = Self.perfect()
            remove(&capture)
            #expect(CaptureQuality.assess(capture) == nil, "\(name)")
            #expect(CaptureQuality.missingInputs(capture) == [name])
        }
        // The face pixel size cannot replace the box: size needs the box.
        var capture = Self.perfect()
        capture.faceBox = nil
        capture.facePixelSize = 200
        #expect(CaptureQuality.assess(capture) == nil)
        #expect(CaptureQuality.missingInputs(capture) == ["faceBox"])
    }

    @Test func optionalInputsMayBeMissing() throws {
        let assessment = try #require(CaptureQuality.assess(Self.perfectCore()))
        #expect(Set(assessment.components.keys) == [.confidence, .size, .angle, .resolution])
        #expect(CaptureQuality.missingInputs(Self.perfectCore()).isEmpty)
    }

    @Test func nonFiniteCoreInputsCountAsMissing() {
        let corruptions: [(name: String, corrupt: (inout CaptureMetadata) -> Void)] = [
            ("detectorConfidence", { $0.detectorConfidence = .nan }),
            ("detectorConfidence", { $0.detectorConfidence = .infinity }),
            ("faceBox", { $0.faceBox?.width = .nan }),
            ("faceBox", { $0.faceBox?.height = .infinity }),
            ("faceBox", { $0.faceBox?.x = -.infinity }),
            ("faceBox", { $0.faceBox?.y = .nan }),
            ("faceBox", { $0.faceBox?.width = -10 }),
            ("imageWidth", { $0.imageWidth = 0 }),
            ("imageHeight", { $0.imageHeight = -400 }),
            ("yaw", { $0.yaw = .nan }),
            ("pitch", { $0.pitch = .infinity }),
            ("roll", { $0.roll = -.infinity }),
        ]
        for (name, corrupt) in corruptions {
            var capture = Self.perfect()
            corrupt(&capture)
            #expect(CaptureQuality.assess(capture) == nil, "\(name)")
            #expect(CaptureQuality.missingInputs(capture) == [name])
        }
        var capture = Self.perfect()
        capture.detectorConfidence = .nan
        capture.imageWidth = 0
        capture.roll = .infinity
        #expect(CaptureQuality.missingInputs(capture) == ["detectorConfidence", "imageWidth", "roll"])
    }

    @Test func nonFiniteOptionalInputsAreLeftOut() throws {
        var capture = Self.perfect()
        capture.sharpness = .nan
        capture.brightnessMean = .infinity
        var assessment = try #require(CaptureQuality.assess(capture))
        #expect(Set(assessment.components.keys) == [.confidence, .size, .angle, .resolution])
        #expect(assessment.score == 1)
        // A non-finite standard deviation drops only the contrast factor.
        capture.brightnessMean = 60
        capture.brightnessStdDev = -.infinity
        assessment = try #require(CaptureQuality.assess(capture))
        #expect(assessment.components[.lighting] == 0.5)
    }

    @Test func aZeroSizedBoxIsPresentAndScoresZero() throws {
        var capture = Self.perfect()
        capture.faceBox = FaceBox(x: 10, y: 10, width: 0, height: 0)
        let assessment = try #require(CaptureQuality.assess(capture))
        #expect(assessment.components[.size] == 0)
        #expect(assessment.components[.resolution] == 0)
        #expect(assessment.score == 0.60)  // 1 − 0.25 − 0.15
    }
}
