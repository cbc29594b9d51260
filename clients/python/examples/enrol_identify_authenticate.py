#!/usr/bin/env python3
"""Enrols two people, identifies and authenticates a later capture, and shows the registry's two
refusals (a similar face under another name, another face under the same name), against a running
registryd.

    tools/registryd                                   # terminal 1, from the repository
    pip install ./clients/python                      # terminal 2, in a virtualenv
    python3 clients/python/examples/enrol_identify_authenticate.py [SOCKET]

The socket is SOCKET, else $REGISTRYD_SOCKET, else ./run/registryd.sock. The faces are random
128-float ArcFace-style vectors (algorithm 24), not real captures: "a later capture" is the enrolled
vector plus a little noise. The identifiers carry a random suffix so the example can run repeatedly
against the same store.
"""

from __future__ import annotations

import math
import random
import sys
import uuid
from typing import List, Optional, Sequence

from registryd_client import Client, Face, FaceMismatch, SimilarFaceRegistered

ARCFACE = 24


def random_capture(rng: random.Random) -> List[float]:
    values = [rng.gauss(0.0, 1.0) for _ in range(128)]
    return unit(values)


def later_capture(values: Sequence[float], rng: random.Random) -> List[float]:
    return unit([value + rng.gauss(0.0, 0.05) for value in values])


def unit(values: Sequence[float]) -> List[float]:
    norm = math.sqrt(sum(value * value for value in values))
    return [value / norm for value in values]


def main(socket_path: Optional[str] = None) -> int:
    rng = random.Random()
    suffix = uuid.uuid4().hex[:8]
    alice, bob = f"alice-{suffix}", f"bob-{suffix}"
    alice_enrolment, bob_enrolment = random_capture(rng), random_capture(rng)

    with Client(socket_path, client_name="enrol-identify-authenticate-example") as client:
        server = client.server
        print(f"connected to {client.socket_path}: registryd {server.server_version if server else '?'}")

        for name, values in ((alice, alice_enrolment), (bob, bob_enrolment)):
            stored = client.register(name, Face.vector(algorithm=ARCFACE, values=values)).stored
            print(f"enrolled {name}: template {stored[0].id}")

        capture = Face.vector(algorithm=ARCFACE, values=later_capture(alice_enrolment, rng))
        identified = client.identify(capture)
        if not identified.matches:
            print("the later capture of alice matched nobody")
            return 1
        best = identified.matches[0]
        print(f"later capture identified as {best.identifier} (score {best.score:.3f})")

        result = client.authenticate(alice, capture)
        print(f"authenticate as {alice}: authenticated: {result.authenticated} (score {result.score:.3f})")
        result = client.authenticate(bob, capture)
        print(f"authenticate as {bob}: authenticated: {result.authenticated} (score {result.score:.3f})")

        try:
            client.register(f"mallory-{suffix}", Face.vector(algorithm=ARCFACE, values=alice_enrolment))
        except SimilarFaceRegistered as refused:
            finding = refused.decisive
            assert finding is not None
            print(
                f"registering alice's face as mallory: {refused.code_name}: "
                f"{finding.identifier} scored {finding.score:.3f}"
            )

        try:
            client.register(alice, Face.vector(algorithm=ARCFACE, values=random_capture(rng)))
        except FaceMismatch as refused:
            finding = refused.decisive
            assert finding is not None
            print(f"registering another face as alice: {refused.code_name}: best score {finding.score:.3f}")

        ok = best.identifier == alice and client.authenticate(alice, capture, auto_enrol=False).authenticated
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:2]))
