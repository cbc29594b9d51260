"""The asyncio client (registryd_client.aio): against a real registryd (one for the module, and
daemons of their own for the idle timeout and a full store), and against scripted fake daemons for
what a real one cannot be made to do (another protocol major, answers held back, a request read and
left unanswered, a write that fails before any byte goes out, refusals of a chosen code)."""

from __future__ import annotations

import asyncio
import os
import random
import socket
import tempfile
import threading
import time
import unittest
from typing import Any, Callable, List, Optional

import harness
from harness import (
    unique,
    ARCFACE,
    FakeDaemon,
    arcface,
    enrolment_poses,
    hello_response,
    nearby_values,
    random_values,
    read_request,
    write_response,
)
from test_fake_daemon import Waits, answering, refusing

import registryd_client.aio as aio_module
from registryd_client import (
    SOCKET_ENVIRONMENT_VARIABLE,
    ConnectionClosed,
    ConnectionFailed,
    ExponentialBackoff,
    IdentifierNotRegistered,
    InternalError,
    ProtocolError,
    ProtocolVersionMismatch,
    RequestTimeout,
    Retry,
    ShuttingDown,
    SimilarFaceRegistered,
    StorageFull,
    UnknownGallery,
    operations as ops,
    registry_pb2 as pb,
)
from registryd_client.aio import Client

daemon = harness.ModuleDaemon()
setUpModule = daemon.start
tearDownModule = daemon.stop


class CountingClient(Client):
    """Counts the requests ``send`` makes (one per page for the iterators)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sent: List[str] = []

    async def send(self, operation: Any, **kwargs: Any) -> Any:
        self.sent.append(type(operation).__name__)
        return await super().send(operation, **kwargs)


class AioDaemonTestCase(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self) -> None:
        self.rng = random.Random()
        self.client = CountingClient(daemon.socket_path, client_name="registryd-client-aio-tests", timeout=20)
        await self.client.connect()

    async def asyncTearDown(self) -> None:
        await self.client.close()


class OperationTests(AioDaemonTestCase):
    async def test_hello_and_the_server(self) -> None:
        server = self.client.server
        assert server is not None
        self.assertEqual(server.protocol_major, 1)
        self.assertEqual(server.server_version, (await self.client.stats()).server_version)
        async with Client(daemon.socket_path, hello=False, timeout=20) as raw:
            self.assertIsNone(raw.server)
            self.assertEqual((await raw.hello("explicit")).protocol_major, 1)
            self.assertIsNotNone(raw.server)

    async def test_register_identify_authenticate_and_refusals(self) -> None:
        alice = unique("alice")
        enrolled = random_values(self.rng)
        stored = (await self.client.register(alice, arcface(enrolled))).stored
        self.assertEqual([(t.identifier, t.algorithm) for t in stored], [(alice, ARCFACE)])
        capture = arcface(nearby_values(enrolled, self.rng))
        identified = await self.client.identify(capture, auto_enrol=False)
        self.assertEqual([(m.identifier, m.template_id) for m in identified.matches], [(alice, stored[0].id)])
        self.assertTrue((await self.client.authenticate(alice, capture)).authenticated)
        self.assertFalse((await self.client.authenticate(alice, arcface(random_values(self.rng)))).authenticated)

        with self.assertRaises(SimilarFaceRegistered) as caught:
            await self.client.register(unique("mallory"), arcface(enrolled))
        decisive = caught.exception.decisive
        assert decisive is not None
        self.assertEqual((decisive.kind, decisive.identifier), ("similar_face", alice))
        self.assertNotEqual(caught.exception.request_id, 0)
        with self.assertRaises(IdentifierNotRegistered):
            await self.client.authenticate(unique("nobody"), capture)
        with self.assertRaises(UnknownGallery):
            await self.client.identify(capture, gallery=unique("none"))
        self.assertEqual(self.client.connections_opened, 1)  # errors leave the connection usable

    async def test_administration(self) -> None:
        gallery = unique("aio")
        defined = await self.client.define_gallery(gallery, [ops.registry_spec(ARCFACE, thresholds=(0.7, 0.7, 0.7)), 16])
        self.assertEqual([r.algorithm.version for r in defined.registries], [ARCFACE, 16])
        self.assertIn(gallery, [g.name for g in (await self.client.list_galleries()).galleries])
        self.assertIn(ARCFACE, [a.version for a in (await self.client.list_algorithms()).algorithms])

        people = sorted(unique(f"adm{i}") for i in range(3))
        for person in people:
            await self.client.register(person, arcface(random_values(self.rng)), gallery=gallery)
        self.assertEqual(list((await self.client.list_identifiers(gallery=gallery)).identifiers), people)
        templates = (await self.client.get_templates(people[0], gallery=gallery, include_data=True)).templates
        self.assertEqual(len(templates[0].template.vector), 128)
        status = {e.algorithm: e.identifiers_held for e in (await self.client.migration_status(gallery=gallery)).registries}
        self.assertEqual(status, {ARCFACE: 3, 16: 0})

        exported = await self.client.export(gallery=gallery)
        self.assertEqual([t.identifier for t in exported.templates], people)
        self.assertEqual(exported.next_after_template_id, 0)
        copy = unique("aio-copy")
        await self.client.define_gallery(copy, [ARCFACE])
        imported = await self.client.import_templates([(t.identifier, t.template) for t in exported.templates], gallery=copy)
        self.assertEqual(len(imported.template_ids), 3)

        await self.client.enrol_liveness_profile(people[0], enrolment_poses(), gallery=gallery)
        self.assertEqual((await self.client.get_liveness_profile(people[0], gallery=gallery)).profile.frames, 35)
        self.assertTrue((await self.client.delete_liveness_profile(people[0], gallery=gallery)).deleted)

        self.assertTrue((await self.client.delete_template(templates[0].id, gallery=gallery)).deleted)
        self.assertEqual((await self.client.delete_identifier(people[1], gallery=gallery)).templates_deleted, 1)
        self.assertEqual((await self.client.delete_gallery(copy)).templates_deleted, 3)
        audit = (await self.client.audit(identifier=people[1])).entries
        self.assertEqual([e.operation for e in audit], ["register", "delete_identifier"])

        # Into the daemon's backup root (none configured: the data directory's path with -backups),
        # in a new directory it names and reports.
        backup = await self.client.backup()
        self.assertGreater(backup.bytes, 0)
        self.assertTrue(backup.directory.startswith(os.path.join(daemon.directory, "data-backups") + "/"), backup.directory)
        self.assertTrue(os.path.exists(os.path.join(backup.directory, "manifest.json")))
        self.assertEqual(list((await self.client.verify()).problems), [])
        self.assertGreaterEqual((await self.client.stats()).requests_served, 20)
        # The generic send, with a message or a whole Request.
        result = await self.client.send(pb.Request(id=99, list_identifiers=pb.ListIdentifiersRequest(gallery=gallery)))
        self.assertEqual(list(result.identifiers), [people[2]])

    async def test_set_encryption_key(self) -> None:
        key_file = os.path.join(daemon.directory, unique("key"))
        with open(key_file, "w") as key:
            key.write(os.urandom(32).hex())
        os.chmod(key_file, 0o600)  # a key named in a request must be private to its owner
        person = unique("sealed")
        values = random_values(self.rng)
        await self.client.register(person, arcface(values))
        self.assertGreaterEqual((await self.client.set_encryption_key(key_file)).templates, 1)
        matches = (await self.client.identify(arcface(values), auto_enrol=False)).matches
        self.assertEqual([m.identifier for m in matches], [person])

    async def test_page_iterators(self) -> None:
        gallery = unique("pages")
        await self.client.define_gallery(gallery, [ARCFACE])
        people = [unique(f"pg{i}") for i in range(5)]
        for person in people:
            await self.client.register(person, arcface(random_values(self.rng)), gallery=gallery)
        self.client.sent.clear()
        walked = [identifier async for identifier in self.client.iter_identifiers(gallery=gallery, page_size=2)]
        self.assertEqual(walked, sorted(people, key=str.encode))
        self.assertEqual(self.client.sent, ["ListIdentifiersRequest"] * 3)
        self.client.sent.clear()
        exported = [t async for t in self.client.iter_export(gallery=gallery, page_size=2)]
        self.assertEqual([t.identifier for t in exported], people)
        self.assertEqual(self.client.sent, ["ExportRequest"] * 3)
        after = [t.id async for t in self.client.iter_export(gallery=gallery, after_template_id=exported[3].id)]
        self.assertEqual(after, [exported[4].id])

    async def test_the_socket_from_the_environment(self) -> None:
        saved = os.environ.get(SOCKET_ENVIRONMENT_VARIABLE)
        os.environ[SOCKET_ENVIRONMENT_VARIABLE] = daemon.socket_path
        try:
            async with Client() as client:
                self.assertEqual(client.socket_path, daemon.socket_path)
                await client.list_galleries()
        finally:
            if saved is None:
                os.environ.pop(SOCKET_ENVIRONMENT_VARIABLE, None)
            else:
                os.environ[SOCKET_ENVIRONMENT_VARIABLE] = saved
        missing = os.path.join(tempfile.mkdtemp(prefix="registryd-absent-"), "missing.sock")
        with self.assertRaises(ConnectionFailed):
            async with Client(missing):
                pass


class PipeliningTests(AioDaemonTestCase):
    async def test_200_concurrent_calls_on_one_connection(self) -> None:
        people = [unique(f"p{i}") for i in range(20)]
        faces = {person: random_values(self.rng) for person in people}
        await asyncio.gather(*(self.client.register(p, arcface(faces[p])) for p in people))
        calls = []
        expected: List[Optional[str]] = []
        for n in range(200):
            if n % 10 == 9:
                calls.append(self.client.stats())
                expected.append(None)
            else:
                person = people[n % len(people)]
                calls.append(self.client.identify(arcface(nearby_values(faces[person], self.rng)), auto_enrol=False))
                expected.append(person)
        results = await asyncio.gather(*calls)
        for result, person in zip(results, expected):
            if person is None:
                self.assertIsInstance(result, pb.StatsResult)
            else:
                self.assertEqual([m.identifier for m in result.matches], [person])
        self.assertEqual(self.client.connections_opened, 1)

    async def test_submit_returns_once_written(self) -> None:
        futures = [await self.client.submit(ops.stats()) for _ in range(10)]
        ids = [future.request_id for future in futures]
        self.assertEqual(ids, sorted(set(ids)))
        for future in futures:
            self.assertIsInstance(await future, pb.StatsResult)


class IdleTimeoutTests(unittest.IsolatedAsyncioTestCase):
    async def test_a_connection_closed_by_the_daemon_is_replaced(self) -> None:
        idle = await asyncio.to_thread(harness.Daemon("--idle-timeout", "1").start)
        try:
            async with Client(idle.socket_path, timeout=20) as client:
                await client.stats()
                await asyncio.sleep(2.5)
                await client.stats()
                self.assertEqual(client.connections_opened, 2)
                await asyncio.sleep(2.5)
                results = await asyncio.gather(*(client.list_galleries() for _ in range(10)))
                self.assertEqual(len(results), 10)
                self.assertEqual(client.connections_opened, 3)  # one new connection for all ten
                self.assertIsNotNone(client.server)
        finally:
            self.assertEqual(await asyncio.to_thread(idle.stop), 0, idle.log())


class StorageFullTests(unittest.IsolatedAsyncioTestCase):
    async def test_storage_full_is_sent_as_often_as_the_policy_says(self) -> None:
        """The daemon keeps more free space than the file system has: every registration is refused
        with STORAGE_FULL; its request counter shows three attempts."""
        full = await asyncio.to_thread(harness.Daemon("--storage-reserve", str(10**15)).start)
        try:
            retry = Retry(attempts=3, backoff=ExponentialBackoff(base=0.01, cap=0.05))
            async with Client(full.socket_path, timeout=20, retry=retry) as client:
                before = (await client.stats()).requests_served
                with self.assertRaises(StorageFull) as caught:
                    await client.register(unique("alice"), arcface(random_values(random.Random())))
                self.assertTrue(caught.exception.retryable)
                self.assertEqual((await client.stats()).requests_served - before, 4)  # 3 registers, 1 stats
        finally:
            self.assertEqual(await asyncio.to_thread(full.stop), 0, full.log())


# ---------------------------------------------------------------------------------------------
# Fake daemons


class AioFakeTestCase(unittest.IsolatedAsyncioTestCase):
    def serve(self, script: Callable[[socket.socket], None], concurrent: bool = False) -> FakeDaemon:
        fake = FakeDaemon(script, concurrent=concurrent)
        self.addCleanup(self._check, fake)
        return fake

    def _check(self, fake: FakeDaemon) -> None:
        fake.close()
        self.assertEqual(fake.errors, [], "the scripted daemon failed")


class FakeDaemonTests(AioFakeTestCase):
    async def test_a_daemon_of_another_major_version_is_refused(self) -> None:
        def script(connection: socket.socket) -> None:
            request = read_request(connection)
            assert request is not None and request.WhichOneof("operation") == "hello"
            write_response(connection, hello_response(request, major=2))

        fake = self.serve(script)
        client = Client(fake.socket_path, timeout=5)
        with self.assertRaises(ProtocolVersionMismatch) as caught:
            async with client:
                pass
        self.assertEqual((caught.exception.expected_major, caught.exception.server_major), (1, 2))
        self.assertIsNone(client.server)

    async def test_requests_are_pipelined(self) -> None:
        """The peer reads all 50 requests before it answers any: a client that waited for each
        response before sending the next would time out."""
        count = 50
        seen: List[int] = []

        def script(connection: socket.socket) -> None:
            hello = read_request(connection)
            assert hello is not None
            write_response(connection, hello_response(hello))
            requests = [read_request(connection) for _ in range(count)]
            for request in requests:
                assert request is not None
                seen.append(request.id)
                write_response(connection, pb.Response(id=request.id, stats=pb.StatsResult(requests_served=request.id)))

        fake = self.serve(script)
        async with Client(fake.socket_path, timeout=5) as client:
            results = await asyncio.gather(*(client.stats() for _ in range(count)))
        # Each call got the answer to its own request (the fake echoes the id in requests_served).
        self.assertEqual(sorted(r.requests_served for r in results), sorted(seen))
        self.assertEqual(len(set(seen)), count)

    async def test_a_response_with_another_id_is_a_protocol_error(self) -> None:
        def script(connection: socket.socket) -> None:
            hello = read_request(connection)
            assert hello is not None
            write_response(connection, hello_response(hello))
            request = read_request(connection)
            assert request is not None
            write_response(connection, pb.Response(id=request.id + 1000, stats=pb.StatsResult()))
            read_request(connection)

        fake = self.serve(script)
        async with Client(fake.socket_path, timeout=5) as client:
            with self.assertRaises(ProtocolError):
                await client.stats()

    async def test_a_response_that_never_comes_times_out(self) -> None:
        release = threading.Event()

        fake = self.serve(unanswering(release))
        self.addCleanup(release.set)
        async with Client(fake.socket_path, timeout=0.3) as client:
            with self.assertRaises(RequestTimeout) as caught:
                await client.stats()
            self.assertIsInstance(caught.exception, TimeoutError)
            self.assertIn("stats", str(caught.exception))

    async def test_close_fails_pending_requests(self) -> None:
        release = threading.Event()

        fake = self.serve(unanswering(release))
        self.addCleanup(release.set)
        client = Client(fake.socket_path, timeout=5)
        await client.connect()
        pending = await client.submit(ops.stats())
        waiting = asyncio.ensure_future(client.identify(arcface(random_values(random.Random()))))
        await asyncio.sleep(0.05)
        await client.close()
        for outcome in (pending, waiting):
            with self.assertRaises(ConnectionClosed) as caught:
                await outcome
            self.assertIn("closed by the client", str(caught.exception))
        with self.assertRaises(ConnectionClosed):
            await client.stats()

    async def test_an_unknown_code_is_internal(self) -> None:
        fake = self.serve(refusing(999, []))
        async with Client(fake.socket_path, timeout=5) as client:
            with self.assertRaises(InternalError) as caught:
                await client.stats()
            self.assertEqual(caught.exception.code, 999)
            self.assertFalse(caught.exception.retryable)


class ReconnectionTests(AioFakeTestCase):
    async def test_a_request_read_and_left_unanswered_is_not_sent_again(self) -> None:
        """The daemon may have carried it out: ConnectionClosed, also under a retry policy, and the
        daemon saw it once."""
        seen: List[int] = []

        def script(connection: socket.socket) -> None:
            hello = read_request(connection)
            assert hello is not None
            write_response(connection, hello_response(hello))
            request = read_request(connection)
            if request is not None:
                seen.append(request.id)  # then close without answering

        fake = self.serve(script)
        waits = Waits()
        async with Client(fake.socket_path, timeout=5, retry=Retry(attempts=5, sleep=waits)) as client:
            with self.assertRaises(ConnectionClosed):
                await client.stats()
            with self.assertRaises(ConnectionClosed):
                await client.register(unique("once"), arcface(random_values(random.Random())))
            await asyncio.sleep(0.1)  # time for a resend to arrive, were there one
            self.assertEqual(len(seen), 2)
            self.assertEqual(len(set(seen)), 2)
            self.assertEqual(client.connections_opened, 2)
            self.assertEqual(waits.seconds, [])

    async def test_a_connection_closed_while_idle_is_replaced(self) -> None:
        seen: List[int] = []
        closed = threading.Event()

        def script(connection: socket.socket) -> None:
            answering_once(connection, seen)
            connection.close()
            closed.set()

        fake = self.serve(script)
        async with Client(fake.socket_path, timeout=5) as client:
            for _ in range(20):
                closed.clear()
                self.assertEqual((await client.stats()).server_version, "fake")
                self.assertTrue(await asyncio.to_thread(closed.wait, 5))
            self.assertEqual(client.connections_opened, 20)
        self.assertEqual(len(seen), 20)

    async def test_a_write_that_fails_before_any_byte_goes_out_is_sent_on_a_new_connection(self) -> None:
        """The daemon closed the connection and the client's reader has not seen it yet (held back
        here): the write fails at once (EPIPE), nothing went out, and the request goes to a new
        connection, where the daemon sees it once."""
        seen: List[int] = []
        first_closed = threading.Event()

        def script(connection: socket.socket) -> None:
            if fake.connections == 1:
                connection.close()  # as the idle timeout does
                first_closed.set()
                return
            answering(seen)(connection)

        fake = self.serve(script)
        release = asyncio.Event()
        original = aio_module._Connection._read_loop

        async def held_back(connection: aio_module._Connection) -> None:
            if connection.number == 1:
                await release.wait()
            await original(connection)

        setattr(aio_module._Connection, "_read_loop", held_back)
        try:
            client = Client(fake.socket_path, hello=False, timeout=5)
            await client.connect()
        finally:
            setattr(aio_module._Connection, "_read_loop", original)
        async with client:
            first = client._connection
            assert first is not None
            self.assertTrue(await asyncio.to_thread(first_closed.wait, 5))
            await asyncio.sleep(0.05)  # the event loop sees the end of the stream; the reader does not
            future = await asyncio.wait_for(client.submit(ops.stats()), 5)
            self.assertEqual((await asyncio.wait_for(future, 5)).server_version, "fake")
            self.assertEqual(client.connections_opened, 2)
            self.assertEqual(first._closed_reason, "writing failed: registryd had closed the connection")
            release.set()
        self.assertEqual(seen, [future.request_id])

    async def test_shutting_down_moves_the_next_call_to_a_new_connection(self) -> None:
        on_first: List[int] = []
        elsewhere: List[int] = []
        first = threading.Lock()

        def script(connection: socket.socket) -> None:
            if not first.acquire(blocking=False):
                answering(elsewhere)(connection)
                return
            hello = read_request(connection)
            assert hello is not None
            write_response(connection, hello_response(hello))
            request = read_request(connection)
            assert request is not None
            on_first.append(request.id)
            write_response(connection, pb.Response(id=request.id, error=pb.Error(code=pb.ERROR_CODE_SHUTTING_DOWN)))
            while True:  # keeps the connection open, answering nothing more
                later = read_request(connection)
                if later is None:
                    return
                on_first.append(later.id)

        fake = self.serve(script, concurrent=True)
        async with Client(fake.socket_path, timeout=3) as client:
            with self.assertRaises(ShuttingDown) as caught:
                await client.stats()
            self.assertTrue(caught.exception.retryable)
            self.assertEqual((await client.stats()).server_version, "fake")
            self.assertEqual(client.connections_opened, 2)
            self.assertEqual((len(on_first), len(elsewhere)), (1, 1))


def unanswering(release: threading.Event) -> Callable[[socket.socket], None]:
    """Answers the hello, reads one request and leaves it unanswered until ``release``."""

    def script(connection: socket.socket) -> None:
        hello = read_request(connection)
        assert hello is not None
        write_response(connection, hello_response(hello))
        read_request(connection)
        release.wait(10)

    return script


def answering_once(connection: socket.socket, seen: List[int]) -> None:
    hello = read_request(connection)
    assert hello is not None and hello.WhichOneof("operation") == "hello"
    write_response(connection, hello_response(hello))
    request = read_request(connection)
    assert request is not None
    seen.append(request.id)
    write_response(connection, pb.Response(id=request.id, stats=pb.StatsResult(server_version="fake")))


class RetryTests(AioFakeTestCase):
    async def test_a_retryable_refusal_is_retried_then_reported(self) -> None:
        for code, exception in ((pb.ERROR_CODE_STORAGE_FULL, StorageFull), (pb.ERROR_CODE_SHUTTING_DOWN, ShuttingDown)):
            with self.subTest(code=pb.ErrorCode.Name(code)):
                seen: List[int] = []
                fake = self.serve(refusing(code, seen), concurrent=True)
                waits = Waits()
                retry = Retry(attempts=4, backoff=ExponentialBackoff(base=0.01, cap=0.03), sleep=waits)
                async with Client(fake.socket_path, timeout=5, retry=retry) as client:
                    with self.assertRaises(exception) as caught:
                        await client.stats()
                    self.assertEqual(caught.exception.request_id, seen[-1])
                self.assertEqual(len(set(seen)), 4)
                self.assertEqual(fake.connections, 4 if code == pb.ERROR_CODE_SHUTTING_DOWN else 1)
                self.assertEqual(len(waits.seconds), 3)
                for failures, wait in enumerate(waits.seconds, start=1):
                    ceiling = min(0.03, 0.01 * 2 ** (failures - 1))
                    self.assertTrue(ceiling / 2 <= wait <= ceiling, waits.seconds)

    async def test_the_waits_are_asyncio_sleeps(self) -> None:
        """Without a sleep of its own the policy waits with asyncio.sleep: other tasks run meanwhile."""
        seen: List[int] = []
        fake = self.serve(refusing(pb.ERROR_CODE_STORAGE_FULL, seen))
        retry = Retry(attempts=3, backoff=ExponentialBackoff(base=0.1, cap=0.1, jitter=False))
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        async with Client(fake.socket_path, timeout=5, retry=retry) as client:
            ticking = asyncio.ensure_future(ticker())
            started = time.monotonic()
            with self.assertRaises(StorageFull):
                await client.stats()
            elapsed = time.monotonic() - started
            ticking.cancel()
        self.assertEqual(len(seen), 3)
        self.assertGreaterEqual(elapsed, 0.2)
        self.assertGreaterEqual(ticks, 10)  # the loop was not blocked during the 0.2 s of waits

    async def test_an_async_sleep_of_its_own_is_awaited(self) -> None:
        slept: List[float] = []

        async def sleep(seconds: float) -> None:
            slept.append(seconds)

        fake = self.serve(refusing(pb.ERROR_CODE_STORAGE_FULL, []))
        retry = Retry(attempts=2, backoff=ExponentialBackoff(base=5, cap=5, jitter=False), sleep=sleep)  # type: ignore[arg-type]
        async with Client(fake.socket_path, timeout=30, retry=retry) as client:
            with self.assertRaises(StorageFull):
                await client.stats()
        self.assertEqual(slept, [5])

    async def test_other_codes_and_no_policy_are_not_retried(self) -> None:
        seen: List[int] = []
        fake = self.serve(refusing(pb.ERROR_CODE_INTERNAL, seen))
        waits = Waits()
        async with Client(fake.socket_path, timeout=5, retry=Retry(attempts=4, sleep=waits)) as client:
            with self.assertRaises(InternalError):
                await client.stats()
        plain: List[int] = []
        full = self.serve(refusing(pb.ERROR_CODE_STORAGE_FULL, plain))
        async with Client(full.socket_path, timeout=5) as client:
            with self.assertRaises(StorageFull):
                await client.stats()
        self.assertEqual((len(seen), len(plain), waits.seconds), (1, 1, []))

    async def test_connecting_retries_too_many_connections_and_a_missing_socket(self) -> None:
        def script(connection: socket.socket) -> None:
            if fake.connections <= 2:
                write_response(
                    connection,
                    pb.Response(id=0, error=pb.Error(code=pb.ERROR_CODE_TOO_MANY_CONNECTIONS, message="busy")),
                )
                return
            answering([])(connection)

        fake = self.serve(script)
        waits = Waits()
        async with Client(fake.socket_path, timeout=5, retry=Retry(attempts=3, sleep=waits)) as client:
            self.assertEqual(client.connections_opened, 3)
            self.assertEqual((await client.stats()).server_version, "fake")
        self.assertEqual(len(waits.seconds), 2)

        missing = os.path.join(tempfile.mkdtemp(prefix="registryd-absent-"), "absent.sock")
        waits = Waits()
        with self.assertRaises(ConnectionFailed):
            async with Client(missing, timeout=5, retry=Retry(attempts=3, sleep=waits)):
                pass
        self.assertEqual(len(waits.seconds), 2)


if __name__ == "__main__":
    unittest.main()
