"""A streamed chat reply (``Accept: text/event-stream``) as an iterator of text chunks.

The service sends ``event: start`` (``{threadId, userMessageId, factCount}``), one ``event:
delta`` (``{content}``) per chunk, then ``event: done`` (the same body as the JSON answer, after
the reply is stored) or ``event: error`` (``{error}``; no reply is stored). Each ``data`` is one
line of JSON.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
from typing import Any, Dict, Iterator, Optional, Tuple

from ._errors import APIConnectionError, APITimeoutError, ChatStreamError, MemoryServiceError
from ._schema import ChatReply

_END = object()


class ChatStream(Iterator[str]):
    """Iterate for the reply's text chunks. After the last one, ``reply`` holds the stored reply
    (the ``done`` event: the same as ``chat``'s answer). An ``error`` event raises
    ``ChatStreamError``. Closing early (``close()``, or leaving a ``with`` block) disconnects:
    the service then stores no reply.

    ``idempotency_key`` is the key the chat was sent with (None when it was sent without one),
    and every exception the stream raises carries it: a repeat of the chat under it gets the
    events the service kept (the reply's text as one chunk, then its ``done`` or ``error``)
    instead of storing the turn again."""

    def __init__(
        self,
        response: http.client.HTTPResponse,
        connection: http.client.HTTPConnection,
        label: str,
        idempotency_key: Optional[str] = None,
    ):
        self._response = response
        self._connection = connection
        self._label = label
        self.idempotency_key = idempotency_key
        """The chat's ``Idempotency-Key`` (None when sent without one)."""
        self.started: Optional[Dict[str, Any]] = None
        """The ``start`` event: ``threadId``, ``userMessageId``, ``factCount``."""
        self.reply: Optional[ChatReply] = None
        """The ``done`` event's body, once the stream has ended."""
        self._closed = False

    def __iter__(self) -> "ChatStream":
        return self

    def __next__(self) -> str:
        while True:
            event = self._event()
            if event is None:
                self.close()
                if self.reply is None:
                    raise self._keyed(APIConnectionError(f"{self._label}: the stream ended before its done event"))
                raise StopIteration
            name, data = event
            if name == "delta":
                return str(data.get("content", ""))
            if name == "start":
                self.started = data
            elif name == "done":
                self.reply = data  # type: ignore[assignment]
            elif name == "error":
                self.close()
                raise self._keyed(ChatStreamError(str(data.get("error", "the stream failed"))))

    def text(self) -> str:
        """The rest of the reply, joined."""
        return "".join(self)

    def _keyed(self, error: MemoryServiceError) -> MemoryServiceError:
        """``error`` with the chat's key, to ask for the kept events with."""
        error.idempotency_key = self.idempotency_key
        return error

    def _event(self) -> Optional[Tuple[str, Dict[str, Any]]]:
        """The next event with data; None at the end of the stream."""
        if self._closed:
            return None
        name = "message"
        data = []
        while True:
            try:
                line = self._response.readline()
            except socket.timeout as err:
                self.close()
                raise self._keyed(APITimeoutError(f"{self._label}: the stream stalled")) from err
            except (OSError, http.client.HTTPException) as err:
                self.close()
                raise self._keyed(APIConnectionError(f"{self._label}: {type(err).__name__}: {err}")) from err
            if not line:
                return (name, json.loads("\n".join(data))) if data else None
            text = line.decode("utf-8").rstrip("\r\n")
            if text == "":
                if data:
                    return name, json.loads("\n".join(data))
                name = "message"
                continue
            if text.startswith("event:"):
                name = text[6:].strip()
            elif text.startswith("data:"):
                value = text[5:]
                data.append(value[1:] if value.startswith(" ") else value)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._response.close()
            self._connection.close()

    def __enter__(self) -> "ChatStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class AsyncChatStream:
    """``ChatStream`` for asyncio: ``async for chunk in stream``; each read runs in the client's
    thread pool."""

    def __init__(self, stream: ChatStream, executor: Any):
        self._stream = stream
        self._executor = executor

    @property
    def started(self) -> Optional[Dict[str, Any]]:
        return self._stream.started

    @property
    def reply(self) -> Optional[ChatReply]:
        return self._stream.reply

    @property
    def idempotency_key(self) -> Optional[str]:
        return self._stream.idempotency_key

    def __aiter__(self) -> "AsyncChatStream":
        return self

    async def __anext__(self) -> str:
        chunk = await asyncio.get_running_loop().run_in_executor(self._executor, next, self._stream, _END)
        if chunk is _END:
            raise StopAsyncIteration
        return chunk  # type: ignore[return-value]

    async def text(self) -> str:
        return "".join([chunk async for chunk in self])

    async def aclose(self) -> None:
        self._stream.close()

    async def __aenter__(self) -> "AsyncChatStream":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self._stream.close()
