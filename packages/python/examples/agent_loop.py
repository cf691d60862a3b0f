"""An agent loop with memory: before each model call, recall what the service knows about the
user into the system prompt; after it, store the turn. Standard library only.

    MEMORY_API_URL=http://127.0.0.1:8787 MEMORY_API_KEY=mk_... python3 agent_loop.py [--dataset user-42]

The model is any OpenAI-compatible Chat Completions endpoint when ``OPENAI_BASE_URL`` is set
(``OPENAI_API_KEY``, ``LLM_MODEL``; the service's demo provider, ``npm run demo:provider``, works),
and otherwise a stub that answers from the recalled block, so the loop runs with no model at all.

Without ``--interactive`` it plays two scripted sessions: in the first the user says where they
live and what they do; the thread is ended and the example waits for its facts; in the second,
a new thread, the user asks, and the answer comes from memory.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.request
from pathlib import Path
from typing import Dict, List

try:
    from memory_service import MemoryClient
except ImportError:  # run from the repository without installing the package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
    from memory_service import MemoryClient

SYSTEM = "You are a helpful assistant. Use what you know about the user when it helps."


def model(messages: List[Dict[str, str]]) -> str:
    """One reply: an OpenAI-compatible endpoint when configured, else a stub."""
    base = os.environ.get("OPENAI_BASE_URL")
    if base:
        request = urllib.request.Request(
            base.rstrip("/") + "/chat/completions",
            data=json.dumps({"model": os.environ.get("LLM_MODEL", "gpt-4o-mini"), "messages": messages}).encode(),
            headers={
                "Content-Type": "application/json",
                "Authorization": f"Bearer {os.environ.get('OPENAI_API_KEY', 'none')}",
            },
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.load(response)["choices"][0]["message"]["content"]
    # The stub: repeats the facts recalled into the system prompt.
    known = [line[2:].split(" (valid:")[0] for line in messages[0]["content"].splitlines() if line.startswith("- ")]
    return f"(stub model) From memory: {'; '.join(known)}." if known else "(stub model) Tell me about yourself!"


def turn(client: MemoryClient, dataset: str, thread_id: str, history: List[Dict[str, str]], text: str) -> str:
    """One turn of the loop: recall, answer, store."""
    context = client.recall(dataset, text, timeout=5)["context"]  # a read: retried on failure
    system = SYSTEM + ("\n\n" + context if context else "")
    reply = model([{"role": "system", "content": system}, *history, {"role": "user", "content": text}])
    # Both messages in one request, all or nothing; retried safely with its Idempotency-Key.
    client.threads.add_messages(thread_id, [{"role": "user", "content": text}, {"role": "assistant", "content": reply}])
    history += [{"role": "user", "content": text}, {"role": "assistant", "content": reply}]
    return reply


def session(client: MemoryClient, dataset: str, lines: List[str]) -> str:
    thread_id = client.threads.create(dataset, tags=["agent-loop"])["threadId"]
    history: List[Dict[str, str]] = []
    for text in lines:
        print(f"user: {text}")
        print(f"assistant: {turn(client, dataset, thread_id, history, text)}")
    return thread_id


def main() -> None:
    parser = argparse.ArgumentParser(description="An agent loop with memory.")
    parser.add_argument("--dataset", default="agent-loop-demo")
    parser.add_argument("--interactive", action="store_true", help="read the user's turns from stdin")
    args = parser.parse_args()
    with MemoryClient() as client:  # MEMORY_API_URL, MEMORY_API_KEY
        if args.interactive:
            thread_id = session(client, args.dataset, [line.strip() for line in sys.stdin if line.strip()])
            client.threads.end(thread_id)
            return
        first = session(client, args.dataset, ["Hi! I live in Lisbon and I work as a nurse at Santa Maria."])
        episode = client.threads.end(first)["episodeId"]
        if episode:
            # Extraction runs in the background: wait for the facts before the next session.
            client.wait_for_episode(episode, facts=True, timeout=120)
        print("-- a new session --")
        session(client, args.dataset, ["Where do I live, and what is my job?"])


if __name__ == "__main__":
    main()
