"""Client behaviours a real daemon cannot be made to show, against a scripted peer on a Unix
socket: a protocol version mismatch, answers held back until many requests arrived (strict
pipelining), a wrong response id, a result of another operation, an id-0 connection error, a
response that never comes, a request read and left unanswered, a connection closed before the
client's reader saw it, SHUTTING_DOWN, and the retry policy against refusals of any code."""

from __future__ import annotations

import errno
import os
import random
import socket
import tempfile
import threading
import time
import unittest
from typing import Callable, List

from harness import FakeDaemon, hello_response, read_request, write_response

import registryd_client.client as client_module
from registryd_client import (
    Client,
    ConnectionClosed,
    ConnectionFailed,
    ExponentialBackoff,
    FleetUnavailable,
    InternalError,
    MalformedRequest,
    ProtocolError,
    ProtocolVersionMismatch,
    RequestTimeout,
    Retry,
    ShuttingDown,
    StorageFull,
    TooManyConnections,
    operations as ops,
    registry_pb2 as pb,
)


class FakeDaemonTestCase(unittest.TestCase):
    def serve(self, script: Callable[[socket.socket], None], concurrent: bool = False) -> FakeDaemon:
        fake = FakeDaemon(script, concurrent=concurrent)
        self.addCleanup(self._check, fake)
        return fake

    def _check(self, fake: FakeDaemon) -> None:
        fake.close()
        self.assertEqual(fake.errors, [], "the scripted daemon failed")


class FakeDaemonTests(FakeDaemonTestCase):
    def test_a_daemon_of_another_major_version_is_refused(self) -> None:
        def script(connection: socket.socket) -> None:
            request = read_request(connection)
            assert request is not None and request.WhichOneof("operation") == "hello"
            assert request.hello.protocol_major == 1 and request.hello.client_name == "version-test"
            write_response(connection, hello_response(request, major=2))

        fake = self.serve(script)
        with self.assertRaises(ProtocolVersionMismatch) as caught:
            Client(fake.socket_path, client_name="version-test", timeout=5)
        self.assertEqual((caught.exception.expected_major, caught.exception.server_major), (1, 2))
        self.assertIn("2.1", str(caught.exception))

    def test_requests_are_pipelined(self) -> None:
        """The peer reads all 50 requests before it answers any: a client that waited for each
        response before sending the next request would time out."""
        count = 50
        seen: List[int] = []

        def script(connection: socket.socket) -> None:
            hello = read_request(connection)
            assert hello is not None
            write_response(connection, hello_response(hello))
            requests = [read_request(connection) for _ in range(count)]
            for request in requests:
                assert request is not None and request.WhichOneof("operation") == "stats"
                seen.append(request.id)
                write_response(
                    connection, pb.Response(id=request.id, stats=pb.StatsResult(requests_served=request.id))
                )

        fake = self.serve(script)
        with Client(fake.socket_path, timeout=5) as client:
            futures = client.submit_all(ops.stats() for _ in range(count))
            results = [future.result(5) for future in futures]
        self.assertEqual([r.requests_served for r in results], [f.request_id for f in futures])
        self.assertEqual(seen, [f.request_id for f in futures])
        self.assertNotIn(0, seen)

    def test_a_response_with_another_id_is_a_protocol_error(self) -> None:
        def script(connection: socket.socket) -> None:
            hello = read_request(connection)
            assert hello is not None
            write_response(connection, hello_response(hello))
            first, second = read_request(connection), read_request(connection)
            assert first is not None and second is not None
            write_response(connection, pb.Response(id=first.id + 1000, stats=pb.StatsResult()))
            read_request(connection)  # until the client closes

        fake = self.serve(script)
        with Client(fake.socket_path, timeout=5) as client:
            first, second = client.submit(ops.stats()), client.submit(ops.stats())
            with self.assertRaises(ProtocolError):
                first.result(5)
            # The stream can no longer be trusted: the connection is closed, the other request failed.
            with self.assertRaises(ConnectionClosed):
                second.result(5)

    def test_a_result_of_another_operation_is_a_protocol_error(self) -> None:
        def script(connection: socket.socket) -> None:
            hello = read_request(connection)
            assert hello is not None
            write_response(connection, hello_response(hello))
            wrong, right = read_request(connection), read_request(connection)
            assert wrong is not None and right is not None
            write_response(connection, pb.Response(id=wrong.id, list_galleries=pb.ListGalleriesResult()))
            write_response(connection, pb.Response(id=right.id, stats=pb.StatsResult(server_version="fake")))
            read_request(connection)

        fake = self.serve(script)
        with Client(fake.socket_path, timeout=5) as client:
            wrong, right = client.submit(ops.stats()), client.submit(ops.stats())
            with self.assertRaises(ProtocolError) as caught:
                wrong.result(5)
            self.assertIn("list_galleries", str(caught.exception))
            self.assertEqual(right.result(5).server_version, "fake")

    def test_an_id_0_error_answers_the_oldest_request(self) -> None:
        def script(connection: socket.socket) -> None:
            # What a daemon at its connection limit sends before reading anything.
            write_response(
                connection,
                pb.Response(id=0, error=pb.Error(code=pb.ERROR_CODE_TOO_MANY_CONNECTIONS, message="busy")),
            )

        fake = self.serve(script)
        with self.assertRaises(TooManyConnections) as caught:
            Client(fake.socket_path, timeout=5)
        self.assertEqual(caught.exception.code_name, "TOO_MANY_CONNECTIONS")
        self.assertEqual(str(caught.exception), "TOO_MANY_CONNECTIONS: busy")

    def test_a_response_that_never_comes_times_out(self) -> None:
        release = threading.Event()

        def script(connection: socket.socket) -> None:
            hello = read_request(connection)
            assert hello is not None
            write_response(connection, hello_response(hello))
            read_request(connection)
            release.wait(10)

        fake = self.serve(script)
        self.addCleanup(release.set)  # runs before the fake daemon is closed (cleanups run last first)
        with Client(fake.socket_path, timeout=0.3) as client:
            with self.assertRaises(RequestTimeout) as caught:
                client.stats()
            self.assertIsInstance(caught.exception, TimeoutError)
            self.assertIn("stats", str(caught.exception))

    def test_a_daemon_that_closes_fails_the_waiting_requests(self) -> None:
        def script(connection: socket.socket) -> None:
            hello = read_request(connection)
            assert hello is not None
            write_response(connection, hello_response(hello))
            read_request(connection)  # then close without answering

        fake = self.serve(script)
        with Client(fake.socket_path, timeout=5) as client:
            with self.assertRaises(ConnectionClosed):
                client.stats()


class Waits:
    """Records the retry policy's waits instead of sleeping them."""

    def __init__(self) -> None:
        self.seconds: List[float] = []

    def __call__(self, seconds: float) -> None:
        self.seconds.append(seconds)


def refusing(code: int, seen: List[int]) -> Callable[[socket.socket], None]:
    """Answers the hello, then refuses every request with ``code``, recording the request ids."""

    def script(connection: socket.socket) -> None:
        while True:
            request = read_request(connection)
            if request is None:
                return
            if request.WhichOneof("operation") == "hello":
                write_response(connection, hello_response(request))
                continue
            seen.append(request.id)
            refusal = pb.Error(code=code, message="refused")  # type: ignore[arg-type]
            write_response(connection, pb.Response(id=request.id, error=refusal))

    return script


def answering(seen: List[int]) -> Callable[[socket.socket], None]:
    """Answers the hello (if any) and every stats request, recording the request ids."""

    def script(connection: socket.socket) -> None:
        while True:
            request = read_request(connection)
            if request is None:
                return
            if request.WhichOneof("operation") == "hello":
                write_response(connection, hello_response(request))
                continue
            seen.append(request.id)
            write_response(
                connection, pb.Response(id=request.id, stats=pb.StatsResult(server_version="fake"))
            )

    return script


class ReconnectionTests(FakeDaemonTestCase):
    def test_a_request_read_and_left_unanswered_is_not_sent_again(self) -> None:
        """The daemon may have carried it out (PROTOCOL.md §3, the drain deadline): the call fails
        with ConnectionClosed, also under a retry policy, and the daemon saw it once."""
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
        with Client(fake.socket_path, timeout=5, retry=Retry(attempts=5, sleep=waits)) as client:
            future = client.submit(ops.stats())
            with self.assertRaises(ConnectionClosed):
                future.result(5)
            with self.assertRaises(ConnectionClosed):
                client.stats()
            time.sleep(0.1)  # time for a resend to arrive, were there one
            self.assertEqual(len(seen), 2)
            self.assertEqual(seen[0], future.request_id)
            self.assertEqual(len(set(seen)), 2)
            self.assertEqual(client.connections_opened, 2)
            self.assertEqual(waits.seconds, [])

    def test_a_connection_closed_while_idle_is_replaced(self) -> None:
        seen: List[int] = []
        closed = threading.Event()

        def script(connection: socket.socket) -> None:
            hello = read_request(connection)
            assert hello is not None and hello.WhichOneof("operation") == "hello"
            write_response(connection, hello_response(hello))
            request = read_request(connection)
            assert request is not None
            seen.append(request.id)
            write_response(
                connection, pb.Response(id=request.id, stats=pb.StatsResult(server_version="fake"))
            )
            connection.close()
            closed.set()

        fake = self.serve(script)
        with Client(fake.socket_path, timeout=5) as client:
            for call in range(1, 21):
                closed.clear()
                self.assertEqual(client.stats().server_version, "fake")
                self.assertTrue(closed.wait(5))
                self.assertIsNotNone(client.server)
            self.assertEqual(client.connections_opened, 20)
        self.assertEqual(len(seen), 20)
        self.assertEqual(len(set(seen)), 20)

    def test_a_write_that_fails_before_any_byte_goes_out_is_sent_on_a_new_connection(self) -> None:
        """The daemon closed the connection and the client's reader has not seen it yet (held back
        here): the write fails at once (EPIPE), nothing went out, and the request goes to a new
        connection, where the daemon sees it once."""
        seen: List[int] = []
        first_closed = threading.Event()
        release_reader = threading.Event()
        self.addCleanup(release_reader.set)

        def script(connection: socket.socket) -> None:
            if fake.connections == 1:
                connection.close()  # as the idle timeout does
                first_closed.set()
                return
            answering(seen)(connection)

        fake = self.serve(script)
        original = client_module._Connection._read_loop

        def held_back(connection: client_module._Connection) -> None:
            if connection.number == 1:
                release_reader.wait(10)
            original(connection)

        setattr(client_module._Connection, "_read_loop", held_back)
        try:
            client = Client(fake.socket_path, hello=False, timeout=5)
        finally:
            setattr(client_module._Connection, "_read_loop", original)
        with client:
            self.assertTrue(first_closed.wait(5))
            future = client.submit(ops.stats())
            self.assertEqual(future.result(5).server_version, "fake")
            self.assertEqual(client.connections_opened, 2)
            release_reader.set()
        self.assertEqual(seen, [future.request_id])

    def test_shutting_down_moves_the_next_call_to_a_new_connection(self) -> None:
        """After SHUTTING_DOWN the daemon reads no more requests on that connection: the next call
        goes to a new one instead of waiting there for the daemon to close it."""
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
            write_response(
                connection, pb.Response(id=request.id, error=pb.Error(code=pb.ERROR_CODE_SHUTTING_DOWN))
            )
            while True:  # keeps the connection open, answering nothing more
                later = read_request(connection)
                if later is None:
                    return
                on_first.append(later.id)

        fake = self.serve(script, concurrent=True)
        with Client(fake.socket_path, timeout=3) as client:
            with self.assertRaises(ShuttingDown) as caught:
                client.stats()
            self.assertTrue(caught.exception.retryable)
            self.assertEqual(client.stats().server_version, "fake")
            self.assertEqual(client.connections_opened, 2)
            self.assertEqual(len(on_first), 1)
            self.assertEqual(len(elsewhere), 1)


class RetryTests(FakeDaemonTestCase):
    def check_waits(self, waits: List[float], count: int, base: float, cap: float) -> None:
        self.assertEqual(len(waits), count, waits)
        for failures, wait in enumerate(waits, start=1):
            ceiling = min(cap, base * 2 ** (failures - 1))
            self.assertGreaterEqual(wait, ceiling / 2)
            self.assertLessEqual(wait, ceiling)

    def test_a_retryable_refusal_is_retried_then_reported(self) -> None:
        for code, exception in (
            (pb.ERROR_CODE_STORAGE_FULL, StorageFull),
            (pb.ERROR_CODE_SHUTTING_DOWN, ShuttingDown),
            (pb.ERROR_CODE_FLEET_UNAVAILABLE, FleetUnavailable),
        ):
            with self.subTest(code=pb.ErrorCode.Name(code)):
                seen: List[int] = []
                fake = self.serve(
                    refusing(code, seen), concurrent=True
                )  # SHUTTING_DOWN: a new connection each time
                waits = Waits()
                retry = Retry(
                    attempts=4,
                    backoff=ExponentialBackoff(base=0.01, cap=0.03, rng=random.Random(7)),
                    sleep=waits,
                )
                with Client(fake.socket_path, timeout=5, retry=retry) as client:
                    with self.assertRaises(exception) as caught:
                        client.stats()
                    self.assertTrue(caught.exception.retryable)
                    self.assertEqual(caught.exception.request_id, seen[-1])
                self.assertEqual(len(seen), 4)
                self.assertEqual(len(set(seen)), 4)  # a new id for each attempt
                # SHUTTING_DOWN retires the connection: each retry opens a new one.
                self.assertEqual(fake.connections, 4 if code == pb.ERROR_CODE_SHUTTING_DOWN else 1)
                self.check_waits(waits.seconds, 3, 0.01, 0.03)

    def test_other_codes_are_not_retried(self) -> None:
        for code, exception in (
            (pb.ERROR_CODE_INTERNAL, InternalError),
            (pb.ERROR_CODE_MALFORMED_REQUEST, MalformedRequest),
        ):
            with self.subTest(code=pb.ErrorCode.Name(code)):
                seen: List[int] = []
                fake = self.serve(refusing(code, seen))
                waits = Waits()
                with Client(fake.socket_path, timeout=5, retry=Retry(attempts=4, sleep=waits)) as client:
                    with self.assertRaises(exception) as caught:
                        client.stats()
                    self.assertFalse(caught.exception.retryable)
                self.assertEqual(len(seen), 1)
                self.assertEqual(waits.seconds, [])

    def test_nothing_is_retried_by_default(self) -> None:
        seen: List[int] = []
        fake = self.serve(refusing(pb.ERROR_CODE_STORAGE_FULL, seen))
        with Client(fake.socket_path, timeout=5) as client:
            with self.assertRaises(StorageFull):
                client.stats()
        self.assertEqual(len(seen), 1)

    def test_shutting_down_then_the_daemon_is_back(self) -> None:
        seen: List[int] = []

        def script(connection: socket.socket) -> None:
            if fake.connections == 1:
                hello = read_request(connection)
                assert hello is not None
                write_response(connection, hello_response(hello))
                request = read_request(connection)
                assert request is not None
                seen.append(request.id)
                write_response(
                    connection, pb.Response(id=request.id, error=pb.Error(code=pb.ERROR_CODE_SHUTTING_DOWN))
                )
                return  # the daemon closes the connection, then comes back
            answering(seen)(connection)

        fake = self.serve(script)
        waits = Waits()
        with Client(fake.socket_path, timeout=5, retry=Retry(attempts=3, sleep=waits)) as client:
            self.assertEqual(client.stats().server_version, "fake")
            self.assertEqual(client.connections_opened, 2)
        self.assertEqual(len(seen), 2)
        self.assertEqual(len(waits.seconds), 1)

    def test_connecting_retries_too_many_connections(self) -> None:
        def script(connection: socket.socket) -> None:
            if fake.connections <= 2:
                write_response(
                    connection,
                    pb.Response(
                        id=0, error=pb.Error(code=pb.ERROR_CODE_TOO_MANY_CONNECTIONS, message="busy")
                    ),
                )
                return
            answering([])(connection)

        fake = self.serve(script)
        waits = Waits()
        with Client(fake.socket_path, timeout=5, retry=Retry(attempts=3, sleep=waits)) as client:
            self.assertEqual(client.connections_opened, 3)
            self.assertEqual(client.stats().server_version, "fake")
        self.assertEqual(len(waits.seconds), 2)

    def test_a_missing_socket_is_retried(self) -> None:
        directory = tempfile.mkdtemp(prefix="registryd-absent-")
        self.addCleanup(os.rmdir, directory)
        path = os.path.join(directory, "absent.sock")
        waits = Waits()
        with self.assertRaises(ConnectionFailed) as caught:
            Client(
                path, timeout=5, retry=Retry(attempts=3, backoff=ExponentialBackoff(0.001, 0.01), sleep=waits)
            )
        self.assertEqual(caught.exception.errno, errno.ENOENT)
        self.check_waits(waits.seconds, 2, 0.001, 0.01)
        # Without a policy: at once.
        with self.assertRaises(ConnectionFailed):
            Client(path, timeout=5)

    def test_the_timeout_bounds_the_retries(self) -> None:
        seen: List[int] = []
        fake = self.serve(refusing(pb.ERROR_CODE_STORAGE_FULL, seen))
        slept = Waits()
        retry = Retry(attempts=10, backoff=ExponentialBackoff(base=10, cap=10), sleep=slept)
        with Client(fake.socket_path, timeout=2, retry=retry) as client:
            started = time.monotonic()
            with self.assertRaises(StorageFull):
                client.stats()  # a wait of 5 to 10 s would pass the 2 s timeout: none is started
            self.assertLess(time.monotonic() - started, 1.5)
        self.assertEqual(len(seen), 1)
        self.assertEqual(slept.seconds, [])

    def test_backoff_schedule(self) -> None:
        backoff = ExponentialBackoff(base=0.1, cap=0.5, jitter=False)
        self.assertEqual([backoff.compute(n) for n in range(1, 6)], [0.1, 0.2, 0.4, 0.5, 0.5])
        jittered = ExponentialBackoff(base=0.1, cap=0.5, rng=random.Random(3))
        for failures in range(1, 8):
            wait = jittered.compute(failures)
            self.assertTrue(jittered.ceiling(failures) / 2 <= wait <= jittered.ceiling(failures))
        self.assertEqual(ExponentialBackoff(base=1, cap=2).compute(10_000) <= 2, True)
        with self.assertRaises(ValueError):
            Retry(attempts=0)


if __name__ == "__main__":
    unittest.main()
