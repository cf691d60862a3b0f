"""The client against the running server's /openapi.json: every /v1 operation has a method on both
clients, taking every body field and query parameter, and every response field is in its
TypedDict. A new operation or field fails here until the types are regenerated
(``npm run python:types``) and the method written."""

from __future__ import annotations

import inspect
import re
import unittest
from typing import Any, Dict, Set

from harness import read_json, server

import memory_service._schema as schema
from memory_service import OPERATIONS, AsyncMemoryClient, MemoryClient


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def keys(typed_dict: Any) -> Set[str]:
    return set(typed_dict.__required_keys__) | set(typed_dict.__optional_keys__)


class AgainstTheServedDocument(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.document = read_json(f"{server().url}/openapi.json")
        cls.components = cls.document["components"]["schemas"]
        cls.operations = {
            f"{method.upper()} {path}": op
            for path, item in cls.document["paths"].items()
            if path.startswith("/v1/")
            for method, op in item.items()
        }

    def resolve(self, node: Dict[str, Any]) -> Dict[str, Any]:
        while "$ref" in node:
            node = self.components[node["$ref"].split("/")[-1]]
        if "allOf" in node:
            merged: Dict[str, Any] = {"type": "object", "properties": {}, "required": []}
            for part in node["allOf"]:
                merged["properties"].update(self.resolve(part).get("properties", {}))
                merged["required"] += self.resolve(part).get("required", [])
            return merged
        return node

    def test_the_same_operations(self) -> None:
        self.assertEqual(sorted(self.operations), sorted(OPERATIONS))

    def test_every_operation_has_a_method_taking_its_fields(self) -> None:
        blocking = MemoryClient("http://127.0.0.1:1", "mk_x")
        asynchronous = AsyncMemoryClient("http://127.0.0.1:1", "mk_x")
        for label, op in self.operations.items():
            with self.subTest(label):
                entry = OPERATIONS[label]
                query = tuple(p["name"] for p in op.get("parameters", []) if p["in"] == "query")
                body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
                fields = tuple(self.resolve(body).get("properties", {})) if body else ()
                self.assertEqual(entry.query, query)
                self.assertEqual(entry.body, fields)
                method, async_target = blocking, asynchronous
                for part in entry.client_method.split("."):
                    method, async_target = getattr(method, part), getattr(async_target, part)
                self.assertTrue(inspect.iscoroutinefunction(async_target), f"{entry.client_method} is not async")
                sync_params = inspect.signature(method).parameters
                self.assertEqual(list(sync_params), list(inspect.signature(async_target).parameters))
                # The batch calls take the list itself; every other field is a keyword of its own.
                wanted = {snake(n) for n in (*query, *fields)} - ({"messages"} if fields == ("messages",) else set())
                self.assertLessEqual(wanted, set(sync_params), f"{entry.client_method} misses fields")
                # Writes take a key; reads (GET, and POST recall and prepare) are retried without one.
                self.assertEqual("idempotency_key" in sync_params, entry.kind != "read")

    def test_every_response_field_is_typed(self) -> None:
        for label, op in self.operations.items():
            with self.subTest(label):
                entry = OPERATIONS[label]
                response = next(r for status, r in op["responses"].items() if status.startswith("2"))
                node = response["content"]["application/json"]["schema"]
                options = node.get("anyOf", [node])
                names = [n.strip() for n in re.sub(r"^Union\[(.*)\]$", r"\1", entry.result_type).split(",")]
                self.assertEqual(len(names), len(options))
                for name, option in zip(names, options):
                    self.assertEqual(keys(getattr(schema, name)), set(self.resolve(option)["properties"]), name)

    def test_every_component_is_typed_field_by_field(self) -> None:
        # Nested objects too: a field added to Fact, Episode or RecallResponse fails here.
        checked = 0
        for name, node in self.components.items():
            typed = getattr(schema, name, None)
            if typed is None or not hasattr(typed, "__required_keys__"):
                continue
            resolved = self.resolve(node)
            with self.subTest(name):
                self.assertEqual(keys(typed), set(resolved["properties"]))
                self.assertEqual(set(typed.__required_keys__), set(resolved.get("required", [])))
            checked += 1
        self.assertGreaterEqual(checked, 10)


if __name__ == "__main__":
    unittest.main()
