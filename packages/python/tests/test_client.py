"""The blocking client against the real service: the whole loop, every /v1 operation at least
once (checked against the operations of the served /openapi.json), chat streamed, and the
service's errors as exceptions by status."""

from __future__ import annotations

import os
import re
import unittest
from unittest import mock

from harness import FaultProxy, fast_client, read_json, server

from memory_service import (
    OPERATIONS,
    APIConnectionError,
    AuthenticationError,
    ChatStream,
    IdempotencyKeyReusedError,
    InvalidRequestError,
    MemoryClient,
    MemoryServiceError,
    NotFoundError,
    ValidationError,
)


def template(path: str) -> str:
    """A path template as a regular expression (``{id}`` is one encoded segment)."""
    return "^" + re.sub(r"\\\{[^}]+\\\}", "[^/?]+", re.escape(path)) + r"(\?.*)?$"


class WholeLoop(unittest.TestCase):
    def test_every_operation_from_thread_to_erase(self) -> None:
        s = server()
        # Through a pass-through proxy, so the test can see which operations were called.
        proxy = FaultProxy(s.url)
        self.addCleanup(proxy.close)
        client = MemoryClient(proxy.url, s.new_key())
        self.addCleanup(client.close)
        dataset = "py/loop one"  # reserved characters: path parameters are percent-encoded

        thread = client.threads.create(dataset, tags=["sdk"])
        self.assertEqual(thread["dataset"], dataset)
        self.assertEqual(thread["tags"], ["sdk"])
        thread_id = thread["threadId"]
        self.assertEqual(client.threads.get(thread_id)["threadId"], thread_id)
        self.assertEqual(client.threads.update(thread_id, tags=["sdk", "typed"])["tags"], ["sdk", "typed"])

        added = client.threads.add_message(
            thread_id, role="user", content="Hi! I live in Lisbon and I work as a nurse at Santa Maria."
        )
        self.assertEqual((added["sequenceNumber"], added["role"]), (1, "user"))
        batch = client.threads.add_messages(
            thread_id,
            [{"role": "assistant", "content": "Nice to meet you."}, {"role": "user", "content": "I love hiking in Sintra."}],
        )
        self.assertEqual([m["sequenceNumber"] for m in batch["messages"]], [2, 3])
        # Before any episode: recall asks for the conversation by default, and finds it by a word.
        fresh = client.recall(dataset, "Where do I go hiking?")
        assert fresh["messages"] is not None
        self.assertEqual(fresh["messages"][0]["content"], "I love hiking in Sintra.")
        self.assertEqual(fresh["messages"][0]["threadId"], thread_id)
        self.assertIn("I love hiking in Sintra.", fresh["context"])
        self.assertEqual(len(client.recall(dataset, "hiking", message_limit=1)["messages"] or []), 1)
        plain = client.recall(dataset, "Where do I go hiking?", include=[])
        self.assertIsNone(plain["messages"])
        self.assertNotIn("Sintra", plain["context"])
        other = client.threads.create("py/other")
        across = client.add_messages(
            [
                {"threadId": other["threadId"], "role": "user", "content": "Another thread."},
                {"threadId": thread_id, "role": "assistant", "content": "Sintra is lovely.", "latencyMs": 12},
            ]
        )
        self.assertEqual([m["threadId"] for m in across["messages"]], [other["threadId"], thread_id])

        listed = client.threads.messages(thread_id, limit=2, order="asc")
        self.assertEqual((listed["total"], listed["hasMore"]), (4, True))
        self.assertEqual([m["sequenceNumber"] for m in listed["messages"]], [3, 4])
        window = client.threads.prepare(thread_id, message_limit=3)
        self.assertEqual((window["messageCount"], window["truncated"], len(window["messages"])), (4, True, 3))
        self.assertEqual(client.threads.stats(thread_id)["messageCount"], 4)
        self.assertFalse(client.threads.compact(thread_id)["compacted"])

        reply = client.threads.chat(thread_id, content="What do you think of Lisbon?", recall=False)
        self.assertEqual(reply["threadId"], thread_id)
        self.assertEqual(reply["reply"]["content"], "Noted.")
        stream = client.threads.chat_stream(thread_id, content="And of Sintra?", instructions="Be brief.")
        self.assertIsInstance(stream, ChatStream)
        with stream:
            chunks = list(stream)
        self.assertGreaterEqual(len(chunks), 1)
        self.assertEqual("".join(chunks), "Noted.")
        self.assertIsNotNone(stream.started)
        assert stream.reply is not None
        self.assertEqual(stream.reply["reply"]["content"], "Noted.")
        self.assertEqual(client.threads.stats(thread_id)["messageCount"], 8)

        ended = client.threads.end(thread_id)
        self.assertIsNotNone(ended["episodeId"])
        episode = client.wait_for_episode(ended["episodeId"], facts=True, timeout=60)
        self.assertEqual(episode["status"], "completed")
        self.assertEqual(episode["threadId"], thread_id)
        self.assertIsNotNone(episode["extractionReport"])
        # By thread: the same (newest, finished) episode.
        self.assertEqual(client.wait_for_episode(thread_id=thread_id, timeout=10)["episodeId"], ended["episodeId"])

        facts = client.facts.list(dataset)
        self.assertGreater(facts["total"], 0)
        texts = " ".join(f"{f['predicate']} {f['object']}" for f in facts["facts"]).lower()
        self.assertIn("lisbon", texts)
        entities = client.entities.list(dataset)["entities"]
        self.assertIsInstance(entities, list)
        name = entities[0]["name"] if entities else "Lisbon"
        self.assertIsInstance(client.entities.facts(dataset, name)["facts"], list)
        self.assertEqual(client.entities.facts(dataset, "nobody at all")["facts"], [])

        recalled = client.recall(dataset, "Where does the user live?", include=["raw", "episodes"], limit=5)
        self.assertIn("Lisbon", recalled["context"])
        self.assertGreater(recalled["factCount"], 0)
        assert recalled["facts"] is not None and recalled["episodes"] is not None
        self.assertEqual(len(recalled["facts"]), recalled["factCount"])
        self.assertEqual(client.recall("py/nothing here")["context"], "")

        episodes = client.episodes.list(dataset, status="completed", limit=5)
        self.assertEqual([e["episodeId"] for e in episodes["episodes"]], [ended["episodeId"]])
        self.assertEqual(client.episodes.get(ended["episodeId"])["episode"]["summary"], episode["summary"])
        found = client.episodes.search(dataset, "Lisbon nurse", limit=3)["episodes"]
        self.assertEqual(found[0]["episodeId"], ended["episodeId"])
        self.assertIn("relevanceScore", found[0])
        with self.assertRaises(ValidationError) as retried:
            client.episodes.retry(ended["episodeId"])  # only failed episodes can be retried
        self.assertEqual(retried.exception.message, "Only failed episodes can be retried")

        spent = client.usage(group_by="operation")
        self.assertGreater(spent["total"]["calls"], 0)
        self.assertIn("episode_summary", [g["key"] for g in spent["groups"]])

        exported = client.datasets.export(dataset)
        self.assertEqual(exported["dataset"], dataset)
        self.assertEqual([t["threadId"] for t in exported["threads"]], [thread_id])
        self.assertEqual(len(exported["threads"][0]["messages"]), 8)
        self.assertEqual(len(exported["facts"]), facts["total"])

        fact_id = facts["facts"][0]["factId"]
        self.assertEqual(client.facts.delete(dataset, fact_id)["factId"], fact_id)
        with self.assertRaises(NotFoundError):
            client.facts.delete(dataset, fact_id)  # already invalidated
        self.assertEqual(client.episodes.delete(ended["episodeId"]), {"episodeId": ended["episodeId"], "deleted": True})

        erased = client.datasets.delete(dataset)
        self.assertEqual(erased["deleted"]["threads"], 1)
        self.assertGreater(erased["deleted"]["facts"], 0)
        self.assertEqual(client.datasets.export(dataset)["threads"], [])
        with self.assertRaises(NotFoundError):
            client.threads.get(thread_id)

        # Every /v1 operation of the served document was called at least once.
        document = read_json(f"{s.url}/openapi.json")
        served = [
            (method.upper(), path) for path, item in document["paths"].items() if path.startswith("/v1/") for method in item
        ]
        self.assertEqual(sorted(served), sorted((op.method, op.path) for op in OPERATIONS.values()))
        called = [
            (method, path)
            for method, path in served
            if not any(s.method == method and re.match(template(path), s.path) for s in proxy.seen)
        ]
        self.assertEqual(called, [], "operations the loop never called")


class Errors(unittest.TestCase):
    def setUp(self) -> None:
        self.client = fast_client(MemoryClient)
        self.addCleanup(self.client.close)

    def test_not_found_keeps_the_body(self) -> None:
        with self.assertRaises(NotFoundError) as caught:
            self.client.threads.get("thr_unknown")
        error = caught.exception
        self.assertEqual((error.status, error.message), (404, "Thread not found"))
        self.assertEqual(error.body, {"error": "Thread not found"})
        self.assertEqual(error.request, "GET /v1/threads/thr_unknown")
        self.assertIsInstance(error, MemoryServiceError)

    def test_validation_error_carries_the_issues(self) -> None:
        with self.assertRaises(ValidationError) as caught:
            self.client.recall("py/errors", limit=0)
        error = caught.exception
        self.assertEqual((error.status, error.message), (400, "Validation error"))
        self.assertEqual([issue["path"] for issue in error.issues], [["limit"]])
        self.assertEqual(error.body["issues"], error.issues)
        self.assertIn("code", error.issues[0])

    def test_authentication_error(self) -> None:
        bad = MemoryClient(server().url, "mk_" + "0" * 64)
        self.addCleanup(bad.close)
        with self.assertRaises(AuthenticationError) as caught:
            bad.recall("py/errors")
        self.assertEqual(caught.exception.status, 401)
        self.assertEqual(caught.exception.message, "Invalid API key")

    def test_reusing_a_key_for_another_request(self) -> None:
        self.client.threads.create("py/key-a", idempotency_key="py-reused-key")
        with self.assertRaises(IdempotencyKeyReusedError) as caught:
            self.client.threads.create("py/key-b", idempotency_key="py-reused-key")
        self.assertEqual(caught.exception.status, 422)

    def test_refused_before_sending(self) -> None:
        with self.assertRaises(InvalidRequestError):
            self.client.threads.get("")
        with self.assertRaises(InvalidRequestError):
            self.client.recall("x" * 257)
        with self.assertRaises(InvalidRequestError):
            self.client.threads.add_messages("thr_x", [])
        with self.assertRaises(ValueError):  # InvalidRequestError is a ValueError too
            self.client.threads.add_message("thr_x", role="user", content="")

    def test_a_dot_segment_path_value_is_refused(self) -> None:
        # "." and ".." stay as they are when percent-encoded (and a URL parser folds %2E too):
        # entities.facts(dataset, "..") reached the dataset's fact list.
        calls = {
            "name": lambda v: self.client.entities.facts("py/dots", v),
            "dataset": lambda v: self.client.facts.list(v),
            "thread_id": lambda v: self.client.threads.get(v),
            "episode_id": lambda v: self.client.episodes.delete(v),
            "fact_id": lambda v: self.client.facts.delete("py/dots", v),
        }
        for field, call in calls.items():
            for value in (".", ".."):
                with self.subTest(field=field, value=value):
                    with self.assertRaises(InvalidRequestError) as caught:
                        call(value)
                    self.assertTrue(str(caught.exception).startswith(f"{field}:"), caught.exception)
        # Other dots are ordinary names, and a dataset "." is fine in a body.
        self.assertEqual(self.client.entities.facts("py/dots", "...")["facts"], [])
        self.assertEqual(self.client.facts.list(".a")["facts"], [])
        self.assertEqual(self.client.recall(".")["factCount"], 0)

    def test_an_idempotency_key_the_service_would_refuse_is_refused_before_sending(self) -> None:
        proxy = FaultProxy(server().url)
        self.addCleanup(proxy.close)
        client = fast_client(MemoryClient, url=proxy.url)
        self.addCleanup(client.close)
        # Blank once HTTP trims it, two keys (a comma joins two header lines), empty (it sent no
        # key at all), not printable ASCII, too long, not a string.
        for key in (" ", "   ", "a,b", "", '""', "\t", "clé", "k" * 256, 42):
            with self.subTest(key=key):
                with self.assertRaises(InvalidRequestError) as caught:
                    client.threads.create("py/keys", idempotency_key=key)  # type: ignore[arg-type]
                self.assertIn("idempotency_key", str(caught.exception))
        self.assertEqual(proxy.requests("POST", "/v1/threads"), [])
        # What the service takes: a comma inside a quoted key, spaces around one.
        for key in ('"a,b"', " py-padded "):
            with self.subTest(key=key):
                client.threads.create("py/keys", idempotency_key=key)
        self.assertEqual([s.status for s in proxy.requests("POST", "/v1/threads")], [201, 201])

    def test_unreachable_service(self) -> None:
        import socket

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        client = MemoryClient(f"http://127.0.0.1:{port}", "mk_x", max_retries=1, backoff_base=0.01)
        with self.assertRaises(APIConnectionError):
            client.recall("py/errors")

    def test_url_and_key_from_the_environment(self) -> None:
        s = server()
        with mock.patch.dict(os.environ, {"MEMORY_API_URL": s.url, "MEMORY_API_KEY": s.new_key()}):
            client = MemoryClient()
        self.addCleanup(client.close)
        self.assertEqual(client.base_url, s.url)
        self.assertEqual(client.recall("py/env")["factCount"], 0)
        with mock.patch.dict(os.environ, {"MEMORY_API_URL": "", "MEMORY_API_KEY": ""}):
            with self.assertRaises(InvalidRequestError):
                MemoryClient()


if __name__ == "__main__":
    unittest.main()
