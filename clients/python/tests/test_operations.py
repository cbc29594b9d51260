"""The blocking client's operations beyond recognition, against a real registryd (one for the
module): the audit trail, liveness profiles, import and export with what an export records, the
page iterators, the explicit hello, an operation the daemon does not know, and (a daemon of its
own) set_encryption_key. The daemon runs as this test's user, which holds every right (docs/
security.md: without an access policy the daemon's own user does)."""

from __future__ import annotations

import os
import random
import socket
import struct
import unittest
from typing import Any, List

import harness
from harness import ARCFACE, unique, arcface, enrolment_poses, random_values

from registryd_client import (
    Client,
    IdentifierNotRegistered,
    MalformedRequest,
    ProtocolError,
    registry_pb2 as pb,
)

daemon = harness.ModuleDaemon()
setUpModule = daemon.start
tearDownModule = daemon.stop


class CountingClient(Client):
    """Counts the requests ``send`` makes (one per page for the iterators)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sent: List[str] = []

    def send(self, operation: Any, **kwargs: Any) -> Any:
        self.sent.append(type(operation).__name__)
        return super().send(operation, **kwargs)


class OperationTestCase(unittest.TestCase):
    def setUp(self) -> None:
        self.rng = random.Random()
        self.client = CountingClient(daemon.socket_path, client_name="registryd-client-tests", timeout=20)
        self.addCleanup(self.client.close)

    def new_gallery(self) -> str:
        gallery = unique("py")
        self.client.define_gallery(gallery, [ARCFACE])
        return gallery


class AuditTests(OperationTestCase):
    def test_the_trail_records_who_did_what_with_filters(self) -> None:
        person = unique("ada")
        values = random_values(self.rng)
        self.client.register(person, arcface(values))
        self.client.identify(arcface(values), auto_enrol=False)
        self.client.authenticate(person, arcface(random_values(self.rng)), auto_enrol=False)
        entries = self.client.audit(identifier=person).entries
        self.assertEqual(
            [(e.operation, e.outcome) for e in entries],
            [("register", "ok"), ("identify", "match"), ("authenticate", "no-match")],
        )
        self.assertTrue(all(e.uid == os.getuid() and e.pid == os.getpid() for e in entries))
        self.assertEqual(list(entries[1].identifiers), [person])
        matches = self.client.audit(identifier=person, outcome="match").entries
        self.assertEqual([e.operation for e in matches], ["identify"])
        # The trail records each audit query with its identifier filter (docs/operations.md): the
        # newest entry naming the person is now the query just made.
        newest = self.client.audit(identifier=person, limit=1).entries
        self.assertEqual([(e.operation, list(e.identifiers)) for e in newest], [("audit", [person])])
        since = entries[1].time_micros
        self.assertEqual(
            [
                e.operation
                for e in self.client.audit(identifier=person, since_micros=since).entries
                if e.operation != "audit"
            ],
            ["identify", "authenticate"],
        )
        self.assertEqual(self.client.audit(identifier=person, until_micros=entries[0].time_micros).entries, [])
        with self.assertRaises(MalformedRequest):
            self.client.audit(outcome="maybe")


class LivenessProfileTests(OperationTestCase):
    def test_enrol_get_delete(self) -> None:
        person = unique("lee")
        self.client.register(person, arcface(random_values(self.rng)))
        self.assertFalse(self.client.get_liveness_profile(person).HasField("profile"))

        enrolled = self.client.enrol_liveness_profile(person, enrolment_poses(), k=2.5)
        profile = enrolled.profile
        self.assertEqual(profile.frames, 35)  # 7 poses of 5 frames
        self.assertAlmostEqual(profile.k, 2.5, places=6)
        self.assertGreater(len(profile.ranges), 0)
        self.assertLess(profile.realistic_depth_lower, profile.realistic_depth_upper)
        self.assertEqual(self.client.get_liveness_profile(person).profile, profile)

        self.assertTrue(self.client.delete_liveness_profile(person).deleted)
        self.assertFalse(self.client.get_liveness_profile(person).HasField("profile"))
        self.assertFalse(self.client.delete_liveness_profile(person).deleted)

    def test_an_unregistered_identifier_or_a_missing_pose_is_refused(self) -> None:
        with self.assertRaises(IdentifierNotRegistered):
            self.client.enrol_liveness_profile(unique("nobody"), enrolment_poses())
        person = unique("max")
        self.client.register(person, arcface(random_values(self.rng)))
        poses = enrolment_poses()
        del poses["further"]
        with self.assertRaises(MalformedRequest):
            self.client.enrol_liveness_profile(person, poses)
        self.assertFalse(self.client.get_liveness_profile(person).HasField("profile"))

    def test_pose_pairs_and_the_profile_pages(self) -> None:
        gallery = self.new_gallery()
        people = sorted(unique(f"pp{i}") for i in range(3))
        for person in people:
            self.client.register(person, arcface(random_values(self.rng)), gallery=gallery)
            pairs = [(pose, frames) for pose, frames in enrolment_poses().items()]
            self.client.enrol_liveness_profile(person, pairs, gallery=gallery)
        self.client.sent.clear()
        entries = list(self.client.iter_liveness_profiles(gallery=gallery, page_size=2))
        self.assertEqual([e.identifier for e in entries], people)
        self.assertTrue(all(e.profile.frames == 35 for e in entries))
        self.assertEqual(self.client.sent, ["ExportRequest"] * 2)


class PageIteratorTests(OperationTestCase):
    def test_identifiers_across_pages(self) -> None:
        gallery = self.new_gallery()
        people = [unique(f"id{i}") for i in range(7)]
        for person in people:
            self.client.register(person, arcface(random_values(self.rng)), gallery=gallery)
        self.client.sent.clear()
        walked = list(self.client.iter_identifiers(gallery=gallery, page_size=3))
        self.assertEqual(walked, sorted(people, key=lambda p: p.encode()))
        self.assertEqual(len(self.client.sent), 3)  # 3 + 3 + 1
        # From a point, and lazily: a page is asked for when the one before it is used up.
        self.client.sent.clear()
        after_second = self.client.iter_identifiers(gallery=gallery, after=walked[1], page_size=2)
        self.assertEqual(next(after_second), walked[2])
        self.assertEqual(len(self.client.sent), 1)
        self.assertEqual(list(after_second), walked[3:])
        self.assertEqual(list(self.client.iter_identifiers(gallery=self.new_gallery())), [])

    def test_export_across_pages_and_import_of_what_it_recorded(self) -> None:
        source = self.new_gallery()
        people = [unique(f"ex{i}") for i in range(5)]
        for person in people:
            self.client.register(person, arcface(random_values(self.rng)), gallery=source)
        self.client.sent.clear()
        exported = list(self.client.iter_export(gallery=source, page_size=2))
        self.assertEqual(len(self.client.sent), 3)  # 2 + 2 + 1
        self.assertEqual([t.identifier for t in exported], people)
        ids = [t.id for t in exported]
        self.assertEqual(ids, sorted(ids))
        self.assertTrue(all(len(t.template.vector) == 128 for t in exported))
        self.assertEqual([t.id for t in self.client.iter_export(gallery=source, after_template_id=ids[2])], ids[3:])

        target = self.new_gallery()
        items = [
            pb.ImportRequest.Item(
                identifier=t.identifier,
                template=t.template,
                registered_at_micros=t.registered_at_micros,
                source=t.source,
            )
            for t in exported
        ]
        first = self.client.import_templates(items, gallery=target, skip_existing=True)
        self.assertEqual((len(first.template_ids), first.skipped), (5, 0))
        again = self.client.import_templates(items, gallery=target, skip_existing=True)
        self.assertEqual((list(again.template_ids), again.skipped), (list(first.template_ids), 5))
        copied = list(self.client.iter_export(gallery=target))
        self.assertEqual(
            [(t.identifier, t.registered_at_micros, t.source) for t in copied],
            [(t.identifier, t.registered_at_micros, t.source) for t in exported],
        )

    def test_a_page_that_does_not_move_forward_is_a_protocol_error(self) -> None:
        """A daemon handing back the cursor it was given would otherwise be walked forever."""
        stuck = pb.ListIdentifiersResult(identifiers=["a"], next="a")

        class Stuck(Client):
            def send(self, operation: Any, **kwargs: Any) -> Any:
                return stuck

        with Stuck(daemon.socket_path, connect=False) as client:
            pages = client.iter_identifiers(after="a")
            self.assertEqual(next(pages), "a")
            with self.assertRaises(ProtocolError):
                next(pages)


class HelloAndUnknownOperationTests(OperationTestCase):
    def test_an_explicit_hello(self) -> None:
        with Client(daemon.socket_path, hello=False, timeout=20) as client:
            self.assertIsNone(client.server)
            server = client.hello("explicit-hello")
            self.assertEqual(server.protocol_major, 1)
            self.assertEqual(client.server, server)
            self.assertEqual(server.server_version, client.stats().server_version)

    def test_an_operation_the_daemon_does_not_know_is_a_malformed_request_with_its_id(self) -> None:
        """What an older daemon answers to an operation added after it: the Request decodes with no
        operation set (protobuf skips the unknown field), so MALFORMED_REQUEST with the request's id,
        and the connection stays open. Field 45 is one no daemon has."""
        unknown_operation = pb.Request(id=41).SerializeToString() + b"\xea\x02\x00"  # field 45, empty
        empty = pb.Request(id=42).SerializeToString()
        following = pb.Request(id=43, stats=pb.StatsRequest()).SerializeToString()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
            raw.settimeout(20)
            raw.connect(daemon.socket_path)
            raw.sendall(b"".join(struct.pack(">I", len(b)) + b for b in (unknown_operation, empty, following)))
            answers = [self._read_response(raw) for _ in range(3)]
        for answer, request_id in zip(answers[:2], (41, 42)):
            self.assertEqual((answer.id, answer.WhichOneof("result")), (request_id, "error"))
            self.assertEqual(answer.error.code, pb.ERROR_CODE_MALFORMED_REQUEST)
            self.assertIsInstance(MalformedRequest.from_proto(answer.error, answer.id), MalformedRequest)
        self.assertEqual((answers[2].id, answers[2].WhichOneof("result")), (43, "stats"))

    @staticmethod
    def _read_response(raw: socket.socket) -> pb.Response:
        def exactly(size: int) -> bytes:
            data = b""
            while len(data) < size:
                chunk = raw.recv(size - len(data))
                if not chunk:
                    raise AssertionError("registryd closed the connection")
                data += chunk
            return data

        (length,) = struct.unpack(">I", exactly(4))
        response = pb.Response()
        response.ParseFromString(exactly(length))
        return response


class EncryptionKeyTests(unittest.TestCase):
    """A daemon of its own: after set_encryption_key it starts only with the key."""

    def test_encrypting_the_store(self) -> None:
        encrypted = harness.Daemon().start()
        try:
            rng = random.Random()
            people = {unique(f"enc{i}"): random_values(rng) for i in range(3)}
            key_file = os.path.join(encrypted.directory, "store.key")
            with open(key_file, "wb") as key:
                key.write(os.urandom(32))
            os.chmod(key_file, 0o600)  # a key named in a request must be private to its owner
            with Client(encrypted.socket_path, timeout=20) as client:
                for person, values in people.items():
                    client.register(person, arcface(values))
                with self.assertRaises(MalformedRequest):
                    client.set_encryption_key(os.path.join(encrypted.directory, "missing.key"))
                self.assertEqual(client.set_encryption_key(key_file).templates, 3)
                for person, values in people.items():
                    self.assertEqual([m.identifier for m in client.identify(arcface(values)).matches], [person])
                self.assertEqual(client.audit(outcome="ok").entries[-1].operation, "set_encryption_key")
            self.assertEqual(encrypted.stop(remove=False), 0, encrypted.log())
            with self.assertRaises(RuntimeError):  # without its key, the daemon refuses the store
                encrypted.start()
            encrypted.extra_args = ["--key-file", key_file]
            encrypted.start()
            with Client(encrypted.socket_path, timeout=20) as client:
                stored = {t.identifier: list(t.template.vector) for t in client.iter_export()}
                self.assertEqual(sorted(stored), sorted(people))
                for person, values in people.items():
                    self.assertGreater(harness.cosine(stored[person], values), 0.999)
                self.assertEqual(list(client.verify().problems), [])
        finally:
            self.assertEqual(encrypted.stop(), 0, encrypted.log())


if __name__ == "__main__":
    unittest.main()
