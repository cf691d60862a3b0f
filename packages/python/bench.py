"""What the client adds per call over a raw ``http.client`` request to the same server.

    python3 packages/python/bench.py [--calls 200] [--rounds 7]

Starts the service (tests/serve.ts: the Node.js host, in-memory database, fake provider), then,
for a read (``threads.get``) and a write (``threads.add_message``, with its Idempotency-Key),
times pairs: one raw request (prebuilt method, path, headers and body on one kept-alive
connection; the response read and parsed as JSON) and the same call through the client, each
first in half the pairs. A pair's two calls are milliseconds apart, so the load of a shared machine hits both alike; the
median of a round's pair differences is that round's overhead, and the median over rounds is the
figure reported. Not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Callable, List
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent / "tests"))

from harness import server  # noqa: E402

from memory_service import MemoryClient  # noqa: E402


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="calls per round (default 200)")
    parser.add_argument("--rounds", type=int, default=7, help="rounds of each (default 7)")
    args = parser.parse_args()

    s = server()
    key = s.new_key()
    client = MemoryClient(s.url, key)
    thread_id = client.threads.create("bench/python")["threadId"]
    parts = urlsplit(s.url)
    raw = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    headers = {"Authorization": f"Bearer {key}", "Accept": "application/json"}

    def raw_get() -> object:
        raw.request("GET", f"/v1/threads/{thread_id}", headers=headers)
        return json.loads(raw.getresponse().read())

    message = json.dumps({"role": "user", "content": "A benchmark message."}).encode()

    def raw_add() -> object:
        h = {**headers, "Content-Type": "application/json", "Idempotency-Key": str(uuid.uuid4())}
        raw.request("POST", f"/v1/memory/working/threads/{thread_id}/messages", body=message, headers=h)
        return json.loads(raw.getresponse().read())

    def client_get() -> object:
        return client.threads.get(thread_id)

    def client_add() -> object:
        return client.threads.add_message(thread_id, role="user", content="A benchmark message.")

    print(f"{args.rounds} rounds of {args.calls} pairs (raw, then client), medians per call in ms", flush=True)
    for name, raw_call, client_call in (("threads.get", raw_get, client_get), ("add_message", raw_add, client_add)):
        for _ in range(20):  # warm both paths (connections, the server's JIT and statement cache)
            raw_call()
            client_call()
        overheads: List[float] = []
        for r in range(args.rounds):
            raws: List[float] = []
            clients: List[float] = []
            for i in range(args.calls):
                # Each goes first in half the pairs: a write leaves the server a little work after
                # its answer, which would otherwise always land on the second call.
                if i % 2 == 0:
                    raws.append(timed(raw_call) * 1000)
                    clients.append(timed(client_call) * 1000)
                else:
                    clients.append(timed(client_call) * 1000)
                    raws.append(timed(raw_call) * 1000)
            overhead = statistics.median(c - r_ for c, r_ in zip(clients, raws))
            overheads.append(overhead)
            print(
                f"  {name:12} round {r + 1}: raw {statistics.median(raws):6.3f}"
                f"  client {statistics.median(clients):6.3f}  overhead {overhead:+.3f}"
            )
        print(f"{name}: the client adds {statistics.median(overheads):+.3f} ms per call (median of {args.rounds} rounds)")
    client.close()
    raw.close()


if __name__ == "__main__":
    main()
