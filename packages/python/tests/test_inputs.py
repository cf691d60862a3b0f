"""Values the client cannot send as they are: refused before sending, with the connection left
usable, or sent in a form the service takes."""

from __future__ import annotations

import unittest

from harness import FaultProxy, fast_client, server

from memory_service import InvalidRequestError, MemoryClient, PayloadTooLargeError


class Inputs(unittest.TestCase):
    def setUp(self) -> None:
        self.proxy = FaultProxy(server().url)
        self.addCleanup(self.proxy.close)
        self.client = fast_client(MemoryClient, url=self.proxy.url)
        self.addCleanup(self.client.close)

    def test_a_header_value_http_client_cannot_send_is_refused_and_the_next_call_works(self) -> None:
        thread = self.client.threads.create("py/inputs")
        for key in ("ключ", "x\r\nX-Injected: 1", "k" * 256):
            with self.assertRaises(InvalidRequestError):
                self.client.threads.add_message(thread["threadId"], role="user", content="a", idempotency_key=key)
        # The thread's connection was not left half-used: the next call goes through.
        added = self.client.threads.add_message(thread["threadId"], role="user", content="b", idempotency_key=False)
        self.assertEqual(added["sequenceNumber"], 1)
        with self.assertRaises(InvalidRequestError):
            MemoryClient(self.proxy.url, "mk_ключ")
        with self.assertRaises(InvalidRequestError):
            MemoryClient(self.proxy.url, "mk_x", headers={"X-Team": "a\nb"})

    def test_an_unpaired_surrogate_is_sent_escaped_and_stored_as_the_replacement_character(self) -> None:
        thread = self.client.threads.create("py/surrogate")
        self.client.threads.add_message(thread["threadId"], role="user", content="a\ud83d")
        stored = self.client.threads.messages(thread["threadId"])["messages"][0]["content"]
        self.assertEqual(stored, "a\ufffd")

    def test_a_body_over_the_service_limit_is_refused_before_it_is_sent(self) -> None:
        thread = self.client.threads.create("py/too-large")
        before = len(self.proxy.seen)
        with self.assertRaises(PayloadTooLargeError) as caught:
            self.client.threads.add_message(thread["threadId"], role="user", content="x" * 8_000_000)
        self.assertEqual(caught.exception.status, 413)
        self.assertEqual(caught.exception.message, "Request body too large (limit 1 MB)")
        with self.assertRaises(PayloadTooLargeError) as batch:
            self.client.threads.add_messages(thread["threadId"], [{"role": "user", "content": "y" * 6000}] * 1000)
        self.assertEqual(batch.exception.message, "Request body too large (limit 5 MB for a batch)")
        self.assertEqual(len(self.proxy.seen), before)
        # Just under the limit goes out and is stored.
        added = self.client.threads.add_message(thread["threadId"], role="user", content="z" * 1_000_000)
        self.assertEqual(added["sequenceNumber"], 1)


if __name__ == "__main__":
    unittest.main()
