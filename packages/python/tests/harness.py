"""What the tests run against: the real service (tests/serve.ts: the Node.js host as `npm start`
builds it, on an in-memory database, with the fake OpenAI-compatible provider), started once per
test process, and a fault-injecting HTTP proxy that a test puts between the client and it.

The package is imported from ``src`` (the installed package is checked by test_packaging.py).
"""

from __future__ import annotations

import atexit
import http.client
import json
import os
import select
import socket
import struct
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional
from urllib.parse import urlsplit

PACKAGE = Path(__file__).resolve().parent.parent
REPO = PACKAGE.parent.parent
sys.path.insert(0, str(PACKAGE / "src"))


class Server:
    """The service as a child process; each test asks it for a fresh project and API key."""

    def __init__(self) -> None:
        command = ["node", "--import", "tsx", str(PACKAGE / "tests" / "serve.ts")]
        self._process = subprocess.Popen(
            command,
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=sys.stderr,
            text=True,
            bufsize=1,
        )
        self._lock = threading.Lock()
        first = self._read(timeout=120)
        self.url: str = first["url"]
        self.key: str = first["key"]
        self.provider_url: str = first["providerUrl"]

    def _read(self, timeout: float) -> Dict[str, Any]:
        assert self._process.stdout is not None
        ready, _, _ = select.select([self._process.stdout], [], [], timeout)
        line = self._process.stdout.readline() if ready else ""
        if not line:
            raise RuntimeError(f"tests/serve.ts did not answer (exit code {self._process.poll()})")
        return json.loads(line)

    def command(self, line: str) -> Dict[str, Any]:
        assert self._process.stdin is not None
        with self._lock:
            self._process.stdin.write(line + "\n")
            self._process.stdin.flush()
            return self._read(timeout=30)

    def new_key(self) -> str:
        """A new project and API key: tests share no data."""
        return self.command("key")["key"]

    def stop(self) -> None:
        if self._process.poll() is None:
            assert self._process.stdin is not None
            self._process.stdin.close()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()


_server: Optional[Server] = None


def server() -> Server:
    global _server
    if _server is None:
        _server = Server()
        atexit.register(_server.stop)
    return _server


class Seen:
    def __init__(self, method: str, path: str, idempotency_key: Optional[str]) -> None:
        self.method = method
        self.path = path
        self.idempotency_key = idempotency_key
        self.status = 0
        self.replayed = False

    def __repr__(self) -> str:
        return f"Seen({self.method} {self.path} key={self.idempotency_key} -> {self.status} replayed={self.replayed})"


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a connection the proxy cut on purpose


class FaultProxy:
    """A real HTTP proxy in front of the service: forwards every request unchanged, except those a
    test queued a fault for, and records what passed.

    Faults: ``{"status": 503}`` (answered by the proxy, optional ``retry_after``), ``{"reset":
    True}`` (the connection is cut before the service sees the request), ``{"lose_answer": True}``
    (the service runs the request; the client's connection is cut instead of the answer),
    ``{"delay": seconds}`` (held, then forwarded), ``{"close_after": True}`` (answered, then the
    kept-alive connection is closed, as a server's keep-alive timeout does), ``{"garble": True}``
    (the service runs the request; its answer reaches the client with its status but an HTML
    body, as a proxy's page), ``{"cut_after_start": True}`` (a streamed answer's status, headers
    and first chunk reach the client, then its connection is cut).

    An answer is passed on whole, except a stream (``text/event-stream``), relayed as it comes
    (the connection closes after it), unless its fault needs it whole (``lose_answer``,
    ``garble``)."""

    def __init__(self, target: str) -> None:
        self.target = urlsplit(target)
        self.seen: List[Seen] = []
        self._faults: List[tuple] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                proxy._serve(self)

            do_GET = do_POST = do_PATCH = do_DELETE = _handle

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def fail(self, method: str, path_prefix: str, times: int = 1, **fault: Any) -> None:
        """Queue ``fault`` for the next ``times`` requests whose method and path start as given."""
        with self._lock:
            for _ in range(times):
                self._faults.append((method, path_prefix, fault))

    def clear(self) -> None:
        """Drops the faults still queued."""
        with self._lock:
            self._faults.clear()

    def requests(self, method: str, path_prefix: str) -> List[Seen]:
        return [s for s in self.seen if s.method == method and s.path.startswith(path_prefix)]

    def _take(self, method: str, path: str) -> Optional[Dict[str, Any]]:
        with self._lock:
            for i, (m, prefix, fault) in enumerate(self._faults):
                if m == method and path.startswith(prefix):
                    del self._faults[i]
                    return fault
        return None

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else None
        record = Seen(handler.command, handler.path, handler.headers.get("Idempotency-Key"))
        with self._lock:
            self.seen.append(record)
        fault = self._take(handler.command, handler.path) or {}
        if "status" in fault:
            record.status = fault["status"]
            payload = fault.get("body", json.dumps({"error": "Service Unavailable (proxy)"})).encode()
            handler.send_response(fault["status"])
            handler.send_header("Content-Type", "application/json" if "body" not in fault else "text/html")
            if "retry_after" in fault:
                handler.send_header("Retry-After", str(fault["retry_after"]))
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            handler.wfile.write(payload)
            return
        if fault.get("reset"):
            _cut(handler)
            return
        if "delay" in fault:
            time.sleep(fault["delay"])
        upstream = http.client.HTTPConnection(self.target.hostname, self.target.port, timeout=30)
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in ("host", "connection")}
        upstream.request(handler.command, handler.path, body=body, headers=headers)
        answer = upstream.getresponse()
        record.replayed = answer.getheader("Idempotent-Replayed") == "true"
        streamed = (answer.getheader("Content-Type") or "").startswith("text/event-stream")
        if streamed and not fault.get("lose_answer") and not fault.get("garble"):
            record.status = answer.status
            _relay(handler, upstream, answer, cut=bool(fault.get("cut_after_start")))
            return
        data = answer.read()
        upstream.close()
        if fault.get("lose_answer"):
            _cut(handler)
            return
        record.status = answer.status
        if fault.get("garble"):
            data = b"<html>Welcome to the hotel network</html>"
        handler.send_response(answer.status)
        for k, v in answer.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length", "keep-alive", "date"):
                handler.send_header(k, v)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)
        if fault.get("close_after"):
            handler.wfile.flush()
            handler.close_connection = True
            handler.connection.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _relay(
    handler: BaseHTTPRequestHandler,
    upstream: http.client.HTTPConnection,
    answer: http.client.HTTPResponse,
    cut: bool,
) -> None:
    """A stream passed on chunk by chunk as the service sends it (the connection then closes),
    or, with ``cut``, its first chunk and then a cut connection."""
    handler.close_connection = True
    try:
        handler.send_response(answer.status)
        for k, v in answer.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length", "keep-alive", "date"):
                handler.send_header(k, v)
        handler.send_header("Connection", "close")
        handler.end_headers()
        while True:
            chunk = answer.read1(65536)
            if not chunk:
                break
            handler.wfile.write(chunk)
            handler.wfile.flush()
            if cut:
                _cut(handler)
                break
    except OSError:
        pass  # the client left
    finally:
        upstream.close()  # the service sees its client leave


def _cut(handler: BaseHTTPRequestHandler) -> None:
    """Closes the client's connection without an answer (a reset rather than a clean close)."""
    handler.close_connection = True
    try:
        handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    handler.connection.close()


def fast_client(cls: Callable[..., Any], url: Optional[str] = None, key: Optional[str] = None, **options: Any) -> Any:
    """A client of a fresh tenant with short backoff (tests wait milliseconds, not seconds)."""
    s = server()
    options.setdefault("backoff_base", 0.01)
    options.setdefault("backoff_max", 0.2)
    return cls(url or s.url, key or s.new_key(), **options)


def read_json(url: str) -> Any:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    conn.request("GET", parts.path)
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return json.loads(data)


os.environ.pop("MEMORY_API_URL", None)
os.environ.pop("MEMORY_API_KEY", None)
