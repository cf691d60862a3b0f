"""examples/agent_loop.py runs against the service as a user would run it: from the environment,
with the stub model, and with an OpenAI-compatible endpoint (the fake provider)."""

from __future__ import annotations

import os
import subprocess
import sys
import unittest

from harness import PACKAGE, server

EXAMPLE = PACKAGE / "examples" / "agent_loop.py"


def run(env: dict) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MEMORY_API_"))}
    return subprocess.run(
        [sys.executable, str(EXAMPLE), "--dataset", "py/example"],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=180,
    )


class AgentLoop(unittest.TestCase):
    def test_the_second_session_answers_from_memory(self) -> None:
        s = server()
        done = run({"MEMORY_API_URL": s.url, "MEMORY_API_KEY": s.new_key()})
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        first, second = done.stdout.split("-- a new session --")
        self.assertIn("(stub model) Tell me about yourself!", first)  # nothing known yet
        answer = [line for line in second.splitlines() if line.startswith("assistant:")]
        self.assertEqual(len(answer), 1)
        self.assertIn("(stub model) From memory:", answer[0])
        self.assertIn("Lisbon", answer[0])

    def test_with_an_openai_compatible_model(self) -> None:
        s = server()
        done = run({"MEMORY_API_URL": s.url, "MEMORY_API_KEY": s.new_key(), "OPENAI_BASE_URL": s.provider_url})
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertEqual(done.stdout.count("assistant: Noted."), 2)  # the fake provider's answer


if __name__ == "__main__":
    unittest.main()
