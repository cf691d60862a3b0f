"""wait_for_episode on a failed episode, and the retry that brings it back."""

from __future__ import annotations

import unittest

from harness import fast_client, server

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


if __name__ == "__main__":
    unittest.main()
