"""The connection pools against a real registryd (REGISTRYD_BINARY): calls spread over the members,
many threads and many coroutines at once answered right, and a daemon restart survived by every
member with the retry policy (each reconnects by itself; nothing is sent twice)."""

from __future__ import annotations

import asyncio
import random
import threading
import unittest
from typing import List

import harness
from harness import arcface, nearby_values, random_values

from registryd_client import (
    AsyncClientPool,
    ClientPool,
    ExponentialBackoff,
    IdentifierNotRegistered,
    Retry,
    operations as ops,
)

daemon = harness.ModuleDaemon()


def setUpModule() -> None:
    daemon.start()


def tearDownModule() -> None:
    daemon.stop()


class BlockingPoolTests(unittest.TestCase):
    def test_a_pool_has_at_least_one_connection(self) -> None:
        with self.assertRaises(ValueError):
            ClientPool(daemon.socket_path, size=0, connect=False)
        with self.assertRaises(ValueError):
            AsyncClientPool(daemon.socket_path, size=0)
        with ClientPool(daemon.socket_path, size=1, timeout=20) as pool:
            for _ in range(3):
                self.assertTrue(pool.list_galleries().galleries)
            self.assertEqual([client.connections_opened for client in pool.clients], [1])

    def test_calls_in_turn_open_one_connection_per_member(self) -> None:
        with ClientPool(daemon.socket_path, size=3, connect=False, timeout=20) as pool:
            for _ in range(6):
                pool.list_galleries()
            self.assertEqual([client.connections_opened for client in pool.clients], [1, 1, 1])
            self.assertEqual(pool.in_flight(), [0, 0, 0])

    def test_threads_at_once_are_answered_right(self) -> None:
        rng = random.Random(7)
        people = {harness.unique("pool-person"): random_values(rng) for _ in range(24)}
        failures: List[BaseException] = []
        with ClientPool(daemon.socket_path, size=4, timeout=30) as pool:

            def work(names: List[str]) -> None:
                local = random.Random(len(names))
                try:
                    for name in names:
                        pool.register(name, arcface(people[name]))
                        result = pool.authenticate(name, arcface(nearby_values(people[name], local)))
                        assert result.authenticated, name
                        matches = pool.identify(arcface(people[name])).matches
                        assert matches and matches[0].identifier == name, (name, matches)
                        with self.assertRaises(IdentifierNotRegistered):
                            pool.authenticate(name + "-nobody", arcface(people[name]))
                except BaseException as error:  # reported by the main thread
                    failures.append(error)

            names = list(people)
            threads = [threading.Thread(target=work, args=(names[index::8],)) for index in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=120)
            self.assertEqual(failures, [])
            self.assertEqual(pool.in_flight(), [0, 0, 0, 0])
            # Submitted without waiting: spread over the members, every future answered.
            futures = [pool.submit(ops.list_galleries()) for _ in range(40)]
            self.assertTrue(all(future.result(30).galleries for future in futures))
            self.assertEqual(pool.in_flight(), [0, 0, 0, 0])
            self.assertTrue(all(client.connections_opened == 1 for client in pool.clients))

    def test_every_member_reconnects_after_a_restart(self) -> None:
        own = harness.Daemon().start()
        try:
            retry = Retry(attempts=40, backoff=ExponentialBackoff(0.05, 0.5))
            with ClientPool(own.socket_path, size=3, timeout=20, retry=retry) as pool:
                self.assertEqual(len(pool.list_galleries().galleries), 1)
                self.assertEqual(own.stop(remove=False), 0)
                own.start()
                for _ in range(6):  # every member in turn, each on a new connection
                    self.assertEqual(len(pool.list_galleries().galleries), 1)
                self.assertEqual([client.connections_opened for client in pool.clients], [2, 2, 2])
        finally:
            own.stop()


class AsyncPoolTests(unittest.IsolatedAsyncioTestCase):
    async def test_coroutines_at_once_are_answered_right(self) -> None:
        rng = random.Random(11)
        people = {harness.unique("aio-pool-person"): random_values(rng) for _ in range(12)}
        async with AsyncClientPool(daemon.socket_path, size=3, timeout=30) as pool:
            await asyncio.gather(*(pool.register(name, arcface(values)) for name, values in people.items()))
            results = await asyncio.gather(
                *(pool.authenticate(name, arcface(nearby_values(values, rng))) for name, values in people.items())
            )
            self.assertTrue(all(result.authenticated for result in results))
            identified = await asyncio.gather(*(pool.identify(arcface(values)) for values in people.values()))
            self.assertEqual([result.matches[0].identifier for result in identified], list(people))
            self.assertEqual(pool.in_flight(), [0, 0, 0])
            futures = [await pool.submit(ops.list_galleries()) for _ in range(9)]
            await asyncio.gather(*futures)
            self.assertEqual(pool.in_flight(), [0, 0, 0])
            # Every member took calls, each on the one connection it opened.
            self.assertEqual([client.connections_opened for client in pool.clients], [1, 1, 1])
            listed = [identifier async for identifier in pool.iter_identifiers()]
            self.assertTrue(set(people) <= set(listed))


if __name__ == "__main__":
    unittest.main()
