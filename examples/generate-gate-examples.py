#!/usr/bin/env python3
"""Generates the capture-gate examples of the README walkthrough (README, capture gates) from alice.json and
alice-again.json: faces with capture metadata (alice-capture.json: "excellent"; alice-poor-capture.json:
"poor"), faces with depth frames (alice-live.json: a face-like surface that moves, live; alice-photo.json:
a flat plane, not live) and liveness enrolment frames for every pose (alice-poses.json).

The depth frames are 10 x 10 grids in metres, row-major, synthetic and deterministic: a smooth bulge
(an ellipsoid cap 0.15 m deep) with a nose ridge 0.02 m high, in front of the camera at 0.45 m (the
closer pose 0.35 m, the further one 0.6 m), with +-0.001 m of noise; the face moves a little between
frames (0.15 grid cells per frame), which the micro-movement check needs. Run it from anywhere:
    python3 examples/generate-gate-examples.py
"""

import json
import math
import os

HERE = os.path.dirname(os.path.abspath(__file__))
GRID = 10
START_MILLIS = 1_718_000_000_000
FRAME_INTERVAL_MILLIS = 600
FACE_BOX = {"x": 360, "y": 160, "width": 560, "height": 640}


def noise(frame, row, column, seed):
    """Deterministic noise in [-0.001, 0.001] m."""
    return 0.001 * math.sin(12.9898 * (row * GRID + column) + 78.233 * frame + 37.719 * seed)


def face_frame(frame, distance=0.45, shift_x=0.0, shift_y=0.0, seed=0):
    """A face-like surface: the bulge and nose centred (shift_x, shift_y) grid cells off the middle."""
    depths = []
    for row in range(GRID):
        for column in range(GRID):
            x = (column - 4.5 + shift_x) / 5
            y = (row - 4.5 + shift_y) / 5
            bulge = math.sqrt(max(0.0, 1 - x * x - y * y)) * 0.15
            nose = 0.02 if abs(x) < 0.15 and abs(y) < 0.4 else 0.0
            depths.append(round(distance - bulge - nose + noise(frame, row, column, seed), 5))
    return depths


def plane_frame(frame, distance=0.45, seed=0):
    """A photo held in front of the camera: a plane, slightly tilted, with the same noise."""
    depths = []
    for row in range(GRID):
        for column in range(GRID):
            tilt = 0.004 * (column - 4.5) / 4.5 + 0.002 * (row - 4.5) / 4.5
            depths.append(round(distance + 0.0005 * frame + tilt + noise(frame, row, column, seed), 5))
    return depths


def frame_object(depths, index):
    return {"depths": depths, "timestampMillis": START_MILLIS + FRAME_INTERVAL_MILLIS * index, "faceBox": FACE_BOX}


def template(name):
    with open(os.path.join(HERE, name)) as file:
        return json.load(file)


def write(name, document):
    """Writes JSON with one template, capture value or frame per line (the depth grids stay compact)."""

    def dump(value, indent):
        pad = " " * indent
        if isinstance(value, dict) and any(isinstance(v, (dict, list)) for v in value.values()) and "depths" not in value and "data" not in value:
            items = [f'{pad}  {json.dumps(k)}: {dump(v, indent + 2).lstrip()}' for k, v in value.items()]
            return pad + "{\n" + ",\n".join(items) + "\n" + pad + "}"
        if isinstance(value, list) and value and isinstance(value[0], (dict, list)):
            return pad + "[\n" + ",\n".join(dump(v, indent + 2) for v in value) + "\n" + pad + "]"
        return pad + json.dumps(value)

    with open(os.path.join(HERE, name), "w") as file:
        file.write(dump(document, 0) + "\n")


EXCELLENT_CAPTURE = {
    "detectorConfidence": 0.98,
    "faceBox": FACE_BOX,
    "imageWidth": 1280,
    "imageHeight": 960,
    "yaw": 3.0,
    "pitch": -2.0,
    "roll": 1.0,
    "facePixelSize": 560,
    "sharpness": 420.0,
    "brightnessMean": 128.0,
    "brightnessStdDev": 42.0,
}

POOR_CAPTURE = {
    "detectorConfidence": 0.55,
    "faceBox": {"x": 1020, "y": 80, "width": 90, "height": 110},
    "imageWidth": 1280,
    "imageHeight": 960,
    "yaw": 38.0,
    "pitch": 12.0,
    "roll": -6.0,
    "facePixelSize": 90,
    "sharpness": 35.0,
    "brightnessMean": 45.0,
    "brightnessStdDev": 12.0,
}

# Enrolment poses: where the face is relative to the grid (shift in grid cells) and how far away.
POSES = {
    "center": dict(distance=0.45, shift=lambda j: (0.15 * j, 0.0)),
    "left": dict(distance=0.45, shift=lambda j: (0.6 + 0.1 * j, 0.0)),
    "right": dict(distance=0.45, shift=lambda j: (-0.6 - 0.1 * j, 0.0)),
    "up": dict(distance=0.45, shift=lambda j: (0.0, 0.6 + 0.1 * j)),
    "down": dict(distance=0.45, shift=lambda j: (0.0, -0.6 - 0.1 * j)),
    "closer": dict(distance=0.35, shift=lambda j: (0.15 * j, 0.0)),
    "further": dict(distance=0.6, shift=lambda j: (0.15 * j, 0.0)),
}
FRAMES_PER_POSE = 5


def main():
    alice = template("alice.json")
    alice_again = template("alice-again.json")
    write("alice-capture.json", {"templates": [alice], "capture": EXCELLENT_CAPTURE})
    write("alice-poor-capture.json", {"templates": [alice], "capture": POOR_CAPTURE})
    live = [frame_object(face_frame(i, shift_x=0.15 * i, seed=1), i) for i in range(4)]
    write("alice-live.json", {"templates": [alice_again], "depthFrames": live})
    photo = [frame_object(plane_frame(i, seed=2), i) for i in range(4)]
    write("alice-photo.json", {"templates": [alice_again], "depthFrames": photo})
    poses = {}
    index = 0
    for number, (pose, spec) in enumerate(POSES.items()):
        frames = []
        for j in range(FRAMES_PER_POSE):
            shift_x, shift_y = spec["shift"](j)
            depths = face_frame(j, distance=spec["distance"], shift_x=shift_x, shift_y=shift_y, seed=10 + number)
            frames.append(frame_object(depths, index))
            index += 1
        poses[pose] = frames
    write("alice-poses.json", poses)


if __name__ == "__main__":
    main()
