"""The asyncio client against the real service: the loop, streaming, errors, retries through a
failing proxy, and calls in flight together."""

from __future__ import annotations

import asyncio
import time
import unittest

from harness import FaultProxy, fast_client, server

from memory_service import (
    AsyncChatStream,
    AsyncMemoryClient,
    InternalServerError,
    NotFoundError,
    ValidationError,
    WaitTimeoutError,
)


class AsyncClient(unittest.IsolatedAsyncioTestCase):
    @classmethod
    def setUpClass(cls) -> None:
        server()  # started (once per process) outside the event loop

    async def asyncSetUp(self) -> None:
        self.proxy = FaultProxy(server().url)
        self.client = fast_client(AsyncMemoryClient, url=self.proxy.url)

    async def asyncTearDown(self) -> None:
        await self.client.aclose()
        await asyncio.get_running_loop().run_in_executor(None, self.proxy.close)

    async def test_the_loop(self) -> None:
        client = self.client
        thread = await client.threads.create("py/async")
        thread_id = thread["threadId"]
        await client.threads.add_messages(
            thread_id,
            [
                {"role": "user", "content": "I live in Porto and I work as a teacher."},
                {"role": "assistant", "content": "Porto is lovely."},
            ],
        )
        stream = await client.threads.chat_stream(thread_id, content="Tell me about Porto.")
        self.assertIsInstance(stream, AsyncChatStream)
        async with stream:
            text = await stream.text()
        self.assertEqual(text, "Noted.")
        assert stream.reply is not None
        self.assertEqual(stream.reply["reply"]["content"], "Noted.")

        ended = await client.threads.end(thread_id)
        episode = await client.wait_for_episode(thread_id=thread_id, facts=True, timeout=60)
        self.assertEqual((episode["episodeId"], episode["status"]), (ended["episodeId"], "completed"))
        recalled = await client.recall("py/async", "Where does the user live?")
        self.assertIn("Porto", recalled["context"])
        facts = await client.facts.list("py/async")
        self.assertGreater(facts["total"], 0)
        erased = await client.datasets.delete("py/async")
        self.assertEqual(erased["deleted"]["threads"], 1)

    async def test_errors_by_status(self) -> None:
        with self.assertRaises(NotFoundError) as caught:
            await self.client.threads.get("thr_unknown")
        self.assertEqual(caught.exception.body, {"error": "Thread not found"})
        with self.assertRaises(ValidationError) as invalid:
            await self.client.episodes.list("py/async-errors", status="archived")  # type: ignore[arg-type]
        self.assertEqual(invalid.exception.issues[0]["path"], ["status"])

    async def test_retries_until_the_service_recovers_and_chat_is_not_retried_on_5xx(self) -> None:
        self.proxy.fail("POST", "/v1/threads", times=2, status=503)
        thread = await self.client.threads.create("py/async-retry")
        sent = self.proxy.requests("POST", "/v1/threads")
        self.assertEqual([s.status for s in sent], [503, 503, 201])
        self.assertEqual(len({s.idempotency_key for s in sent}), 1)
        self.proxy.fail("POST", "/v1/memory/working/threads/", status=502)
        with self.assertRaises(InternalServerError):
            await self.client.threads.chat(thread["threadId"], content="Hi")
        self.assertEqual(len(self.proxy.requests("POST", "/v1/memory/working/threads/")), 1)

    async def test_a_chat_stream_whose_answer_was_lost_before_its_headers_is_replayed_under_its_key(self) -> None:
        thread_id = (await self.client.threads.create("py/async-stream-retry"))["threadId"]
        path = f"/v1/memory/working/threads/{thread_id}/chat"
        self.proxy.fail("POST", path, lose_answer=True)
        stream = await self.client.threads.chat_stream(thread_id, content="Only once, please.")
        async with stream:
            self.assertEqual(await stream.text(), "Noted.")
        sent = self.proxy.requests("POST", path)
        self.assertEqual(len(sent), 2)
        self.assertEqual(len({s.idempotency_key for s in sent}), 1)
        self.assertEqual((sent[1].status, sent[1].replayed), (200, True))
        messages = (await self.client.threads.messages(thread_id, order="asc"))["messages"]
        self.assertEqual([m["role"] for m in messages], ["user", "assistant"])

    async def test_calls_in_flight_together_do_not_block_the_loop(self) -> None:
        thread = await self.client.threads.create("py/async-many")
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.001)

        running = asyncio.ensure_future(ticker())
        self.proxy.fail("GET", "/v1/threads/", delay=0.3)
        started = time.monotonic()
        results = await asyncio.gather(
            self.client.threads.get(thread["threadId"]),
            *(
                self.client.threads.add_message(thread["threadId"], role="user", content=f"message {i}")
                for i in range(10)
            ),
        )
        running.cancel()
        self.assertLess(time.monotonic() - started, 5)
        self.assertGreater(ticks, 10)  # the event loop kept running while the slow call waited
        self.assertEqual(sorted(r["sequenceNumber"] for r in results[1:]), list(range(1, 11)))

    async def test_wait_for_episode_times_out(self) -> None:
        thread = await self.client.threads.create("py/async-wait")
        with self.assertRaises(WaitTimeoutError) as caught:
            await self.client.wait_for_episode(thread_id=thread["threadId"], timeout=0.3, poll_interval=0.1)
        self.assertIsNone(caught.exception.episode)  # never ended: no episode

    async def test_wait_for_episode_polls_through_an_outage_and_keeps_its_deadline(self) -> None:
        thread = (await self.client.threads.create("py/async-wait-outage"))["threadId"]
        await self.client.threads.add_message(thread, role="user", content="I live in Tomar.")
        episode_id = (await self.client.threads.end(thread))["episodeId"]
        self.proxy.fail("GET", "/v1/memory/episodic/datasets/", times=4, status=503)
        episode = await self.client.wait_for_episode(thread_id=thread, timeout=10, poll_interval=0.05)
        self.assertEqual(episode["episodeId"], episode_id)
        self.proxy.fail("GET", "/v1/memory/episodic/episodes/", times=20, delay=3)
        started = time.monotonic()
        with self.assertRaises(WaitTimeoutError) as caught:
            await self.client.wait_for_episode(episode_id, timeout=1.0)
        self.assertLess(time.monotonic() - started, 1.8)
        self.assertIsNotNone(caught.exception.last_error)
        self.proxy.clear()
        with self.assertRaises(NotFoundError):
            await self.client.wait_for_episode("epi_missing", timeout=10)



class AsyncWaitByThread(unittest.IsolatedAsyncioTestCase):
    async def test_reads_the_status_lists_one_after_the_other_in_status_order(self) -> None:
        # Read together, an episode completing between the reads could be in neither the
        # processing list (answered after) nor the completed one (answered before), and the wait
        # returned the thread's previous episode. Here the new episode completes as soon as the
        # completed list has been answered; "processing" is answered once "completed" has been
        # (or 0.2 s later): read in order, the episode is seen processing, then completed.
        client = AsyncMemoryClient("http://127.0.0.1:9", "mk_x")
        self.addAsyncCleanup(client.aclose)
        old = {"episodeId": "epi_old", "threadId": "thr_1", "status": "completed", "createdAt": "2026-01-01T00:00:00Z"}
        new = {"episodeId": "epi_new", "threadId": "thr_1", "status": "processing", "createdAt": "2026-01-02T00:00:00Z"}
        completed_read = asyncio.Event()
        reads: list = []
        in_flight = [0, 0]  # now, most at once

        async def get(thread_id: str, **_: object) -> dict:
            return {"threadId": thread_id, "dataset": "py/order"}

        async def list_episodes(dataset: str, *, status: str, **_: object) -> dict:
            in_flight[0] += 1
            in_flight[1] = max(in_flight[1], in_flight[0])
            try:
                reads.append(status)
                if status == "processing":
                    try:
                        await asyncio.wait_for(completed_read.wait(), 0.2)
                    except asyncio.TimeoutError:
                        pass
                else:
                    await asyncio.sleep(0)
                episodes = [e for e in (new, old) if e["status"] == status]
                if status == "completed" and new["status"] == "processing":
                    new["status"] = "completed"  # just after this read
                    completed_read.set()
                return {"episodes": episodes, "hasMore": False}
            finally:
                in_flight[0] -= 1

        client.threads.get = get  # type: ignore[method-assign]
        client.episodes.list = list_episodes  # type: ignore[method-assign]
        episode = await client.wait_for_episode(thread_id="thr_1", timeout=5, poll_interval=0.01)
        self.assertEqual(episode["episodeId"], "epi_new")
        self.assertEqual(in_flight[1], 1)
        self.assertEqual(reads[:4], ["pending", "processing", "completed", "failed"])

if __name__ == "__main__":
    unittest.main()
