"""The parts of the client that need no daemon: faces and templates, request building, and turning
received errors into exceptions."""

from __future__ import annotations

import pickle
import random
import unittest

from harness import random_values, renderings, scaled

from registryd_client import (
    RETRYABLE_CODES,
    Face,
    FaceMismatch,
    Finding,
    FleetUnavailable,
    InternalError,
    InvalidTemplate,
    Landmark,
    RegistryError,
    SimilarFaceRegistered,
    Template,
    TemplateProblem,
    normalised,
    operations as ops,
    registry_pb2 as pb,
)
from registryd_client._protocol import as_request as _as_request


class FaceTests(unittest.TestCase):
    def test_a_vector_face_becomes_a_proto_face(self) -> None:
        values = random_values(random.Random(1))
        face = Face.vector(algorithm=24, values=values).to_proto()
        self.assertEqual(len(face.templates), 1)
        self.assertEqual(face.templates[0].algorithm, 24)
        self.assertEqual(len(face.templates[0].vector), 128)
        self.assertAlmostEqual(face.templates[0].vector[5], values[5], places=6)

    def test_a_landmark_face_and_a_face_with_several_templates(self) -> None:
        landmarks = [("NOSE_TIP", 1, 2, 3), Landmark("LEFT_EYE", 4.5, 5.5, 6.5)]
        face = Face(Template.from_vector(24, [0.5] * 128), Template.from_landmarks(1000, landmarks))
        proto = face.to_proto()
        self.assertEqual([t.algorithm for t in proto.templates], [24, 1000])
        self.assertEqual(
            [(lm.name, lm.x, lm.y, lm.z) for lm in proto.templates[1].landmarks],
            [("NOSE_TIP", 1.0, 2.0, 3.0), ("LEFT_EYE", 4.5, 5.5, 6.5)],
        )
        self.assertEqual(
            face, Face.vector(24, [0.5] * 128).with_template(Template.from_landmarks(1000, landmarks))
        )
        capture = pb.CaptureMetadata(detector_confidence=0.9)
        with_capture = Face.vector(24, [0.5] * 128, capture=capture).to_proto()
        self.assertAlmostEqual(with_capture.capture.detector_confidence, 0.9, places=6)

    def test_reprs_and_conversion_errors_hold_no_values(self) -> None:
        values = scaled(random_values(random.Random(2)))
        face = Face(
            Template.from_vector(24, values),
            Template.from_landmarks(1000, [("NOSE_TIP", 0.3141, 0.2718, 0.1618)]),
        )
        self.assertEqual(
            repr(face), "Face(Template(algorithm=24, 128 values), Template(algorithm=1000, 1 landmarks))"
        )
        self.assertEqual(str(face), repr(face))
        for rendering in renderings(values) + ["0.3141", "0.2718", "0.1618"]:
            self.assertNotIn(rendering, repr(face))
        for bad in ["0.987654", "x0.987654", b"0.987654", None]:
            with self.assertRaises(TypeError) as caught:
                Template.from_vector(24, [0.25, bad])  # type: ignore[list-item]
            self.assertNotIn("0.987654", str(caught.exception))
            self.assertTrue(caught.exception.__suppress_context__)  # no chained error quoting the value

    def test_normalised(self) -> None:
        self.assertEqual(normalised([3.0, 4.0]), (0.6, 0.8))
        with self.assertRaises(ValueError):
            normalised([0.0, 0.0])


class RequestTests(unittest.TestCase):
    def test_operations_become_requests(self) -> None:
        request, name = _as_request(ops.list_galleries())
        self.assertEqual(name, "list_galleries")
        self.assertEqual(request.WhichOneof("operation"), "list_galleries")  # set although empty
        request, name = _as_request(ops.import_templates([("a", Template.from_vector(24, [1.0] * 128))]))
        self.assertEqual(name, "import")
        self.assertEqual(getattr(request, "import").items[0].identifier, "a")
        with self.assertRaises(ValueError):
            _as_request(pb.Request())
        with self.assertRaises(TypeError):
            _as_request(pb.Face())

    def test_messages_know_their_module_and_pickle(self) -> None:
        self.assertEqual(pb.IdentifyResult.__module__, "registryd_client.registry_pb2")
        result = pb.IdentifyResult(
            algorithm=24, matches=[pb.Match(identifier="a", score=0.75, template_id=1)]
        )
        self.assertEqual(pickle.loads(pickle.dumps(result)), result)

    def test_optional_booleans_are_sent_when_false(self) -> None:
        request = ops.identify(Face.vector(24, [1.0] * 128), safe=False, auto_enrol=False)
        self.assertTrue(request.HasField("safe") and request.HasField("auto_enrol"))
        self.assertFalse(request.safe or request.auto_enrol)

    def test_a_gallery_definition(self) -> None:
        request = ops.define_gallery(
            "g", [24, ops.registry_spec(300, thresholds=(0.7, 0.8, 0.9), minimum_quality=0.5)]
        )
        self.assertEqual([r.algorithm for r in request.registries], [24, 300])
        self.assertFalse(request.registries[0].HasField("thresholds"))
        self.assertAlmostEqual(request.registries[1].thresholds.identification, 0.8, places=6)
        self.assertTrue(request.registries[1].HasField("minimum_quality"))
        self.assertFalse(request.HasField("liveness_k"))


class ErrorTests(unittest.TestCase):
    def test_codes_map_to_classes_with_their_details(self) -> None:
        error = pb.Error(
            code=pb.ERROR_CODE_SIMILAR_FACE_REGISTERED,
            message="a similar face is registered as alice",
            decisive=pb.RegistrationFinding(
                algorithm=24, similar_face=pb.SimilarFace(identifier="alice", score=0.75)
            ),
            findings=[
                pb.RegistrationFinding(
                    algorithm=24, similar_face=pb.SimilarFace(identifier="alice", score=0.75)
                ),
                pb.RegistrationFinding(algorithm=16, face_mismatch=pb.FaceMismatch(best_score=0.5)),
            ],
        )
        raised = RegistryError.from_proto(error, request_id=7)
        self.assertIsInstance(raised, SimilarFaceRegistered)
        self.assertEqual(raised.decisive, Finding(24, "similar_face", 0.75, "alice"))
        self.assertEqual(raised.findings[1], Finding(16, "face_mismatch", 0.5))
        self.assertEqual(str(raised), "SIMILAR_FACE_REGISTERED: a similar face is registered as alice")
        self.assertEqual(
            repr(raised),
            "SimilarFaceRegistered(code_name='SIMILAR_FACE_REGISTERED', "
            "message='a similar face is registered as alice', request_id=7)",
        )
        self.assertIsInstance(
            RegistryError.from_proto(pb.Error(code=pb.ERROR_CODE_FACE_MISMATCH)), FaceMismatch
        )

    def test_template_problems(self) -> None:
        problem = pb.TemplateProblem(
            algorithm=24, kind=pb.TemplateProblem.KIND_WRONG_DIMENSION, expected=128, actual=3
        )
        raised = RegistryError.from_proto(
            pb.Error(code=pb.ERROR_CODE_INVALID_TEMPLATE, template_problem=problem)
        )
        self.assertIsInstance(raised, InvalidTemplate)
        self.assertEqual(
            raised.template_problem, TemplateProblem(24, "WRONG_DIMENSION", expected=128, actual=3)
        )

    def test_an_unknown_code_is_internal(self) -> None:
        raised = RegistryError.from_proto(pb.Error(code=99, message="new"))  # type: ignore[arg-type]
        self.assertIsInstance(raised, InternalError)
        self.assertEqual((raised.code, raised.code_name), (99, "UNKNOWN_99"))

    def test_every_code_has_its_class(self) -> None:
        # A code without a class would reach callers as InternalError, which it is not.
        for name, code in pb.ErrorCode.items():
            if code == pb.ERROR_CODE_UNSPECIFIED:
                continue
            raised = RegistryError.from_proto(pb.Error(code=code))  # type: ignore[arg-type]
            self.assertEqual(type(raised).CODE, code, name)
        self.assertIsInstance(
            RegistryError.from_proto(pb.Error(code=pb.ERROR_CODE_FLEET_UNAVAILABLE)), FleetUnavailable
        )

    def test_exactly_four_codes_are_retryable(self) -> None:
        retryable = {"SHUTTING_DOWN", "TOO_MANY_CONNECTIONS", "STORAGE_FULL", "FLEET_UNAVAILABLE"}
        for name, code in pb.ErrorCode.items():
            raised = RegistryError.from_proto(pb.Error(code=code, message="m"))  # type: ignore[arg-type]
            self.assertEqual(raised.retryable, raised.code_name in retryable, name)
        self.assertEqual(
            {pb.ErrorCode.Name(code)[len("ERROR_CODE_") :] for code in RETRYABLE_CODES}, retryable
        )
        self.assertFalse(RegistryError.from_proto(pb.Error(code=99)).retryable)  # type: ignore[arg-type]
        self.assertTrue(
            pickle.loads(
                pickle.dumps(RegistryError.from_proto(pb.Error(code=pb.ERROR_CODE_STORAGE_FULL)))
            ).retryable
        )

    def test_errors_survive_pickling(self) -> None:
        error = pb.Error(
            code=pb.ERROR_CODE_FACE_MISMATCH,
            message="m",
            decisive=pb.RegistrationFinding(algorithm=24, face_mismatch=pb.FaceMismatch(best_score=0.25)),
        )
        copy = pickle.loads(pickle.dumps(RegistryError.from_proto(error, request_id=3)))
        self.assertIsInstance(copy, FaceMismatch)
        self.assertEqual((copy.request_id, copy.decisive), (3, Finding(24, "face_mismatch", 0.25)))


if __name__ == "__main__":
    unittest.main()
