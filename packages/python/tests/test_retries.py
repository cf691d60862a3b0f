"""Retries, timeouts and idempotent replay through a real proxy that fails, then recovers."""

from __future__ import annotations

import time
import unittest
from typing import List

from harness import FaultProxy, fast_client, server

from memory_service import (
    APIError,
    APIConnectionError,
    APITimeoutError,
    ConflictError,
    InternalServerError,
    InvalidResponseError,
    MemoryClient,
    NotFoundError,
    ProviderUnavailableError,
    RetryEvent,
    ValidationError,
)
from memory_service._retry import backoff, parse_retry_after


class Retries(unittest.TestCase):
    def setUp(self) -> None:
        self.proxy = FaultProxy(server().url)
        self.addCleanup(self.proxy.close)
        self.events: List[RetryEvent] = []
        self.client = fast_client(MemoryClient, url=self.proxy.url, on_retry=self.events.append)
        self.addCleanup(self.client.close)

    def test_a_read_is_retried_on_503_until_the_service_recovers(self) -> None:
        self.proxy.fail("POST", "/v1/memory/recall", times=2, status=503)
        self.assertEqual(self.client.recall("py/retry-read")["context"], "")
        self.assertEqual([s.status for s in self.proxy.requests("POST", "/v1/memory/recall")], [503, 503, 200])
        self.assertEqual([e.retry for e in self.events], [1, 2])
        self.assertIsInstance(self.events[0].error, ProviderUnavailableError)

    def test_a_write_keeps_its_key_across_retries_and_writes_once(self) -> None:
        self.proxy.fail("POST", "/v1/threads", times=2, status=503)
        thread = self.client.threads.create("py/retry-write")
        sent = self.proxy.requests("POST", "/v1/threads")
        self.assertEqual(len(sent), 3)
        keys = {s.idempotency_key for s in sent}
        self.assertEqual(len(keys), 1)
        self.assertIsNotNone(keys.pop())
        self.assertEqual([t["threadId"] for t in self.client.datasets.export("py/retry-write")["threads"]], [thread["threadId"]])
        # The next logical call gets a new key.
        self.client.threads.create("py/retry-write")
        self.assertNotEqual(self.proxy.requests("POST", "/v1/threads")[-1].idempotency_key, sent[0].idempotency_key)

    def test_a_lost_answer_is_replayed_not_written_twice(self) -> None:
        thread = self.client.threads.create("py/lost")
        self.proxy.fail("POST", "/v1/memory/working/threads/", lose_answer=True)
        added = self.client.threads.add_message(thread["threadId"], role="user", content="Only once, please.")
        sent = self.proxy.requests("POST", "/v1/memory/working/threads/")
        self.assertEqual(len(sent), 2)
        self.assertEqual(sent[0].idempotency_key, sent[1].idempotency_key)
        self.assertTrue(sent[1].replayed)  # the service answered the retry from the first answer
        self.assertEqual(added["sequenceNumber"], 1)
        self.assertEqual(self.client.threads.messages(thread["threadId"])["total"], 1)

    def test_a_reset_connection_is_retried(self) -> None:
        self.proxy.fail("GET", "/v1/memory/semantic/", reset=True)
        self.assertEqual(self.client.facts.list("py/reset")["facts"], [])
        self.assertEqual(len(self.proxy.requests("GET", "/v1/memory/semantic/")), 2)
        self.assertIsInstance(self.events[0].error, APIConnectionError)

    def test_a_reset_kept_alive_connection_counts_as_a_retry(self) -> None:
        client = fast_client(MemoryClient, url=self.proxy.url, max_retries=2, on_retry=self.events.append)
        self.addCleanup(client.close)
        client.facts.list("py/reset-count")  # a kept-alive connection
        self.proxy.fail("GET", "/v1/memory/semantic/", times=10, reset=True)
        with self.assertRaises(APIConnectionError):
            client.facts.list("py/reset-count")
        # The first attempt and two retries, each reported: no attempt beyond max_retries.
        self.assertEqual(len(self.proxy.requests("GET", "/v1/memory/semantic/")), 1 + 3)
        self.assertEqual([e.retry for e in self.events], [1, 2])
        self.proxy.clear()
        self.proxy.fail("GET", "/v1/memory/semantic/", reset=True)
        with self.assertRaises(APIConnectionError):
            client.facts.list("py/reset-count", retries=0)
        self.assertEqual(len(self.proxy.requests("GET", "/v1/memory/semantic/")), 1 + 3 + 1)

    def test_409_in_progress_is_retried_for_a_write_not_for_a_read(self) -> None:
        self.proxy.fail("POST", "/v1/threads", status=409, body='{"error":"still running"}')
        self.client.threads.create("py/409")
        self.assertEqual([s.status for s in self.proxy.requests("POST", "/v1/threads")], [409, 201])
        self.proxy.fail("GET", "/v1/threads/", status=409, body='{"error":"conflict"}')
        with self.assertRaises(ConflictError):
            self.client.threads.get("thr_any")
        self.assertEqual(len(self.proxy.requests("GET", "/v1/threads/")), 1)

    def test_a_write_past_its_timeout_waits_out_the_409s_and_gets_the_stored_answer(self) -> None:
        # The model takes 1.5 s, an attempt 1 s: the first attempt times out, its retries meet it
        # still running (409) and wait until its answer is stored, then get it replayed.
        thread = self.client.threads.create("py/slow-chat")
        path = f"/v1/memory/working/threads/{thread['threadId']}/chat"
        server().command("chat-latency 1500")
        self.addCleanup(server().command, "chat-latency 0")
        reply = self.client.threads.chat(thread["threadId"], content="Take your time.", timeout=1.0)
        self.assertEqual(reply["reply"]["content"], "Noted.")
        sent = self.proxy.requests("POST", path)
        self.assertGreaterEqual(len(sent), 3)
        self.assertTrue(all(s.status == 409 for s in sent[1:-1]), sent)
        self.assertEqual((sent[-1].status, sent[-1].replayed), (200, True))
        self.assertEqual(len({s.idempotency_key for s in sent}), 1)
        self.assertEqual(self.client.threads.messages(thread["threadId"])["total"], 2)

    def test_409_waits_do_not_use_up_retries_and_a_failed_write_carries_its_key(self) -> None:
        client = fast_client(MemoryClient, url=self.proxy.url, max_retries=1, timeout=1.0)
        self.addCleanup(client.close)
        self.proxy.fail("POST", "/v1/threads", times=4, status=409, retry_after=0)
        client.threads.create("py/409-wait")
        self.assertEqual([s.status for s in self.proxy.requests("POST", "/v1/threads")], [409, 409, 409, 409, 201])

        # Still running when the call's budget ((retries + 1) x timeout) is spent: the 409, with the key.
        self.proxy.fail("POST", "/v1/threads", times=50, status=409, retry_after=0)
        started = time.monotonic()
        with self.assertRaises(ConflictError) as caught:
            client.threads.create("py/409-wait", timeout=0.3, retries=0)
        self.assertLess(time.monotonic() - started, 1.0)
        self.assertEqual(caught.exception.idempotency_key, self.proxy.seen[-1].idempotency_key)
        self.assertIsNotNone(caught.exception.idempotency_key)
        self.proxy.clear()
        self.proxy.fail("POST", "/v1/threads", delay=0.6)
        with self.assertRaises(APITimeoutError) as slow:
            client.threads.create("py/409-wait", timeout=0.2, retries=0)
        key = slow.exception.idempotency_key
        self.assertEqual(key, self.proxy.seen[-1].idempotency_key)
        # Resumed under its key: one thread, whichever of the two requests ran first.
        time.sleep(0.8)  # the slow one has reached the service
        resumed = client.threads.create("py/409-wait", idempotency_key=key)
        self.assertTrue(self.proxy.seen[-1].replayed)
        threads = [t["threadId"] for t in client.datasets.export("py/409-wait")["threads"]]
        self.assertEqual(len(threads), 2)
        self.assertIn(resumed["threadId"], threads)

    def test_other_4xx_are_never_retried(self) -> None:
        with self.assertRaises(NotFoundError):
            self.client.threads.get("thr_unknown")
        with self.assertRaises(ValidationError):
            self.client.recall("py/4xx", limit=1000)
        self.proxy.fail("POST", "/v1/threads", status=400, body='{"error":"Validation error","issues":[]}')
        with self.assertRaises(ValidationError):
            self.client.threads.create("py/4xx")
        self.assertEqual(len(self.proxy.seen), 3)
        self.assertEqual(self.events, [])

    def test_chat_is_never_retried_on_a_5xx(self) -> None:
        thread = self.client.threads.create("py/chat-5xx")
        self.proxy.fail("POST", f"/v1/memory/working/threads/{thread['threadId']}/chat", times=2, status=500)
        with self.assertRaises(InternalServerError):
            self.client.threads.chat(thread["threadId"], content="Hello?")
        with self.assertRaises(InternalServerError):
            next(iter(self.client.threads.chat_stream(thread["threadId"], content="Hello?")))
        self.assertEqual(len(self.proxy.requests("POST", f"/v1/memory/working/threads/{thread['threadId']}/chat")), 2)
        # A connection error before any answer is retried (the key makes it safe).
        self.proxy.fail("POST", f"/v1/memory/working/threads/{thread['threadId']}/chat", reset=True)
        self.assertEqual(self.client.threads.chat(thread["threadId"], content="Hello?")["reply"]["content"], "Noted.")

    def roles(self, thread_id: str) -> List[str]:
        return [m["role"] for m in self.client.threads.messages(thread_id, order="asc")["messages"]]

    def test_a_chat_stream_is_retried_under_its_key_until_its_headers_arrive(self) -> None:
        # Safe since the service keeps a streamed chat's events under its key: a repeat meets the
        # first request still streaming (409) or gets what it kept, and the turn is stored once.
        faults = {
            "a timeout before its headers": {"delay": 2.0},
            "a connection cut before the service saw it": {"reset": True},
            "an answer lost whole": {"lose_answer": True},
        }
        for name, fault in faults.items():
            with self.subTest(name):
                self.events.clear()
                thread_id = self.client.threads.create("py/stream-retry")["threadId"]
                path = f"/v1/memory/working/threads/{thread_id}/chat"
                self.proxy.fail("POST", path, **fault)
                # Short only where the fault is a timeout: the others must fail as named.
                timeout = 0.5 if "delay" in fault else 5.0
                stream = self.client.threads.chat_stream(thread_id, content="Only once, please.", timeout=timeout, retries=3)
                self.assertEqual(stream.text(), "Noted.")
                assert stream.reply is not None
                self.assertEqual(stream.reply["reply"]["content"], "Noted.")
                sent = self.proxy.requests("POST", path)
                self.assertGreaterEqual(len(sent), 2)
                self.assertEqual(len({s.idempotency_key for s in sent}), 1)
                self.assertIsNotNone(sent[0].idempotency_key)
                self.assertEqual(self.events[0].error.idempotency_key, sent[0].idempotency_key)
                if "lose_answer" in fault:
                    self.assertEqual((sent[-1].status, sent[-1].replayed), (200, True))
                self.assertEqual(self.roles(thread_id), ["user", "assistant"])

    def test_a_chat_stream_past_its_timeout_waits_out_the_409s_and_gets_the_kept_events(self) -> None:
        # The model takes 1.5 s, an attempt 1 s: the first attempt times out before its headers,
        # the next meets it still running (409) and waits until it has ended, then gets its events.
        thread_id = self.client.threads.create("py/stream-slow")["threadId"]
        path = f"/v1/memory/working/threads/{thread_id}/chat"
        server().command("chat-latency 1500")
        self.addCleanup(server().command, "chat-latency 0")
        stream = self.client.threads.chat_stream(thread_id, content="Take your time.", timeout=1.0)
        self.assertEqual(stream.text(), "Noted.")
        sent = self.proxy.requests("POST", path)
        self.assertGreaterEqual(len(sent), 3)
        self.assertTrue(all(s.status == 409 for s in sent[1:-1]), sent)
        self.assertEqual((sent[-1].status, sent[-1].replayed), (200, True))
        self.assertEqual(len({s.idempotency_key for s in sent}), 1)
        self.assertEqual(self.roles(thread_id), ["user", "assistant"])

    def test_a_chat_stream_is_not_asked_again_once_it_has_started(self) -> None:
        server().command("chat-text one two three four five six seven eight")
        self.addCleanup(server().command, "chat-text Noted.")
        thread_id = self.client.threads.create("py/stream-cut")["threadId"]
        path = f"/v1/memory/working/threads/{thread_id}/chat"
        self.proxy.fail("POST", path, cut_after_start=True)
        stream = self.client.threads.chat_stream(thread_id, content="Count for me.", retries=3)
        with self.assertRaises(APIConnectionError):
            stream.text()
        self.assertIsNone(stream.reply)
        self.assertEqual(len(self.proxy.requests("POST", path)), 1)

        # Stalled: the start came, then nothing for longer than the timeout.
        server().command("stream-delay 1000")
        self.addCleanup(server().command, "stream-delay 0")
        thread_id = self.client.threads.create("py/stream-stalled")["threadId"]
        path = f"/v1/memory/working/threads/{thread_id}/chat"
        stream = self.client.threads.chat_stream(thread_id, content="Count slowly.", timeout=0.3, retries=3)
        with self.assertRaises(APITimeoutError) as caught:
            stream.text()
        self.assertIn("stalled", str(caught.exception))
        self.assertIsNotNone(stream.started)
        self.assertEqual(len(self.proxy.requests("POST", path)), 1)
        self.assertEqual(self.events, [])

    def test_a_chat_stream_that_breaks_after_it_started_raises_with_its_key(self) -> None:
        # README: every exception of a keyed write carries its key, the stream's too (raised after
        # the call returned): a repeat under it gets the kept events, not a second turn.
        server().command("chat-text one two three four five six seven eight")
        self.addCleanup(server().command, "chat-text Noted.")
        thread_id = self.client.threads.create("py/stream-cut-key")["threadId"]
        path = f"/v1/memory/working/threads/{thread_id}/chat"
        self.proxy.fail("POST", path, cut_after_start=True)
        stream = self.client.threads.chat_stream(thread_id, content="Count for me.")
        with self.assertRaises(APIConnectionError) as cut:
            stream.text()
        sent = self.proxy.requests("POST", path)[0].idempotency_key
        self.assertIsNotNone(sent)
        self.assertEqual((stream.idempotency_key, cut.exception.idempotency_key), (sent, sent))

        server().command("stream-delay 1000")
        self.addCleanup(server().command, "stream-delay 0")
        thread_id = self.client.threads.create("py/stream-stalled-key")["threadId"]
        stream = self.client.threads.chat_stream(thread_id, content="Count slowly.", timeout=0.3, idempotency_key="py-stalled-1")
        with self.assertRaises(APITimeoutError) as stalled:
            stream.text()
        self.assertEqual((stream.idempotency_key, stalled.exception.idempotency_key), ("py-stalled-1", "py-stalled-1"))

        # Sent without a key: none to report.
        server().command("stream-delay 0")
        thread_id = self.client.threads.create("py/stream-cut-unkeyed")["threadId"]
        path = f"/v1/memory/working/threads/{thread_id}/chat"
        self.proxy.fail("POST", path, cut_after_start=True)
        stream = self.client.threads.chat_stream(thread_id, content="Count for me.", idempotency_key=False)
        with self.assertRaises(APIConnectionError) as unkeyed:
            stream.text()
        self.assertIsNone(stream.idempotency_key)
        self.assertIsNone(unkeyed.exception.idempotency_key)

    def test_timeout_zero_is_no_limit(self) -> None:
        # As the retry budget reads it (and the TypeScript client's timeoutMs: 0): a socket timeout
        # of 0 would make the socket non-blocking, and every call failed with BlockingIOError.
        client = fast_client(MemoryClient, url=self.proxy.url, timeout=0, max_retries=0)
        self.addCleanup(client.close)
        self.assertEqual(client.recall("py/timeout-0")["factCount"], 0)
        thread_id = client.threads.create("py/timeout-0")["threadId"]
        self.assertEqual(client.threads.chat_stream(thread_id, content="Hi.").text(), "Noted.")
        # Per call too, and a delay longer than the client's timeout is waited out.
        self.proxy.fail("GET", "/v1/memory/semantic/", delay=0.5)
        self.assertEqual(self.client.entities.list("py/timeout-0", timeout=0, retries=0)["entities"], [])
        timeouts = [e for e in self.events if isinstance(e.error, APITimeoutError)]
        self.assertEqual(timeouts, [])
        self.proxy.fail("GET", "/v1/memory/semantic/", delay=0.5)
        with self.assertRaises(APITimeoutError):  # still a limit when one is given
            self.client.entities.list("py/timeout-0", timeout=0.2, retries=0)

    def test_a_chat_stream_without_a_key_is_never_retried(self) -> None:
        unkeyed = fast_client(MemoryClient, url=self.proxy.url, idempotency_keys=False, on_retry=self.events.append)
        self.addCleanup(unkeyed.close)
        thread_id = self.client.threads.create("py/stream-unkeyed")["threadId"]
        path = f"/v1/memory/working/threads/{thread_id}/chat"
        self.proxy.fail("POST", path, reset=True)
        with self.assertRaises(APIConnectionError):
            unkeyed.threads.chat_stream(thread_id, content="Once.", retries=3)
        self.proxy.fail("POST", path, reset=True)
        with self.assertRaises(APIConnectionError):
            self.client.threads.chat_stream(thread_id, content="Once.", retries=3, idempotency_key=False)
        sent = self.proxy.requests("POST", path)
        self.assertEqual(len(sent), 2)
        self.assertTrue(all(s.idempotency_key is None for s in sent))
        self.assertEqual(self.events, [])

    def test_retries_run_out_and_the_last_error_keeps_its_body(self) -> None:
        self.proxy.fail("GET", "/v1/memory/episodic/", times=5, status=503)
        with self.assertRaises(ProviderUnavailableError) as caught:
            self.client.episodes.list("py/out", retries=1)
        self.assertEqual(caught.exception.body, {"error": "Service Unavailable (proxy)"})
        self.assertEqual(len(self.proxy.requests("GET", "/v1/memory/episodic/")), 2)

    def test_retry_after_is_a_floor_and_one_too_long_is_not_waited_for(self) -> None:
        client = fast_client(MemoryClient, url=self.proxy.url, backoff_max=5, on_retry=self.events.append)
        self.addCleanup(client.close)
        self.proxy.fail("GET", "/v1/memory/recall/", status=503, retry_after=1)
        client.datasets.export("py/retry-after")
        self.assertGreaterEqual(self.events[0].delay, 1.0)
        self.proxy.fail("GET", "/v1/memory/recall/", status=503, retry_after=120)
        with self.assertRaises(ProviderUnavailableError) as caught:
            client.datasets.export("py/retry-after")
        self.assertEqual(caught.exception.retry_after, 120.0)
        self.assertEqual(len(self.events), 1)

    def test_a_write_without_a_key_is_never_retried(self) -> None:
        self.proxy.fail("POST", "/v1/threads", status=503)
        with self.assertRaises(ProviderUnavailableError):
            self.client.threads.create("py/unkeyed", idempotency_key=False)
        sent = self.proxy.requests("POST", "/v1/threads")
        self.assertEqual(len(sent), 1)
        self.assertIsNone(sent[0].idempotency_key)

    def test_a_connection_the_server_closed_while_idle_is_not_reused(self) -> None:
        thread = self.client.threads.create("py/idle")
        self.proxy.fail("GET", "/v1/threads/", close_after=True)
        self.client.threads.get(thread["threadId"])
        time.sleep(0.1)  # idle, while the close reaches the client
        # Even a write that may not be retried (no key) goes out on a new connection.
        added = self.client.threads.add_message(thread["threadId"], role="user", content="Hi", idempotency_key=False)
        self.assertEqual(added["sequenceNumber"], 1)
        self.assertEqual(len(self.proxy.requests("POST", "/v1/memory/working/threads/")), 1)
        self.assertEqual(self.events, [])

    def test_a_2xx_that_is_not_json_is_retried_and_then_an_invalid_response_error(self) -> None:
        self.proxy.fail("GET", "/v1/threads/", times=3, status=200, body="<html>captive portal</html>")
        with self.assertRaises(InvalidResponseError) as caught:
            self.client.threads.get("thr_any")
        self.assertIsInstance(caught.exception, APIConnectionError)
        self.assertEqual(caught.exception.status, 200)
        self.assertIn("the answer (200) is not JSON: <html>captive portal</html>", str(caught.exception))
        self.assertEqual(len(self.proxy.requests("GET", "/v1/threads/")), 3)

    def test_a_write_whose_2xx_is_not_json_is_retried_under_its_key_and_written_once(self) -> None:
        self.proxy.fail("POST", "/v1/threads", garble=True)
        thread = self.client.threads.create("py/garbled")
        sent = self.proxy.requests("POST", "/v1/threads")
        self.assertEqual([(s.status, s.replayed) for s in sent], [(201, False), (201, True)])
        self.assertEqual(sent[0].idempotency_key, sent[1].idempotency_key)
        self.assertIsInstance(self.events[0].error, InvalidResponseError)
        self.assertEqual([t["threadId"] for t in self.client.datasets.export("py/garbled")["threads"]], [thread["threadId"]])
        # Without a key it is not repeated: the error says what came, with the key-less write's status.
        self.proxy.fail("POST", "/v1/threads", garble=True)
        with self.assertRaises(InvalidResponseError) as caught:
            self.client.threads.create("py/garbled", idempotency_key=False)
        self.assertEqual(caught.exception.status, 201)
        self.assertEqual(len(self.proxy.requests("POST", "/v1/threads")), 3)

    def test_a_timeout_per_call(self) -> None:
        self.proxy.fail("GET", "/v1/memory/semantic/", delay=1.0)
        with self.assertRaises(APITimeoutError):
            self.client.entities.list("py/timeout", timeout=0.2, retries=0)
        # A slow first attempt, then a fast one: the retry gets a fresh budget.
        self.proxy.fail("GET", "/v1/memory/semantic/", delay=1.0)
        self.assertEqual(self.client.entities.list("py/timeout", timeout=0.5)["entities"], [])
        self.assertIsInstance(self.events[-1].error, APITimeoutError)


class ExplicitKeys(unittest.TestCase):
    def test_the_same_key_and_request_is_answered_from_the_first_answer(self) -> None:
        proxy = FaultProxy(server().url)
        self.addCleanup(proxy.close)
        client = fast_client(MemoryClient, url=proxy.url)
        self.addCleanup(client.close)
        first = client.threads.create("py/replay", idempotency_key="py-replay-1")
        again = client.threads.create("py/replay", idempotency_key="py-replay-1")
        self.assertEqual(again, first)
        self.assertEqual([s.replayed for s in proxy.requests("POST", "/v1/threads")], [False, True])
        self.assertEqual(len(client.datasets.export("py/replay")["threads"]), 1)


class Decisions(unittest.TestCase):
    def test_backoff_is_full_jitter_under_a_ceiling(self) -> None:
        self.assertEqual(backoff(0, 0.25, 10, draw=lambda: 0.999), 0.25 * 0.999)
        self.assertEqual(backoff(3, 0.25, 10, draw=lambda: 0.5), 1.0)
        self.assertEqual(backoff(10, 0.25, 10, draw=lambda: 0.5), 5.0)
        self.assertEqual(backoff(0, 0.25, 10, retry_after=2, draw=lambda: 0.5), 2)
        self.assertIsNone(backoff(0, 0.25, 10, retry_after=11))

    def test_retry_after_as_seconds_or_a_date(self) -> None:
        self.assertEqual(parse_retry_after("3"), 3.0)
        self.assertEqual(parse_retry_after("Thu, 01 Jan 1970 00:01:40 GMT", now=40), 60.0)
        self.assertIsNone(parse_retry_after("soon"))
        self.assertIsNone(parse_retry_after(None))


if __name__ == "__main__":
    unittest.main()
