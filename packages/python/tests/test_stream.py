"""A streamed chat reply's ends: the provider dying midway (an ``error`` event) and the caller
leaving early (the service stores no reply either way)."""

from __future__ import annotations

import time
import unittest

from harness import fast_client, server

from memory_service import AsyncMemoryClient, ChatStreamError, MemoryClient


class StreamEnds(unittest.TestCase):
    def setUp(self) -> None:
        self.server = server()
        self.client = fast_client(MemoryClient)
        self.addCleanup(self.client.close)
        self.addCleanup(self.server.command, "chat-text Noted.")
        self.addCleanup(self.server.command, "stream-delay 0")
        self.thread_id = self.client.threads.create("py/stream")["threadId"]

    def roles(self) -> list:
        return [m["role"] for m in self.client.threads.messages(self.thread_id)["messages"]]

    def test_an_error_event_raises_after_the_chunks_that_came(self) -> None:
        self.server.command("chat-text one two three four five six seven eight")
        self.server.command("fail-chat-midstream")
        chunks = []
        with self.assertRaises(ChatStreamError) as caught:
            for chunk in self.client.threads.chat_stream(self.thread_id, content="Count for me"):
                chunks.append(chunk)
        self.assertEqual(str(caught.exception), "Failed to generate reply")
        self.assertGreater(len(chunks), 0)
        self.assertTrue("".join(chunks).startswith("one"))
        self.assertEqual(self.roles(), ["user"])

    def test_an_error_event_raises_with_the_chats_key(self) -> None:
        # A repeat under the key gets the kept events (the text so far, then the error) rather
        # than storing the user's message again, so the exception names it.
        self.server.command("fail-chat-midstream")
        stream = self.client.threads.chat_stream(self.thread_id, content="Count for me", idempotency_key="py-error-event")
        self.assertEqual(stream.idempotency_key, "py-error-event")
        with self.assertRaises(ChatStreamError) as caught:
            stream.text()
        self.assertEqual(caught.exception.idempotency_key, "py-error-event")
        replay = self.client.threads.chat_stream(self.thread_id, content="Count for me", idempotency_key="py-error-event")
        with self.assertRaises(ChatStreamError):
            replay.text()
        self.assertEqual(self.roles(), ["user"])

    def test_closing_early_stores_no_reply(self) -> None:
        words = " ".join(f"w{i}" for i in range(40))
        self.server.command(f"chat-text {words}")
        self.server.command("stream-delay 20")
        before = self.server.command("streams-closed-early")["count"]
        stream = self.client.threads.chat_stream(self.thread_id, content="Talk a lot")
        self.assertEqual(next(stream).strip(), "w0")
        stream.close()
        deadline = time.monotonic() + 5
        while self.server.command("streams-closed-early")["count"] == before and time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertEqual(self.server.command("streams-closed-early")["count"], before + 1)
        time.sleep(0.2)  # longer than the rest of the reply would have taken
        self.assertEqual(self.roles(), ["user"])
        self.assertIsNone(stream.reply)


class AsyncStreamEnds(unittest.IsolatedAsyncioTestCase):
    @classmethod
    def setUpClass(cls) -> None:
        server()

    async def test_an_error_event_raises(self) -> None:
        s = server()
        self.addCleanup(s.command, "chat-text Noted.")
        s.command("chat-text one two three four five six")
        s.command("fail-chat-midstream")
        async with fast_client(AsyncMemoryClient) as client:
            thread = await client.threads.create("py/stream-async")
            stream = await client.threads.chat_stream(thread["threadId"], content="Count")
            chunks = []
            with self.assertRaises(ChatStreamError) as caught:
                async for chunk in stream:
                    chunks.append(chunk)
            self.assertGreater(len(chunks), 0)
            self.assertIsNone(stream.reply)
            # The chat's automatic key, on the stream and on its exception.
            self.assertIsNotNone(stream.idempotency_key)
            self.assertEqual(caught.exception.idempotency_key, stream.idempotency_key)


if __name__ == "__main__":
    unittest.main()
