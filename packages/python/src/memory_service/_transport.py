"""One API call over the standard library's ``http.client``: a kept-alive connection per thread,
a timeout per attempt, an ``Idempotency-Key`` per logical write (the same on each of its
retries), and retries with full-jitter exponential backoff. The blocking client calls ``call``;
the asyncio client calls ``call_async``, which runs each attempt in a thread pool and waits
between attempts with ``asyncio.sleep``."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import re
import select
import socket
import ssl
import threading
import time
import uuid
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, Mapping, NamedTuple, Optional, Union
from urllib.parse import quote, urlencode, urlsplit

from ._version import __version__
from ._errors import (
    APIConnectionError,
    APIError,
    APITimeoutError,
    InvalidRequestError,
    InvalidResponseError,
    MemoryServiceError,
    error_for,
)
from ._retry import KEYED, KEYED_NO_5XX, SAFE, UNSAFE, backoff, is_retryable, parse_retry_after

IDEMPOTENCY_HEADER = "Idempotency-Key"

BODY_LIMIT = 1024 * 1024
"""The service's body limit, 1 MB (5 MB for a batch of messages): ``http.client`` cannot read the
413 the service sends before it has read a larger body (the server closes the connection and the
upload ends in a broken pipe), so a body over it is refused here, with the service's answer."""
BATCH_BODY_LIMIT = 5 * 1024 * 1024


def _header_problem(value: str) -> Optional[str]:
    """Why ``value`` cannot be sent as a header value: http.client sends Latin-1, no line breaks."""
    if "\r" in value or "\n" in value:
        return "must not contain line breaks"
    try:
        value.encode("latin-1")
    except UnicodeEncodeError:
        return "must be Latin-1 text"
    return None


_QUOTED_KEY = re.compile(r'"(?:[^"\\]|\\["\\])*"')
"""A key sent as a Structured Field string (``"8e03..."``), which the service unquotes."""


def _key_problem(key: Any) -> Optional[str]:
    """Why the service would refuse ``key`` as an ``Idempotency-Key`` (400), or None: it takes
    1-255 printable ASCII characters, after HTTP has trimmed the spaces around the value and
    unquoted a quoted one; a bare value with a comma is two keys joined (the header sent twice)."""
    if not isinstance(key, str):
        return f"must be a string, or False to send none (got {type(key).__name__})"
    if key == "":
        return "must not be empty (pass False to send none)"
    if not (len(key) <= 255 and all(" " <= c <= "~" for c in key)):
        return "must be 1-255 printable ASCII characters"
    sent = key.strip(" ")
    if _QUOTED_KEY.fullmatch(sent):
        sent = sent[1:-1]
    elif "," in sent:
        return "must not contain a comma (HTTP reads a comma as two keys)"
    if sent == "":
        return "must not be blank (HTTP trims the spaces around a header value)"
    return None


def _json_bytes(body: Any) -> bytes:
    """The body as UTF-8 JSON. Text with an unpaired surrogate (which UTF-8 cannot hold) goes as
    ``\\uXXXX`` escapes instead; the service stores it as U+FFFD, as it does for any client."""
    text = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(body, separators=(",", ":")).encode("ascii")

IdempotencyKey = Union[str, bool, None]
"""A write's key: None for the client's default (a new random key), a string to send that key,
False to send none (the write is then never retried)."""


class RetryEvent(NamedTuple):
    """A retry about to happen, passed to ``on_retry`` (for logs and metrics)."""

    request: str
    """Method and path, e.g. ``POST /v1/threads``."""
    retry: int
    """1 for the first retry (a keyed write's wait after a 409 counts here, not against
    ``max_retries``)."""
    delay: float
    """Seconds until it is sent."""
    error: MemoryServiceError


class _Plan:
    """One logical call, fixed before its first attempt (its key included)."""

    __slots__ = ("method", "url", "label", "payload", "headers", "repeatability", "retries", "timeout", "stream")

    def __init__(self, method, url, label, payload, headers, repeatability, retries, timeout, stream):
        self.method = method
        self.url = url
        self.label = label
        self.payload = payload
        self.headers = headers
        self.repeatability = repeatability
        self.retries = retries
        self.timeout = timeout
        self.stream = stream


STILL_RUNNING_WAIT = 1.0
"""Seconds before asking again after a 409 "still being processed" that sent no ``Retry-After``."""
MIN_STILL_RUNNING_WAIT = 0.1
"""The shortest such wait (a ``Retry-After: 0`` does not make a busy loop)."""


class _Retrying:
    """Where one call's retrying stands: retries used, repeats made, and until when a keyed write
    may wait for its own first request ((retries + 1) x timeout from the call's start)."""

    __slots__ = ("retries", "repeats", "deadline")

    def __init__(self, plan: _Plan) -> None:
        self.retries = 0
        self.repeats = 0
        budget = (plan.retries + 1) * plan.timeout if plan.timeout else None
        self.deadline = time.monotonic() + budget if budget is not None else float("inf")


def encode_path(value: str) -> str:
    """A path parameter, percent-encoded (a dataset may hold ``/``, spaces, ``?``...)."""
    return quote(value, safe="")


def _query_value(value: Any) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)


class Transport:
    """Owns the connections, the retry policy and the defaults of one client."""

    def __init__(
        self,
        base_url: Optional[str],
        api_key: Optional[str],
        *,
        timeout: Optional[float] = 30.0,
        max_retries: int = 2,
        backoff_base: float = 0.25,
        backoff_max: float = 10.0,
        idempotency_keys: bool = True,
        headers: Optional[Mapping[str, str]] = None,
        on_retry: Optional[Callable[[RetryEvent], None]] = None,
        max_workers: Optional[int] = None,
    ) -> None:
        base_url = base_url or os.environ.get("MEMORY_API_URL")
        api_key = api_key or os.environ.get("MEMORY_API_KEY")
        if not base_url:
            raise InvalidRequestError("base_url: pass it, or set MEMORY_API_URL (e.g. http://127.0.0.1:8787)")
        if not api_key:
            raise InvalidRequestError("api_key: pass it, or set MEMORY_API_KEY")
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidRequestError(f"base_url must be an http:// or https:// URL, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._prefix = parts.path.rstrip("/")
        self.timeout = timeout or None  # 0 or None: no limit
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.idempotency_keys = idempotency_keys
        self.on_retry = on_retry
        self._headers = {
            "Authorization": f"Bearer {api_key}",
            "Accept": "application/json",
            "User-Agent": f"memory-service-python/{__version__}",
            **(headers or {}),
        }
        for name, value in self._headers.items():
            problem = _header_problem(str(value))
            if problem:
                field = "api_key" if name == "Authorization" else f"headers[{name!r}]"
                raise InvalidRequestError(f"{field} {problem}")
        self._local = threading.local()
        self._connections: "weakref.WeakSet[http.client.HTTPConnection]" = weakref.WeakSet()
        self._lock = threading.Lock()
        self._max_workers = max_workers
        self._executor: Optional[ThreadPoolExecutor] = None

    # -- connections -------------------------------------------------------------------------

    def _new_connection(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        if self._https:
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                self._host, self._port, timeout=timeout, context=ssl.create_default_context()
            )
        else:
            conn = http.client.HTTPConnection(self._host, self._port, timeout=timeout)
        with self._lock:
            self._connections.add(conn)
        return conn

    def _drop(self, conn: http.client.HTTPConnection) -> None:
        conn.close()
        if getattr(self._local, "conn", None) is conn:
            self._local.conn = None

    def _lost(self, conn: http.client.HTTPConnection, plan: "_Plan", err: BaseException) -> APIConnectionError:
        """A connection left unusable by ``err`` (sending or reading): dropped, and the error to
        raise, a timeout (``socket.timeout`` is an ``OSError``) or a connection error."""
        self._drop(conn)
        if isinstance(err, socket.timeout):
            return APITimeoutError(f"{plan.label}: no answer within {plan.timeout} s")
        return APIConnectionError(f"{plan.label}: {type(err).__name__}: {err}")

    def close(self) -> None:
        """Closes every kept-alive connection (and the asyncio client's thread pool)."""
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            conn.close()
        if self._executor is not None:
            self._executor.shutdown(wait=False)
            self._executor = None

    # -- one call ----------------------------------------------------------------------------

    def plan(
        self,
        method: str,
        path: str,
        kind: str,
        *,
        query: Optional[Mapping[str, Any]] = None,
        body: Any = None,
        timeout: Optional[float] = None,
        retries: Optional[int] = None,
        idempotency_key: IdempotencyKey = None,
        accept: Optional[str] = None,
    ) -> _Plan:
        url = self._prefix + path
        if query:
            pairs = [(k, _query_value(v)) for k, v in query.items() if v is not None]
            if pairs:
                url += "?" + urlencode(pairs)
        headers = dict(self._headers)
        label = f"{method} {path.split('?')[0]}"
        payload = None
        if body is not None:
            payload = _json_bytes(body)
            headers["Content-Type"] = "application/json"
            limit = BATCH_BODY_LIMIT if path.endswith("messages:batch") else BODY_LIMIT
            if len(payload) > limit:
                message = "Request body too large (limit 5 MB for a batch)" if limit == BATCH_BODY_LIMIT else (
                    "Request body too large (limit 1 MB)"
                )
                raise error_for(413)(413, {"error": message}, headers={}, retry_after=None, request=label)
        if accept:
            headers["Accept"] = accept
        stream = accept == "text/event-stream"
        if kind == "read":
            repeatability = SAFE
        else:
            key = idempotency_key
            if key is None or key is True:
                key = str(uuid.uuid4()) if self.idempotency_keys or key is True else False
            if key is False:
                repeatability = UNSAFE
            else:
                problem = _key_problem(key)
                if problem:
                    raise InvalidRequestError(f"idempotency_key {problem}")
                headers[IDEMPOTENCY_HEADER] = key
                # A stream is repeated as the JSON chat is, but only until its headers arrive
                # (``attempt`` returns the open response then; a stream broken later is not asked
                # again): the service holds its key while it streams (409) and then keeps its
                # events, so a repeat gets them rather than storing the turn again.
                repeatability = KEYED if kind == "write" else KEYED_NO_5XX
        return _Plan(
            method,
            url,
            label,
            payload,
            headers,
            repeatability,
            self.max_retries if retries is None else retries,
            # 0 is no limit, as for the retry budget (and the TypeScript client's timeoutMs: 0):
            # a socket timeout of 0 would make the socket non-blocking, failing every call.
            (self.timeout if timeout is None else timeout) or None,
            stream,
        )

    def call(self, method: str, path: str, kind: str, **options: Any) -> Any:
        """A blocking call: attempts until one succeeds, an error is not retryable, or the
        retries run out."""
        plan = self.plan(method, path, kind, **options)
        state = _Retrying(plan)
        while True:
            try:
                return self.attempt(plan)
            except (APIError, APIConnectionError) as error:
                delay = self._delay(plan, state, error)
                if delay is None:
                    raise
            time.sleep(delay)

    async def call_async(self, method: str, path: str, kind: str, **options: Any) -> Any:
        """The same, without blocking the event loop: each attempt runs in the client's thread
        pool; the waits between attempts are ``asyncio.sleep``."""
        plan = self.plan(method, path, kind, **options)
        loop = asyncio.get_running_loop()
        executor = self.executor()
        state = _Retrying(plan)
        while True:
            try:
                return await loop.run_in_executor(executor, self.attempt, plan)
            except (APIError, APIConnectionError) as error:
                delay = self._delay(plan, state, error)
                if delay is None:
                    raise
            await asyncio.sleep(delay)

    def executor(self) -> ThreadPoolExecutor:
        if self._executor is None:
            with self._lock:
                if self._executor is None:
                    self._executor = ThreadPoolExecutor(
                        max_workers=self._max_workers, thread_name_prefix="memory-service"
                    )
        return self._executor

    def _delay(self, plan: _Plan, state: "_Retrying", error: MemoryServiceError) -> Optional[float]:
        """The wait before the next attempt, or None to raise ``error``."""
        keyed = plan.repeatability in (KEYED, KEYED_NO_5XX)
        if keyed:
            # The write's key, to resume it with: a repeat under it gets the stored answer.
            error.idempotency_key = plan.headers[IDEMPOTENCY_HEADER]
        if keyed and isinstance(error, APIError) and error.status == 409:
            # The first request with this key still runs (an attempt that timed out, or the
            # caller's own): wait as asked (default 1 s) and ask again for as long as the call's
            # budget lasts, without using up retries; once it has ended, its answer is replayed.
            left = state.deadline - time.monotonic()
            if left <= 0:
                return None
            wait = STILL_RUNNING_WAIT if error.retry_after is None else error.retry_after
            delay: Optional[float] = min(max(wait, MIN_STILL_RUNNING_WAIT), left)
        else:
            if state.retries >= plan.retries or not is_retryable(error, plan.repeatability):
                return None
            retry_after = error.retry_after if isinstance(error, APIError) else None
            delay = backoff(state.retries, self.backoff_base, self.backoff_max, retry_after)
            if delay is None:
                return None
            state.retries += 1
        state.repeats += 1
        if self.on_retry is not None:
            self.on_retry(RetryEvent(plan.label, state.repeats, delay, error))
        return delay

    def attempt(self, plan: _Plan) -> Any:
        """One attempt: the parsed JSON of a 2xx (None for an empty body), the open response of a
        streamed 2xx (with its connection and its ``Idempotency-Key``), or an exception."""
        conn: Optional[http.client.HTTPConnection] = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._new_connection(plan.timeout)
        elif conn.sock is not None and select.select([conn.sock], [], [], 0)[0]:
            # An idle kept-alive connection with something to read has been closed by the server
            # (its keep-alive timeout): reconnect rather than send into it. One it closes just as
            # the request goes out is a connection error like any other: retried when the call
            # may be repeated, and counted against its retries.
            conn.close()
        if conn.timeout != plan.timeout:
            conn.timeout = plan.timeout
            if conn.sock is not None:
                conn.sock.settimeout(plan.timeout)
        try:
            conn.request(plan.method, plan.url, body=plan.payload, headers=plan.headers)
            response = conn.getresponse()
        except (OSError, http.client.HTTPException) as err:
            raise self._lost(conn, plan, err) from err
        except ValueError as err:
            # A value http.client cannot send (checked before, so not expected): the half-sent
            # request leaves the connection unusable, so it goes too.
            self._drop(conn)
            raise InvalidRequestError(f"{plan.label}: {err}") from err
        status = response.status
        if plan.stream and 200 <= status < 300:
            # The stream owns the connection now; the next call on this thread opens another. Its
            # key goes with it: a stream that fails later raises with it (``ChatStream``).
            self._local.conn = None
            return response, conn, plan.headers.get(IDEMPOTENCY_HEADER)
        try:
            raw = response.read()
        except (OSError, http.client.HTTPException) as err:
            raise self._lost(conn, plan, err) from err
        if 200 <= status < 300:
            try:
                return json.loads(raw) if raw else None
            except ValueError:
                # Not the service's answer (a proxy's page with a 200): no usable answer, retried
                # like a lost one (a write under its key gets the service's stored answer).
                text = raw.decode("utf-8", "replace").strip()[:200]
                raise InvalidResponseError(f"{plan.label}: the answer ({status}) is not JSON: {text}", status) from None
        raise _api_error(status, response, raw, plan.label)


def _api_error(status: int, response: http.client.HTTPResponse, raw: bytes, label: str) -> APIError:
    """The spec's ``{error, issues?}`` as an exception by status, or a stand-in body when
    something other than the service answered (a proxy's page)."""
    body: Optional[Dict[str, Any]] = None
    text = raw.decode("utf-8", "replace")
    try:
        parsed = json.loads(text)
        if isinstance(parsed, dict) and isinstance(parsed.get("error"), str):
            body = parsed
    except ValueError:
        pass
    if body is None:
        body = {"error": text.strip()[:200] or f"{status} {response.reason}".strip()}
    headers = {k.lower(): v for k, v in response.getheaders()}
    return error_for(status)(
        status,
        body,
        headers=headers,
        retry_after=parse_retry_after(headers.get("retry-after")),
        request=label,
    )
