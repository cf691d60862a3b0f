"""wait_for_episode on a failed episode, and the retry that brings it back."""

from __future__ import annotations

import time
import unittest
from unittest import mock

from harness import FaultProxy, fast_client, server

import memory_service._client
from memory_service import (
    APITimeoutError,
    AuthenticationError,
    MemoryClient,
    NotFoundError,
    ValidationError,
    WaitTimeoutError,
)


class FailedEpisode(unittest.TestCase):
    def test_wait_returns_a_failed_episode_and_retry_completes_it(self) -> None:
        s = server()
        client = fast_client(MemoryClient)
        self.addCleanup(client.close)
        thread = client.threads.create("py/failed-episode")
        client.threads.add_message(thread["threadId"], role="user", content="I live in Faro and I am a baker.")
        s.command("fail-chat 1")  # the summary's model call fails once
        ended = client.threads.end(thread["threadId"])
        failed = client.wait_for_episode(thread_id=thread["threadId"], timeout=60)
        self.assertEqual((failed["episodeId"], failed["status"]), (ended["episodeId"], "failed"))
        self.assertTrue(failed["error"])

        self.assertEqual(client.episodes.retry(failed["episodeId"]), {"episodeId": failed["episodeId"], "status": "pending"})
        done = client.wait_for_episode(failed["episodeId"], facts=True, timeout=60)
        self.assertEqual(done["status"], "completed")
        self.assertEqual(done["retryCount"], 1)
        self.assertIn("Faro", client.recall("py/failed-episode", "Where does the user live?")["context"])
        with self.assertRaises(ValidationError):
            client.episodes.retry(failed["episodeId"])  # no longer failed


class WaitForEpisode(unittest.TestCase):
    def setUp(self) -> None:
        self.client = fast_client(MemoryClient)
        self.addCleanup(self.client.close)

    def ended(self, dataset: str, words: str) -> str:
        thread = self.client.threads.create(dataset)["threadId"]
        self.client.threads.add_message(thread, role="user", content=words)
        self.client.threads.end(thread)
        return thread

    def test_by_thread_finds_its_episode_past_the_first_page_of_the_dataset(self) -> None:
        dataset = "py/wait-pages"
        first = self.ended(dataset, "I live in Braga.")
        self.client.wait_for_episode(thread_id=first, timeout=60)
        for city in ("Porto", "Evora", "Tavira"):
            self.client.wait_for_episode(thread_id=self.ended(dataset, f"I went to {city}."), timeout=60)
        # Pages of two: the first thread's episode is on the second page of completed ones.
        with mock.patch.object(memory_service._client, "_PAGE", 2):
            found = self.client.wait_for_episode(thread_id=first, timeout=5)
        self.assertEqual((found["threadId"], found["status"]), (first, "completed"))

    def test_by_thread_finds_episodes_that_ended_at_the_same_instant_past_a_page(self) -> None:
        dataset = "py/wait-ties"
        threads = [self.client.threads.create(dataset)["threadId"] for _ in range(3)]
        # One batch across the threads: every message, and so every episode's end, at one instant.
        self.client.add_messages(
            [{"threadId": t, "role": "user", "content": f"I collect stamps, {i}."} for i, t in enumerate(threads)]
        )
        for thread in threads:
            self.client.threads.end(thread)
            self.client.wait_for_episode(thread_id=thread, timeout=60)
        ended = {e["endedAt"] for e in self.client.episodes.list(dataset, limit=10)["episodes"]}
        self.assertEqual(len(ended), 1)
        # Pages of one: two of the three are past the first page, at the same endedAt.
        with mock.patch.object(memory_service._client, "_PAGE", 1):
            for thread in threads:
                found = self.client.wait_for_episode(thread_id=thread, timeout=5)
                self.assertEqual((found["threadId"], found["status"]), (thread, "completed"))

    def test_an_archived_episode_is_returned_at_once(self) -> None:
        thread = self.ended("py/wait-archived", "I live in Coimbra.")
        episode = self.client.wait_for_episode(thread_id=thread, timeout=60)
        self.client.episodes.delete(episode["episodeId"])
        archived = self.client.wait_for_episode(episode["episodeId"], timeout=5)
        self.assertEqual(archived["status"], "archived")


class WaitThroughFailures(unittest.TestCase):
    """wait_for_episode polls on through an outage until its deadline, and keeps that deadline
    however the service fails."""

    def setUp(self) -> None:
        self.proxy = FaultProxy(server().url)
        self.addCleanup(self.proxy.close)
        self.client = fast_client(MemoryClient, url=self.proxy.url)
        self.addCleanup(self.client.close)

    def ended(self, dataset: str) -> str:
        thread = self.client.threads.create(dataset)["threadId"]
        self.client.threads.add_message(thread, role="user", content="I live in Lagos.")
        return self.client.threads.end(thread)["episodeId"]

    def test_polls_go_on_through_5xx_and_lost_connections(self) -> None:
        episode_id = self.ended("py/wait-outage")
        self.proxy.fail("GET", "/v1/memory/episodic/episodes/", times=5, status=503)
        self.proxy.fail("GET", "/v1/memory/episodic/episodes/", reset=True)
        episode = self.client.wait_for_episode(episode_id, timeout=10, poll_interval=0.05)
        self.assertEqual(episode["status"], "completed")
        statuses = [s.status for s in self.proxy.requests("GET", "/v1/memory/episodic/episodes/")]
        self.assertEqual(statuses[:6], [503, 503, 503, 503, 503, 0])
        # By thread too (its list calls): a failed poll is polled again.
        thread = self.client.threads.create("py/wait-outage-thread")["threadId"]
        self.client.threads.add_message(thread, role="user", content="I live in Sines.")
        self.client.threads.end(thread)
        self.proxy.fail("GET", "/v1/memory/episodic/datasets/", times=3, status=502)
        self.assertEqual(self.client.wait_for_episode(thread_id=thread, timeout=10)["status"], "completed")

    def test_a_hung_service_ends_the_wait_at_its_deadline(self) -> None:
        episode_id = self.ended("py/wait-hung")
        self.proxy.fail("GET", "/v1/memory/episodic/episodes/", times=20, delay=3)
        started = time.monotonic()
        with self.assertRaises(WaitTimeoutError) as caught:
            self.client.wait_for_episode(episode_id, timeout=1.0)
        self.assertLess(time.monotonic() - started, 1.8)
        self.assertIsInstance(caught.exception.last_error, APITimeoutError)
        self.assertIn("last error: ", str(caught.exception))
        # A 503 through the deadline: the same, naming it.
        self.proxy.clear()
        self.proxy.fail("GET", "/v1/memory/episodic/episodes/", times=100, status=503)
        with self.assertRaises(WaitTimeoutError) as caught:
            self.client.wait_for_episode(episode_id, timeout=0.5, poll_interval=0.05)
        self.assertIn("Service Unavailable (proxy)", str(caught.exception))
        self.proxy.clear()

    def test_a_4xx_ends_the_wait_at_once(self) -> None:
        started = time.monotonic()
        with self.assertRaises(NotFoundError):
            self.client.wait_for_episode("epi_missing", timeout=10)
        self.proxy.fail("GET", "/v1/memory/episodic/episodes/", status=401, body='{"error":"Invalid API key"}')
        with self.assertRaises(AuthenticationError):
            self.client.wait_for_episode("epi_missing", timeout=10)
        self.assertLess(time.monotonic() - started, 2)


if __name__ == "__main__":
    unittest.main()
