// What registryctl's `--json` printed for JSONGoldenTests' results before its JSON mirror types
// were replaced by the model types' Encodable conformances (written by the test with
// REGISTRYCTL_GOLDEN_DUMP=DIRECTORY from the earlier code), byte for byte. `register`'s fixture then
// carried template data, which the old mirror printed and the model's encoding does not; a
// registration never carries any, and the document is the old one without those two keys.

extension JSONGoldenTests {
    static let golden: [String: String] = [
        "algorithms": #"""
        {
          "algorithms" : [
            {
              "defaultThreshold" : 0.6,
              "dimension" : 128,
              "kind" : "vector",
              "name" : "arcface",
              "scoreFunction" : "cosine",
              "version" : 24
            },
            {
              "defaultThreshold" : 0.6,
              "dimension" : 512,
              "kind" : "vector",
              "name" : "r300",
              "scoreFunction" : "dot",
              "version" : 300
            },
            {
              "defaultThreshold" : 0.8,
              "dimension" : 128,
              "kind" : "vector",
              "name" : "dlib",
              "scoreFunction" : "half-cosine",
              "version" : 16
            },
            {
              "defaultThreshold" : 0.65,
              "kind" : "landmarks",
              "name" : "landmarks",
              "scoreFunction" : "coma",
              "version" : 1000
            },
            {
              "defaultThreshold" : 0.65,
              "kind" : "landmarks",
              "name" : "landmarks-aligned",
              "scoreFunction" : "aligned",
              "version" : 1001
            }
          ]
        }
        """#,
        "audit": #"""
        {
          "entries" : [
            {
              "gallery" : "default",
              "identifiers" : [
                "alice"
              ],
              "operation" : "authenticate",
              "outcome" : "match",
              "pid" : 42,
              "score" : 0.94,
              "time" : "2023-11-14T22:13:20.000001Z",
              "uid" : 1000
            },
            {
              "errorCode" : "SIMILAR_FACE_REGISTERED",
              "gallery" : "door",
              "identifiers" : [
                "bob"
              ],
              "operation" : "register",
              "outcome" : "refused",
              "pid" : 7,
              "time" : "2023-11-14T22:13:21.000000Z",
              "uid" : 0
            }
          ]
        }
        """#,
        "authenticate": #"""
        {
          "algorithm" : 24,
          "authenticated" : true,
          "autoEnrolment" : [
            {
              "algorithm" : 300,
              "status" : "enrolled",
              "templateId" : 19
            },
            {
              "algorithm" : 16,
              "status" : "already_registered"
            }
          ],
          "gallery" : "default",
          "identifier" : "alice",
          "score" : 0.94,
          "templateId" : 7
        }
        """#,
        "error-input": #"""
        {
          "error" : {
            "code" : "BAD_INPUT",
            "exitStatus" : 65,
            "file" : "a.json",
            "message" : "a.json: is empty"
          }
        }
        """#,
        "error-liveness": #"""
        {
          "error" : {
            "code" : "LIVENESS_FAILED",
            "exitStatus" : 3,
            "liveness" : {
              "checks" : [
                {
                  "check" : "realisticDepth",
                  "condition" : "mean 0.45 m in 0.2...3.0 m",
                  "mandatory" : true,
                  "passed" : true,
                  "threshold" : "0.2...3.0 m",
                  "value" : 0.45
                },
                {
                  "check" : "centerVariation",
                  "condition" : "centerStdDev 0.0013 m < 0.005 m",
                  "mandatory" : true,
                  "passed" : false,
                  "threshold" : "≥ 0.005 m",
                  "value" : 0.0013
                },
                {
                  "check" : "temporalConsistency",
                  "condition" : "1 frame ≥ 500 ms apart, 2 required",
                  "mandatory" : false,
                  "passed" : false,
                  "threshold" : "largestMeanChange ≤ 0.05 m"
                }
              ],
              "failed" : [
                "centerVariation",
                "temporalConsistency"
              ],
              "live" : false,
              "reason" : "mandatory check failed: centerVariation",
              "thresholds" : "fixed_fallback",
              "validSamples" : 100
            },
            "message" : "the face did not pass the liveness check"
          }
        }
        """#,
        "error-quality": #"""
        {
          "error" : {
            "code" : "QUALITY_TOO_LOW",
            "exitStatus" : 3,
            "message" : "capture quality 0.9811 is below 0.99",
            "quality" : {
              "algorithm" : 24,
              "assessment" : {
                "components" : {
                  "angle" : 0.9333,
                  "confidence" : 0.98,
                  "size" : 1
                },
                "rating" : "excellent",
                "score" : 0.9811,
                "weakest" : "angle"
              },
              "minimum" : 0.99,
              "missing" : [

              ]
            }
          }
        }{
          "error" : {
            "code" : "QUALITY_TOO_LOW",
            "exitStatus" : 3,
            "message" : "missing capture inputs",
            "quality" : {
              "algorithm" : 24,
              "minimum" : 0.6,
              "missing" : [
                "imageWidth",
                "yaw"
              ]
            }
          }
        }
        """#,
        "error-registration": #"""
        {
          "error" : {
            "code" : "SIMILAR_FACE_REGISTERED",
            "decisive" : {
              "algorithm" : 24,
              "identifier" : "bob",
              "kind" : "similar_face",
              "score" : 0.8312
            },
            "exitStatus" : 3,
            "findings" : [
              {
                "algorithm" : 24,
                "identifier" : "bob",
                "kind" : "similar_face",
                "score" : 0.8312
              },
              {
                "algorithm" : 16,
                "bestScore" : 0.41,
                "kind" : "face_mismatch"
              }
            ],
            "message" : "a similar face is registered as 'bob'"
          }
        }
        """#,
        "error-templates": #"""
        {
          "error" : {
            "code" : "INVALID_TEMPLATE",
            "exitStatus" : 3,
            "message" : "invalid template: template has 128 values, the algorithm expects 512",
            "templateProblem" : {
              "actual" : 128,
              "algorithm" : 24,
              "expected" : 512,
              "kind" : "wrong_dimension"
            }
          }
        }
        {
          "error" : {
            "code" : "INVALID_TEMPLATE",
            "exitStatus" : 3,
            "message" : "invalid template: template value at index 3 is NaN or infinite",
            "templateProblem" : {
              "algorithm" : 24,
              "index" : 3,
              "kind" : "non_finite_value"
            }
          }
        }
        {
          "error" : {
            "code" : "INVALID_TEMPLATE",
            "exitStatus" : 3,
            "message" : "invalid template: template is an all-zero vector",
            "templateProblem" : {
              "algorithm" : 24,
              "kind" : "zero_vector"
            }
          }
        }
        {
          "error" : {
            "code" : "INVALID_TEMPLATE",
            "exitStatus" : 3,
            "message" : "invalid template: template is not L2-normalised (norm 1.5, expected 1 ± 0.01)",
            "templateProblem" : {
              "algorithm" : 24,
              "kind" : "not_normalised",
              "norm" : 1.5
            }
          }
        }
        {
          "error" : {
            "code" : "INVALID_TEMPLATE",
            "exitStatus" : 3,
            "message" : "invalid template: template has 3 landmarks, at least 5 are required",
            "templateProblem" : {
              "actual" : 3,
              "algorithm" : 24,
              "expected" : 5,
              "kind" : "too_few_landmarks"
            }
          }
        }
        {
          "error" : {
            "code" : "INVALID_TEMPLATE",
            "exitStatus" : 3,
            "message" : "invalid template: unknown landmark name 'EAR'",
            "templateProblem" : {
              "algorithm" : 24,
              "kind" : "unknown_landmark",
              "landmark" : "EAR"
            }
          }
        }
        {
          "error" : {
            "code" : "INVALID_TEMPLATE",
            "exitStatus" : 3,
            "message" : "invalid template: landmark 'CHIN' appears more than once",
            "templateProblem" : {
              "algorithm" : 24,
              "kind" : "duplicate_landmark",
              "landmark" : "CHIN"
            }
          }
        }
        {
          "error" : {
            "code" : "INVALID_TEMPLATE",
            "exitStatus" : 3,
            "message" : "invalid template: template kind does not match the algorithm, which expects landmarks",
            "templateProblem" : {
              "algorithm" : 24,
              "kind" : "wrong_kind"
            }
          }
        }
        """#,
        "galleries": #"""
        {
          "galleries" : [
            {
              "identifiers" : 2,
              "liveness" : {
                "authenticate" : true,
                "identify" : false,
                "register" : true,
                "strict" : true
              },
              "livenessK" : 2.5,
              "name" : "door",
              "registries" : [
                {
                  "algorithm" : {
                    "defaultThreshold" : 0.6,
                    "dimension" : 128,
                    "kind" : "vector",
                    "name" : "arcface",
                    "scoreFunction" : "cosine",
                    "version" : 24
                  },
                  "identifiers" : 2,
                  "minimumAutoEnrolmentQuality" : 0.7,
                  "minimumQuality" : 0.6,
                  "templates" : 3,
                  "thresholds" : {
                    "authentication" : 0.6,
                    "autoEnrolment" : 0.7,
                    "identification" : 0.65
                  }
                },
                {
                  "algorithm" : {
                    "defaultThreshold" : 0.65,
                    "kind" : "landmarks",
                    "name" : "landmarks",
                    "scoreFunction" : "coma",
                    "version" : 1000
                  },
                  "identifiers" : 0,
                  "templates" : 0,
                  "thresholds" : {
                    "authentication" : 0.65,
                    "autoEnrolment" : 0.65,
                    "identification" : 0.65
                  }
                }
              ]
            }
          ]
        }
        """#,
        "gallery-define": #"""
        {
          "gallery" : {
            "identifiers" : 2,
            "liveness" : {
              "authenticate" : true,
              "identify" : false,
              "register" : true,
              "strict" : true
            },
            "livenessK" : 2.5,
            "name" : "door",
            "registries" : [
              {
                "algorithm" : {
                  "defaultThreshold" : 0.6,
                  "dimension" : 128,
                  "kind" : "vector",
                  "name" : "arcface",
                  "scoreFunction" : "cosine",
                  "version" : 24
                },
                "identifiers" : 2,
                "minimumAutoEnrolmentQuality" : 0.7,
                "minimumQuality" : 0.6,
                "templates" : 3,
                "thresholds" : {
                  "authentication" : 0.6,
                  "autoEnrolment" : 0.7,
                  "identification" : 0.65
                }
              },
              {
                "algorithm" : {
                  "defaultThreshold" : 0.65,
                  "kind" : "landmarks",
                  "name" : "landmarks",
                  "scoreFunction" : "coma",
                  "version" : 1000
                },
                "identifiers" : 0,
                "templates" : 0,
                "thresholds" : {
                  "authentication" : 0.65,
                  "autoEnrolment" : 0.65,
                  "identification" : 0.65
                }
              }
            ]
          }
        }
        """#,
        "identify": #"""
        {
          "algorithm" : 24,
          "autoEnrolment" : [
            {
              "algorithm" : 300,
              "status" : "enrolled",
              "templateId" : 19
            },
            {
              "algorithm" : 16,
              "status" : "already_registered"
            },
            {
              "algorithm" : 1000,
              "status" : "no_template"
            },
            {
              "algorithm" : 1001,
              "score" : 0.61,
              "status" : "score_below_threshold",
              "threshold" : 0.7
            },
            {
              "algorithm" : 5000,
              "finding" : {
                "algorithm" : 24,
                "identifier" : "bob",
                "kind" : "similar_face",
                "score" : 0.8312
              },
              "status" : "refused"
            },
            {
              "algorithm" : 5001,
              "score" : 0.3,
              "status" : "quality_too_low",
              "threshold" : 0.6
            },
            {
              "algorithm" : 5002,
              "status" : "quality_too_low",
              "threshold" : 0.6
            },
            {
              "algorithm" : 5003,
              "status" : "liveness_required"
            },
            {
              "algorithm" : 5004,
              "message" : "the store is full",
              "status" : "failed"
            }
          ],
          "gallery" : "default",
          "liveness" : {
            "checks" : [
              {
                "check" : "realisticDepth",
                "condition" : "mean 0.45 m in 0.2...3.0 m",
                "mandatory" : true,
                "passed" : true,
                "threshold" : "0.2...3.0 m",
                "value" : 0.45
              },
              {
                "check" : "centerVariation",
                "condition" : "centerStdDev 0.0013 m < 0.005 m",
                "mandatory" : true,
                "passed" : false,
                "threshold" : "≥ 0.005 m",
                "value" : 0.0013
              },
              {
                "check" : "temporalConsistency",
                "condition" : "1 frame ≥ 500 ms apart, 2 required",
                "mandatory" : false,
                "passed" : false,
                "threshold" : "largestMeanChange ≤ 0.05 m"
              }
            ],
            "failed" : [
              "centerVariation",
              "temporalConsistency"
            ],
            "live" : false,
            "reason" : "mandatory check failed: centerVariation",
            "thresholds" : "fixed_fallback",
            "validSamples" : 100
          },
          "matches" : [
            {
              "algorithm" : 24,
              "identifier" : "alice",
              "score" : 0.94,
              "templateId" : 7
            }
          ]
        }
        """#,
        "profile": #"""
        {
          "gallery" : "door",
          "identifier" : "alice",
          "profile" : {
            "frames" : 35,
            "k" : 2,
            "ranges" : {
              "centerStdDev" : {
                "lower" : 0.006,
                "upper" : 0.009
              },
              "edgeStdDev" : {
                "lower" : 0.003,
                "upper" : 0.004
              },
              "gradientMean" : {
                "lower" : 0.001,
                "upper" : 0.002
              },
              "gradientStdDev" : {
                "lower" : 0.0005,
                "upper" : 0.0015
              },
              "mean" : {
                "lower" : 0.4,
                "upper" : 0.5
              },
              "range" : {
                "lower" : 0.05,
                "upper" : 0.08
              },
              "stdDev" : {
                "lower" : 0.01,
                "upper" : 0.02
              }
            },
            "realisticDepth" : {
              "lower" : 0.3,
              "upper" : 0.7
            }
          }
        }
        """#,
        "register": #"""
        {
          "findings" : [
            {
              "algorithm" : 24,
              "identifier" : "bob",
              "kind" : "similar_face",
              "score" : 0.8312
            },
            {
              "algorithm" : 16,
              "bestScore" : 0.41,
              "kind" : "face_mismatch"
            }
          ],
          "gallery" : "door",
          "identifier" : "alice",
          "liveness" : {
            "checks" : [
              {
                "check" : "realisticDepth",
                "condition" : "mean 0.45 m in 0.2...3.0 m",
                "mandatory" : true,
                "passed" : true,
                "threshold" : "0.2...3.0 m",
                "value" : 0.45
              },
              {
                "check" : "centerVariation",
                "condition" : "centerStdDev 0.0013 m < 0.005 m",
                "mandatory" : true,
                "passed" : false,
                "threshold" : "≥ 0.005 m",
                "value" : 0.0013
              },
              {
                "check" : "temporalConsistency",
                "condition" : "1 frame ≥ 500 ms apart, 2 required",
                "mandatory" : false,
                "passed" : false,
                "threshold" : "largestMeanChange ≤ 0.05 m"
              }
            ],
            "failed" : [
              "centerVariation",
              "temporalConsistency"
            ],
            "live" : false,
            "reason" : "mandatory check failed: centerVariation",
            "thresholds" : "fixed_fallback",
            "validSamples" : 100
          },
          "quality" : {
            "components" : {
              "angle" : 0.9333,
              "confidence" : 0.98,
              "size" : 1
            },
            "rating" : "excellent",
            "score" : 0.9811,
            "weakest" : "angle"
          },
          "stored" : [
            {
              "algorithm" : 24,
              "id" : 7,
              "identifier" : "alice",
              "quality" : 0.9811,
              "registeredAt" : "2023-11-14T22:13:20.123456Z",
              "registeredAtMicros" : 1700000000123456,
              "source" : "registered"
            },
            {
              "algorithm" : 1000,
              "id" : 8,
              "identifier" : "alice",
              "landmarkQuality" : 0.75,
              "registeredAt" : "1969-12-31T23:59:59.999999Z",
              "registeredAtMicros" : -1,
              "source" : "auto_enrolled"
            }
          ]
        }
        """#,
        "show": #"""
        {
          "gallery" : "default",
          "identifier" : "alice",
          "templates" : [
            {
              "algorithm" : 24,
              "id" : 7,
              "identifier" : "alice",
              "quality" : 0.9811,
              "registeredAt" : "2023-11-14T22:13:20.123456Z",
              "registeredAtMicros" : 1700000000123456,
              "source" : "registered",
              "template" : {
                "data" : [
                  0.6,
                  -0.8,
                  1e-05
                ],
                "version" : 24
              }
            },
            {
              "algorithm" : 1000,
              "id" : 8,
              "identifier" : "alice",
              "landmarkQuality" : 0.75,
              "registeredAt" : "1969-12-31T23:59:59.999999Z",
              "registeredAtMicros" : -1,
              "source" : "auto_enrolled",
              "template" : {
                "landmarks" : [
                  {
                    "name" : "CHIN",
                    "x" : 0.5,
                    "y" : -1.25,
                    "z" : 0.003
                  },
                  {
                    "name" : "NOSE_TIP",
                    "x" : 0,
                    "y" : 1,
                    "z" : -0.125
                  }
                ],
                "version" : 1000
              }
            },
            {
              "algorithm" : 16,
              "id" : 9,
              "identifier" : "alice",
              "quality" : 0.5,
              "registeredAt" : "1970-01-01T00:00:00.000000Z",
              "registeredAtMicros" : 0,
              "source" : "imported"
            },
            {
              "algorithm" : 5000,
              "id" : 10,
              "identifier" : "alice",
              "registeredAt" : "1970-01-02T00:00:00.000000Z",
              "registeredAtMicros" : 86400000000,
              "source" : "forced"
            }
          ]
        }
        """#,
    ]
}
