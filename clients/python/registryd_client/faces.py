"""Faces and templates to send: small immutable helpers around ``registry_pb2.Face``.

A *face* is the templates of one capture, at most one per algorithm (PROTOCOL.md §4), optionally
with the capture metadata and depth frames the quality and liveness gates read::

    Face.vector(algorithm=24, values=arcface_values)                  # one vector template
    Face.landmarks(algorithm=1000, landmarks=[("NOSE_TIP", x, y, z), ...])
    Face(Template.from_vector(24, arcface), Template.from_vector(300, r300))  # one capture, two models

Templates are biometric data: ``repr()`` and ``str()`` of these objects show algorithms and sizes,
never values. The daemon validates templates (dimension, finite values, landmark names); these
helpers only convert what they are given to numbers.
"""

from __future__ import annotations

import math
from typing import Iterable, NamedTuple, Optional, Sequence, Tuple, Union

from . import registry_pb2 as pb

__all__ = ["Landmark", "Template", "Face", "FaceLike", "to_face_proto", "to_template_proto", "normalised"]


class Landmark(NamedTuple):
    """One named 3-D landmark, by its exact (case-sensitive) name, e.g. ``"NOSE_TIP"``, with x, y, z as
    the detector reports them (e.g. pixels); the daemon normalises position and scale."""

    name: str
    x: float
    y: float
    z: float


LandmarkLike = Union[Landmark, Tuple[str, float, float, float]]


def _float(value: float) -> float:
    if isinstance(value, (str, bytes)):  # float("0.5") would pass: numbers only
        raise TypeError
    return float(value)


def _floats(values: Iterable[float], what: str) -> Tuple[float, ...]:
    try:
        return tuple(_float(value) for value in values)
    except (TypeError, ValueError):
        # `from None`: the original message could quote the offending value.
        raise TypeError(f"{what} must be real numbers") from None


def _landmark(value: LandmarkLike) -> Landmark:
    try:
        name, x, y, z = value
    except (TypeError, ValueError):
        raise TypeError("a landmark is (name, x, y, z)") from None
    if not isinstance(name, str):
        raise TypeError("a landmark's name must be a str")
    fx, fy, fz = _floats((x, y, z), "a landmark's coordinates")
    return Landmark(name, fx, fy, fz)


class Template:
    """One algorithm's template: a vector of floats or a list of named landmarks.

    Build one with :meth:`from_vector` or :meth:`from_landmarks`. Equal templates compare equal; the
    repr shows the algorithm and the size only.
    """

    __slots__ = ("_algorithm", "_vector", "_landmarks")

    def __init__(
        self, algorithm: int, vector: Iterable[float] = (), landmarks: Iterable[LandmarkLike] = ()
    ) -> None:
        if isinstance(algorithm, bool) or not isinstance(algorithm, int) or not 0 <= algorithm < 2**32:
            raise TypeError("algorithm must be an int version id (e.g. 24 arcface, 1000 landmarks)")
        self._algorithm = algorithm
        self._vector = _floats(vector, "template values")
        self._landmarks = tuple(_landmark(landmark) for landmark in landmarks)

    @classmethod
    def from_vector(cls, algorithm: int, values: Iterable[float]) -> Template:
        """A vector template (arcface 24 and dlib 16: 128 floats; r300: 512 floats with an L2 norm
        within 1 ± 0.01; configured algorithms: see ``list_algorithms``)."""
        return cls(algorithm, vector=values)

    @classmethod
    def from_landmarks(cls, algorithm: int, landmarks: Iterable[LandmarkLike]) -> Template:
        """A landmark template (landmarks 1000, landmarks-aligned 1001): at least 15 named landmarks,
        each once, as :class:`Landmark` or ``(name, x, y, z)`` tuples."""
        return cls(algorithm, landmarks=landmarks)

    @property
    def algorithm(self) -> int:
        return self._algorithm

    @property
    def vector(self) -> Tuple[float, ...]:
        return self._vector

    @property
    def landmarks(self) -> Tuple[Landmark, ...]:
        return self._landmarks

    def to_proto(self) -> pb.Template:
        return pb.Template(
            algorithm=self._algorithm,
            vector=self._vector,
            landmarks=[pb.Landmark(name=lm.name, x=lm.x, y=lm.y, z=lm.z) for lm in self._landmarks],
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Template):
            return NotImplemented
        return (self._algorithm, self._vector, self._landmarks) == (
            other._algorithm,
            other._vector,
            other._landmarks,
        )

    def __hash__(self) -> int:
        return hash((self._algorithm, self._vector, self._landmarks))

    def __repr__(self) -> str:
        parts = [f"algorithm={self._algorithm}"]
        if self._vector:
            parts.append(f"{len(self._vector)} values")
        if self._landmarks:
            parts.append(f"{len(self._landmarks)} landmarks")
        return f"Template({', '.join(parts)})"

    __str__ = __repr__


class Face:
    """The templates of one capture (at most one per algorithm), optionally with the detector's
    capture metadata (quality gate) and depth frames (liveness gate), as ``registry_pb2`` messages.
    """

    __slots__ = ("_templates", "_capture", "_depth_frames")

    def __init__(
        self,
        *templates: Template,
        capture: Optional[pb.CaptureMetadata] = None,
        depth_frames: Sequence[pb.DepthFrame] = (),
    ) -> None:
        for template in templates:
            if not isinstance(template, Template):
                raise TypeError("Face(...) takes Template objects (Template.from_vector / from_landmarks)")
        self._templates = tuple(templates)
        self._capture = capture
        self._depth_frames = tuple(depth_frames)

    @classmethod
    def vector(
        cls,
        algorithm: int,
        values: Iterable[float],
        *,
        capture: Optional[pb.CaptureMetadata] = None,
        depth_frames: Sequence[pb.DepthFrame] = (),
    ) -> Face:
        """A face with one vector template."""
        return cls(Template.from_vector(algorithm, values), capture=capture, depth_frames=depth_frames)

    @classmethod
    def landmarks(
        cls,
        algorithm: int,
        landmarks: Iterable[LandmarkLike],
        *,
        capture: Optional[pb.CaptureMetadata] = None,
        depth_frames: Sequence[pb.DepthFrame] = (),
    ) -> Face:
        """A face with one landmark template."""
        return cls(Template.from_landmarks(algorithm, landmarks), capture=capture, depth_frames=depth_frames)

    @property
    def templates(self) -> Tuple[Template, ...]:
        return self._templates

    @property
    def capture(self) -> Optional[pb.CaptureMetadata]:
        return self._capture

    @property
    def depth_frames(self) -> Tuple[pb.DepthFrame, ...]:
        return self._depth_frames

    def with_template(self, template: Template) -> Face:
        """This face with one more template (another model's output for the same capture)."""
        return Face(*self._templates, template, capture=self._capture, depth_frames=self._depth_frames)

    def to_proto(self) -> pb.Face:
        face = pb.Face(templates=[template.to_proto() for template in self._templates])
        if self._capture is not None:
            face.capture.CopyFrom(self._capture)
        face.depth_frames.extend(self._depth_frames)
        return face

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Face):
            return NotImplemented
        return (self._templates, self._capture, self._depth_frames) == (
            other._templates,
            other._capture,
            other._depth_frames,
        )

    __hash__ = None  # type: ignore[assignment]  # holds mutable protobuf messages

    def __repr__(self) -> str:
        parts = [repr(template) for template in self._templates]
        if self._capture is not None:
            parts.append("capture metadata")
        if self._depth_frames:
            parts.append(f"{len(self._depth_frames)} depth frames")
        return f"Face({', '.join(parts)})"

    __str__ = __repr__


#: What the client's methods accept as a face.
FaceLike = Union[Face, Template, pb.Face]


def to_face_proto(face: FaceLike) -> pb.Face:
    """A ``registry_pb2.Face`` for a :class:`Face`, a single :class:`Template`, or a ``pb.Face``."""
    if isinstance(face, Face):
        return face.to_proto()
    if isinstance(face, Template):
        return pb.Face(templates=[face.to_proto()])
    if isinstance(face, pb.Face):
        return face
    raise TypeError(f"expected a Face, a Template or a registry_pb2.Face, not {type(face).__name__}")


def to_template_proto(template: Union[Template, pb.Template]) -> pb.Template:
    """A ``registry_pb2.Template`` for a :class:`Template` or a ``pb.Template``."""
    if isinstance(template, Template):
        return template.to_proto()
    if isinstance(template, pb.Template):
        return template
    raise TypeError(f"expected a Template or a registry_pb2.Template, not {type(template).__name__}")


def normalised(values: Iterable[float]) -> Tuple[float, ...]:
    """The vector scaled to an L2 norm of 1 (``dot`` algorithms such as r300 require it; the daemon
    normalises cosine ones itself). Raises ValueError for a zero vector."""
    vector = _floats(values, "template values")
    norm = math.sqrt(math.fsum(value * value for value in vector))
    if norm == 0 or not math.isfinite(norm):
        raise ValueError("cannot normalise a zero or non-finite vector")
    return tuple(value / norm for value in vector)
