"""Client behaviours a real daemon cannot be made to show, against a scripted peer on a Unix
socket: a protocol version mismatch, answers held back until many requests arrived (strict
pipelining), a wrong response id, a result of another operation, an id-0 connection error, and a
response that never comes."""

from __future__ import annotations

import socket
import threading
import unittest
from typing import Callable, List

from harness import FakeDaemon, hello_response, read_request, write_response

from registryd_client import (
    Client,
    ConnectionClosed,
    ProtocolError,
    ProtocolVersionMismatch,
    RequestTimeout,
    TooManyConnections,
    operations as ops,
    registry_pb2 as pb,
)


class FakeDaemonTestCase(unittest.TestCase):
    def serve(self, script: Callable[[socket.socket], None]) -> FakeDaemon:
        fake = FakeDaemon(script)
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


if __name__ == "__main__":
    unittest.main()
