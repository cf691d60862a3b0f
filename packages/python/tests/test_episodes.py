"""wait_for_episode on a failed episode, and the retry that brings it back."""

from __future__ import annotations

import unittest
from unittest import mock

from harness import fast_client, server

import memory_service._client
from memory_service import MemoryClient, ValidationError


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

    def test_an_archived_episode_is_returned_at_once(self) -> None:
        thread = self.ended("py/wait-archived", "I live in Coimbra.")
        episode = self.client.wait_for_episode(thread_id=thread, timeout=60)
        self.client.episodes.delete(episode["episodeId"])
        archived = self.client.wait_for_episode(episode["episodeId"], timeout=5)
        self.assertEqual(archived["status"], "archived")


if __name__ == "__main__":
    unittest.main()
