"""The client against a real registryd (REGISTRYD_BINARY), one daemon for the module.

Each test works with its own identifiers and random faces, so the tests do not see each other's
registrations: two random 128-dimensional unit vectors score about 0, far below the 0.6 thresholds.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import unittest
import uuid
from typing import Callable, List, Optional, Tuple, Type

from google.protobuf.message import Message

import harness
from harness import ARCFACE, arcface, nearby_values, random_values, renderings, scaled

from registryd_client import (
    DEFAULT_SOCKET_PATH,
    SOCKET_ENVIRONMENT_VARIABLE,
    SYSTEM_SOCKET_PATH,
    Client,
    ConnectionClosed,
    ConnectionFailed,
    ExponentialBackoff,
    Face,
    FaceMismatch,
    IdentifierNotRegistered,
    InvalidTemplate,
    RegistryError,
    Retry,
    SimilarFaceRegistered,
    StorageFull,
    Template,
    TemplateProblem,
    UnknownGallery,
    UnsupportedVersion,
    operations as ops,
    registry_pb2 as pb,
    resolve_socket_path,
)

daemon: Optional[harness.Daemon] = None
EXAMPLE = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "enrol_identify_authenticate.py"
)


def setUpModule() -> None:
    global daemon
    daemon = harness.Daemon().start()


def tearDownModule() -> None:
    assert daemon is not None
    status = daemon.stop()
    if status != 0:
        raise AssertionError(f"registryd exited with {status} after SIGTERM:\n{daemon.log()}")


def socket_path() -> str:
    assert daemon is not None
    return daemon.socket_path


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:12]}"


class DaemonTestCase(unittest.TestCase):
    def setUp(self) -> None:
        self.rng = random.Random()
        self.client = Client(socket_path(), client_name="registryd-client-tests", timeout=20)
        self.addCleanup(self.client.close)


class HelloTests(DaemonTestCase):
    def test_hello_reports_protocol_1_and_the_server_version(self) -> None:
        server = self.client.server
        assert server is not None
        self.assertEqual(server.protocol_major, 1)
        self.assertGreaterEqual(server.protocol_minor, 0)
        self.assertTrue(server.server_version)
        self.assertEqual(server.server_version, self.client.stats().server_version)

    def test_an_unsupported_major_version_is_refused_and_the_next_call_reconnects(self) -> None:
        with Client(socket_path(), hello=False, timeout=20) as raw:
            self.assertIsNone(raw.server)
            with self.assertRaises(UnsupportedVersion) as caught:
                raw.send(ops.hello("future-client", protocol_major=2))
            self.assertEqual(caught.exception.code_name, "UNSUPPORTED_VERSION")
            self.assertEqual(caught.exception.code, pb.ERROR_CODE_UNSUPPORTED_VERSION)
            # The daemon closes the connection after this error; the client's next call opens a new one.
            self.assertTrue(raw.stats().server_version)
            self.assertEqual(raw.connections_opened, 2)

    def test_calls_reuse_one_connection(self) -> None:
        for _ in range(5):
            self.client.list_algorithms()
        self.assertEqual(self.client.connections_opened, 1)


class RoundTripTests(DaemonTestCase):
    def test_register_identify_authenticate(self) -> None:
        alice = unique("alice")
        enrolled = random_values(self.rng)
        registered = self.client.register(alice, arcface(enrolled))
        self.assertEqual(len(registered.stored), 1)
        stored = registered.stored[0]
        self.assertEqual((stored.identifier, stored.algorithm), (alice, ARCFACE))
        self.assertEqual(stored.source, pb.TEMPLATE_SOURCE_REGISTERED)
        self.assertEqual(list(registered.findings), [])

        capture = arcface(nearby_values(enrolled, self.rng))
        identified = self.client.identify(capture)
        self.assertEqual(identified.algorithm, ARCFACE)
        self.assertEqual([m.identifier for m in identified.matches], [alice])
        self.assertEqual(identified.matches[0].template_id, stored.id)
        self.assertGreaterEqual(identified.matches[0].score, 0.6)

        authenticated = self.client.authenticate(alice, capture)
        self.assertTrue(authenticated.authenticated)
        self.assertEqual(authenticated.template_id, stored.id)
        self.assertAlmostEqual(authenticated.score, identified.matches[0].score, places=5)

    def test_a_stranger_is_not_identified_and_not_authenticated(self) -> None:
        bob = unique("bob")
        self.client.register(bob, arcface(random_values(self.rng)))
        stranger = arcface(random_values(self.rng))
        self.assertNotIn(bob, [m.identifier for m in self.client.identify(stranger).matches])
        result = self.client.authenticate(bob, stranger)  # a non-match is a result, not an error
        self.assertFalse(result.authenticated)
        self.assertLess(result.score, 0.6)

    def test_authenticating_an_unknown_identifier_raises(self) -> None:
        with self.assertRaises(IdentifierNotRegistered) as caught:
            self.client.authenticate(unique("nobody"), arcface(random_values(self.rng)))
        self.assertEqual(caught.exception.code_name, "IDENTIFIER_NOT_REGISTERED")
        self.assertNotEqual(caught.exception.request_id, 0)
        # An error leaves the connection usable.
        self.client.list_galleries()
        self.assertEqual(self.client.connections_opened, 1)

    def test_a_face_with_two_templates(self) -> None:
        carol = unique("carol")
        r300 = [v for v in random_values(self.rng, 512)]  # r300: 512 floats, L2 norm 1
        face = arcface(random_values(self.rng)).with_template(Template.from_vector(300, r300))
        stored = self.client.register(carol, face).stored
        self.assertEqual([t.algorithm for t in stored], [ARCFACE, 300])  # priority order
        self.assertEqual(len(self.client.get_templates(carol).templates), 2)


class RefusalTests(DaemonTestCase):
    def test_the_same_face_under_another_name_is_a_similar_face(self) -> None:
        first, second = unique("dana"), unique("erin")
        values = random_values(self.rng)
        self.client.register(first, arcface(values))
        with self.assertRaises(SimilarFaceRegistered) as caught:
            self.client.register(second, arcface(values))
        error = caught.exception
        self.assertEqual(error.code_name, "SIMILAR_FACE_REGISTERED")
        decisive = error.decisive
        assert decisive is not None
        self.assertEqual(
            (decisive.algorithm, decisive.kind, decisive.identifier), (ARCFACE, "similar_face", first)
        )
        self.assertAlmostEqual(decisive.score, 1.0, places=5)
        self.assertEqual(error.findings, [decisive])
        # Nothing was stored under the second name.
        with self.assertRaises(IdentifierNotRegistered):
            self.client.get_templates(second)

    def test_another_face_under_the_same_name_is_a_mismatch(self) -> None:
        frank = unique("frank")
        enrolled, other = random_values(self.rng), random_values(self.rng)
        self.client.register(frank, arcface(enrolled))
        with self.assertRaises(FaceMismatch) as caught:
            self.client.register(frank, arcface(other))
        error = caught.exception
        self.assertEqual(error.code_name, "FACE_MISMATCH")
        decisive = error.decisive
        assert decisive is not None
        self.assertEqual(
            (decisive.algorithm, decisive.kind, decisive.identifier), (ARCFACE, "face_mismatch", None)
        )
        self.assertLess(decisive.score, 0.6)
        self.assertAlmostEqual(decisive.score, max(0.0, harness.cosine(enrolled, other)), places=4)
        self.assertEqual(error.findings, [decisive])
        self.assertEqual(len(self.client.get_templates(frank).templates), 1)

    def test_a_vector_of_the_wrong_dimension_is_an_invalid_template(self) -> None:
        with self.assertRaises(InvalidTemplate) as caught:
            self.client.register(unique("gina"), arcface(random_values(self.rng, 100)))
        error = caught.exception
        self.assertEqual(
            error.template_problem,
            TemplateProblem(algorithm=ARCFACE, kind="WRONG_DIMENSION", expected=128, actual=100),
        )
        self.assertIsNone(error.decisive)
        self.assertEqual(error.findings, [])

    def test_an_unknown_landmark_is_an_invalid_template(self) -> None:
        names = [
            *("LEFT_EYE", "RIGHT_EYE", "NOSE_TIP", "MOUTH_LEFT", "MOUTH_RIGHT", "UPPER_LIP", "LOWER_LIP"),
            *(
                "MOUTH_CENTER",
                "CHIN_GNATHION",
                "LEFT_CHEEK_CENTER",
                "RIGHT_CHEEK_CENTER",
                "FOREHEAD_GLABELLA",
            ),
            *("LEFT_EAR_TRAGION", "RIGHT_EAR_TRAGION", "THIRD_EYE"),  # the last is not a landmark name
        ]
        landmarks = [
            (name, self.rng.uniform(0, 640), self.rng.uniform(0, 480), self.rng.uniform(-50, 50))
            for name in names
        ]
        with self.assertRaises(InvalidTemplate) as caught:
            self.client.identify(Face.landmarks(algorithm=1000, landmarks=landmarks))
        problem = caught.exception.template_problem
        assert problem is not None
        self.assertEqual(
            (problem.algorithm, problem.kind, problem.landmark), (1000, "UNKNOWN_LANDMARK", "THIRD_EYE")
        )

    def test_an_unknown_gallery(self) -> None:
        with self.assertRaises(UnknownGallery):
            self.client.identify(arcface(random_values(self.rng)), gallery=unique("no-such-gallery"))

    def test_errors_never_show_template_values(self) -> None:
        """str, repr, args and the formatted traceback of every refusal hold no template value."""
        values = scaled(random_values(self.rng))
        short = scaled(random_values(self.rng, 100))
        other = scaled(random_values(self.rng))
        self.assertGreater(len(renderings(values)), 500)
        name = unique("hana")
        self.client.register(name, arcface(values))
        attempts: List[Tuple[Callable[[], object], Type[RegistryError], List[float]]] = [
            (lambda: self.client.register(unique("ivan"), arcface(values)), SimilarFaceRegistered, values),
            (lambda: self.client.register(name, arcface(other)), FaceMismatch, other),
            (lambda: self.client.identify(arcface(short)), InvalidTemplate, short),
        ]
        for attempt, expected, sent in attempts:
            with self.assertRaises(expected) as caught:
                attempt()
            error = caught.exception
            formatted = "".join(traceback.format_exception(type(error), error, error.__traceback__))
            texts = [
                str(error),
                repr(error),
                repr(error.args),
                formatted,
                repr(error.decisive),
                repr(error.findings),
            ]
            for text in texts:
                for rendering in renderings(sent):
                    self.assertNotIn(rendering, text, f"{expected.__name__} shows a template value")
        self.assertNotIn(repr(values[0]), repr(arcface(values)))
        self.assertEqual(repr(arcface(values)), "Face(Template(algorithm=24, 128 values))")


class PipeliningTests(DaemonTestCase):
    def test_200_requests_in_flight_on_one_connection(self) -> None:
        people = [unique(f"p{i}") for i in range(20)]
        faces = {person: random_values(self.rng) for person in people}
        registrations = self.client.submit_all(ops.register(p, arcface(faces[p])) for p in people)
        for future in registrations:
            future.result(20)

        operations: List[Message] = []
        expected: List[Optional[str]] = []
        for n in range(200):
            if n % 10 == 9:
                operations.append(ops.stats())
                expected.append(None)
            else:
                person = people[n % len(people)]
                operations.append(
                    ops.identify(arcface(nearby_values(faces[person], self.rng)), auto_enrol=False)
                )
                expected.append(person)
        futures = self.client.submit_all(operations)  # all written before any result is read

        ids = [future.request_id for future in futures]
        self.assertEqual(len(set(ids)), 200)
        self.assertEqual(ids, sorted(ids))
        for future, identified in zip(futures, expected):
            result = future.result(30)
            if identified is None:
                self.assertIsInstance(result, pb.StatsResult)
            else:
                self.assertIsInstance(result, pb.IdentifyResult)
                self.assertEqual(
                    [m.identifier for m in result.matches], [identified], f"request {future.request_id}"
                )
        self.assertEqual(self.client.connections_opened, 1)

    def test_threads_share_one_connection(self) -> None:
        people = [unique(f"t{i}") for i in range(8)]
        faces = {person: random_values(self.rng) for person in people}
        failures: List[BaseException] = []

        def work(person: str) -> None:
            try:
                self.client.register(person, arcface(faces[person]))
                for _ in range(25):
                    matches = self.client.identify(arcface(faces[person]), auto_enrol=False).matches
                    if [m.identifier for m in matches] != [person]:
                        raise AssertionError(f"{person} identified as {[m.identifier for m in matches]}")
            except BaseException as error:
                failures.append(error)

        threads = [threading.Thread(target=work, args=(person,)) for person in people]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        self.assertEqual(failures, [])
        self.assertEqual(self.client.connections_opened, 1)


class SocketConventionTests(unittest.TestCase):
    def setUp(self) -> None:
        saved = os.environ.get(SOCKET_ENVIRONMENT_VARIABLE)
        self.addCleanup(self._restore, saved)
        os.environ.pop(SOCKET_ENVIRONMENT_VARIABLE, None)
        cwd = os.getcwd()
        self.addCleanup(os.chdir, cwd)
        self.directory = tempfile.mkdtemp(prefix="registryd-cwd-")
        os.chdir(self.directory)

    @staticmethod
    def _restore(saved: Optional[str]) -> None:
        if saved is None:
            os.environ.pop(SOCKET_ENVIRONMENT_VARIABLE, None)
        else:
            os.environ[SOCKET_ENVIRONMENT_VARIABLE] = saved

    def test_the_environment_variable_names_the_socket(self) -> None:
        os.environ[SOCKET_ENVIRONMENT_VARIABLE] = socket_path()
        with Client() as client:
            self.assertEqual(client.socket_path, socket_path())
            client.list_galleries()

    def test_without_the_variable_the_socket_is_run_registryd_sock_in_the_working_directory(self) -> None:
        os.environ[SOCKET_ENVIRONMENT_VARIABLE] = ""  # empty counts as unset
        os.mkdir("run")
        os.symlink(socket_path(), os.path.join("run", "registryd.sock"))
        with Client() as client:
            self.assertEqual(client.socket_path, DEFAULT_SOCKET_PATH)
            self.assertEqual(client.server.protocol_major if client.server else None, 1)

    def test_an_explicit_path_wins_over_the_variable(self) -> None:
        os.environ[SOCKET_ENVIRONMENT_VARIABLE] = os.path.join(self.directory, "elsewhere.sock")
        self.assertEqual(resolve_socket_path("/given.sock"), "/given.sock")
        with Client(socket_path()) as client:
            client.stats()

    def test_the_default_when_nothing_is_set(self) -> None:
        expected = SYSTEM_SOCKET_PATH if os.path.exists(SYSTEM_SOCKET_PATH) else DEFAULT_SOCKET_PATH
        self.assertEqual(resolve_socket_path(environ={}), expected)
        self.assertEqual(resolve_socket_path(environ={SOCKET_ENVIRONMENT_VARIABLE: "/x.sock"}), "/x.sock")

    def test_no_daemon_is_a_connection_failure(self) -> None:
        missing = os.path.join(self.directory, "missing.sock")
        with self.assertRaises(ConnectionFailed) as caught:
            Client(missing)
        self.assertEqual(caught.exception.socket_path, missing)
        self.assertIn(missing, str(caught.exception))


class AdministrationTests(DaemonTestCase):
    def test_algorithms_and_galleries(self) -> None:
        algorithms = {a.version: a for a in self.client.list_algorithms().algorithms}
        self.assertEqual(algorithms[ARCFACE].name, "arcface")
        self.assertEqual(algorithms[ARCFACE].dimension, 128)
        galleries = {g.name: g for g in self.client.list_galleries().galleries}
        self.assertEqual([r.algorithm.version for r in galleries["default"].registries][:1], [ARCFACE])

    def test_define_gallery_migration_status_and_delete_identifier(self) -> None:
        gallery = unique("py")
        defined = self.client.define_gallery(
            gallery, [ops.registry_spec(ARCFACE, thresholds=(0.7, 0.7, 0.75)), 16]
        )
        self.assertEqual(defined.name, gallery)
        self.assertEqual([r.algorithm.version for r in defined.registries], [ARCFACE, 16])
        self.assertAlmostEqual(defined.registries[0].thresholds.auto_enrolment, 0.75, places=6)
        self.assertIn(gallery, [g.name for g in self.client.list_galleries().galleries])

        person = unique("jo")
        self.client.register(person, arcface(random_values(self.rng)), gallery=gallery)
        status = {
            e.algorithm: (e.identifiers_held, e.gallery_identifiers)
            for e in self.client.migration_status(gallery=gallery).registries
        }
        self.assertEqual(status, {ARCFACE: (1, 1), 16: (0, 1)})

        self.assertEqual(self.client.delete_identifier(person, gallery=gallery).templates_deleted, 1)
        self.assertEqual(self.client.delete_identifier(person, gallery=gallery).templates_deleted, 0)
        self.assertEqual(self.client.list_identifiers(gallery=gallery).identifiers, [])
        self.assertEqual(self.client.delete_gallery(gallery).templates_deleted, 0)

    def test_stats_and_the_generic_send(self) -> None:
        stats = self.client.stats()
        self.assertGreaterEqual(stats.open_connections, 1)
        self.assertGreater(stats.requests_served, 0)
        person = unique("kim")
        self.client.register(person, arcface(random_values(self.rng)))
        # The metrics, in the Prometheus text format, count it (and never name it).
        metrics = self.client.stats().metrics
        self.assertRegex(metrics, r'registryd_requests_total\{operation="register",outcome="ok"\} [1-9]')
        self.assertNotIn(person, metrics)
        # An operation without a method of its own: the message alone, or a whole Request.
        audit = self.client.send(pb.AuditQueryRequest(identifier=person))
        self.assertIsInstance(audit, pb.AuditQueryResult)
        self.assertEqual([(e.operation, e.outcome) for e in audit.entries], [("register", "ok")])
        templates = self.client.send(
            pb.Request(id=12345, get_templates=pb.GetTemplatesRequest(identifier=person))
        )
        self.assertEqual([t.identifier for t in templates.templates], [person])
        with self.assertRaises(TypeError):
            self.client.send(pb.Template())

    def test_closing_fails_further_calls_until_connect(self) -> None:
        self.client.close()
        with self.assertRaises(ConnectionClosed):
            self.client.stats()
        self.client.connect()
        self.client.stats()


class ExampleTests(unittest.TestCase):
    def test_the_example_runs(self) -> None:
        environment = dict(os.environ, **{SOCKET_ENVIRONMENT_VARIABLE: socket_path()})
        done = subprocess.run(
            [sys.executable, EXAMPLE], env=environment, capture_output=True, text=True, timeout=60
        )
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertIn("identified as", done.stdout)
        self.assertIn("authenticated: True", done.stdout)
        self.assertIn("SIMILAR_FACE_REGISTERED", done.stdout)


class IdleTimeoutTests(unittest.TestCase):
    """A daemon of its own, closing idle connections after 1 s."""

    def test_a_connection_closed_by_the_daemon_is_replaced(self) -> None:
        idle = harness.Daemon("--idle-timeout", "1").start()
        try:
            with Client(idle.socket_path, timeout=20) as client:
                client.stats()
                time.sleep(2.5)
                client.stats()
                self.assertEqual(client.connections_opened, 2)
                # Again, with ten threads calling at once: exactly one new connection for them all.
                time.sleep(2.5)
                errors: List[BaseException] = []

                def call() -> None:
                    try:
                        client.list_galleries()
                    except BaseException as error:
                        errors.append(error)

                threads = [threading.Thread(target=call) for _ in range(10)]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join(30)
                self.assertEqual(errors, [])
                self.assertEqual(client.connections_opened, 3)
                self.assertIsNotNone(client.server)
        finally:
            self.assertEqual(idle.stop(), 0, idle.log())


class RetryTests(unittest.TestCase):
    """Daemons of their own: one restarted under a waiting call, one refusing every write."""

    def test_a_call_waits_for_a_restarting_daemon(self) -> None:
        restarting = harness.Daemon().start()
        try:
            retry = Retry(attempts=1000, backoff=ExponentialBackoff(base=0.005, cap=0.05))
            with Client(restarting.socket_path, timeout=60, retry=retry) as client:
                client.stats()
                self.assertEqual(restarting.stop(remove=False), 0, restarting.log())
                outcome: List[object] = []
                caller = threading.Thread(target=lambda: outcome.append(client.list_galleries()))
                started = time.monotonic()
                caller.start()
                time.sleep(0.3)
                self.assertEqual(outcome, [], "the call ended while the daemon was down")
                restarting.start()
                caller.join(60)
                self.assertEqual(len(outcome), 1, "the call did not succeed across the restart")
                self.assertGreaterEqual(time.monotonic() - started, 0.3)
                self.assertEqual(client.connections_opened, 2)
        finally:
            self.assertEqual(restarting.stop(), 0, restarting.log())

    def test_storage_full_is_sent_as_often_as_the_policy_says(self) -> None:
        """A daemon keeping more free space than the file system has refuses every registration with
        STORAGE_FULL; its request counter shows three attempts."""
        full = harness.Daemon("--storage-reserve", str(10**15)).start()
        try:
            retry = Retry(attempts=3, backoff=ExponentialBackoff(base=0.01, cap=0.05))
            with Client(full.socket_path, timeout=20, retry=retry) as client:
                before = client.stats().requests_served
                with self.assertRaises(StorageFull) as caught:
                    client.register(unique("alice"), arcface(random_values(random.Random())))
                self.assertTrue(caught.exception.retryable)
                after = client.stats().requests_served
                self.assertEqual(after - before, 4)  # three registrations and the stats itself
            with Client(full.socket_path, timeout=20) as plain:
                with self.assertRaises(StorageFull):
                    plain.register(unique("bob"), arcface(random_values(random.Random())))
                self.assertEqual(plain.stats().requests_served - after, 3)  # hello, register, stats
        finally:
            self.assertEqual(full.stop(), 0, full.log())


if __name__ == "__main__":
    unittest.main()
