"""The client's resources: one method per /v1 operation, named as in the TypeScript client (in
snake_case). Keyword arguments are the operation's body fields and query parameters in
snake_case; results are the JSON bodies, typed by the TypedDicts of ``_schema`` (camelCase keys,
as the service sends them).

Every method also takes ``timeout`` (seconds, per attempt) and ``retries`` (attempts after the
first); writes take ``idempotency_key`` (default: a new random key per call, reused by its
retries; a string to send your own; False to send none, and the write is then never retried).

The asyncio resources (``_async_resources.py``) are generated from this file by
``scripts/generate.py``: edit this one, then run ``npm run python:types``.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Union

from ._errors import InvalidRequestError
from ._schema import (
    AddMessageResult,
    AddMessagesAcrossThreadsResult,
    AddMessagesResult,
    BatchMessage,
    ChatReply,
    CompactResult,
    CrossThreadMessage,
    DatasetExport,
    DeleteDatasetResult,
    DeleteEpisodeResult,
    DeleteFactResult,
    EndThreadResult,
    EntityFactsResult,
    EpisodeStatus,
    EpisodicOverride,
    GetEpisodeResult,
    ListEntitiesResult,
    ListEpisodesResult,
    ListFactsResult,
    ListMessagesResult,
    MessageMetadata,
    MessageOrder,
    NothingToCompact,
    PrepareResult,
    RecallPart,
    RecallResponse,
    RetryEpisodeResult,
    Role,
    SearchEpisodesResult,
    Thread,
    ThreadStatsResult,
    Tokens,
    UsageReport,
)
from ._stream import ChatStream
from ._transport import IdempotencyKey, Transport, encode_path



def _required(field: str, value: Any) -> str:
    """A required string: an empty one would reach another route or a 400."""
    if not isinstance(value, str) or not value:
        raise InvalidRequestError(f"{field}: must be a non-empty string")
    return value


def _segment(field: str, value: Any) -> str:
    """A required string as one path segment, percent-encoded. ``.`` and ``..`` are refused: no
    encoding keeps them one segment (a URL parser folds ``%2E`` as well), so the request would
    reach another route (``entities.facts(dataset, "..")`` would list every fact of the dataset)."""
    value = _required(field, value)
    if value in (".", ".."):
        raise InvalidRequestError(f"{field}: must not be {value!r} (a URL path folds it into another route)")
    return encode_path(value)


def _dataset(value: Any) -> str:
    name = _required("dataset", value)
    if len(name) > 256:
        raise InvalidRequestError("dataset: must be at most 256 characters")
    return name


def _content(field: str, value: Any) -> None:
    if not isinstance(value, str) or not value:
        raise InvalidRequestError(f"{field}: must be non-empty text")


def _batch(messages: Any) -> List[Any]:
    if not isinstance(messages, (list, tuple)) or not messages:
        raise InvalidRequestError("messages: must be a non-empty list")
    if len(messages) > 1000:
        raise InvalidRequestError("messages: at most 1000 per request")
    for i, message in enumerate(messages):
        _content(f"messages[{i}].content", message.get("content") if isinstance(message, dict) else None)
    return list(messages)


def _fields(**fields: Any) -> Dict[str, Any]:
    """A JSON body or query from keyword arguments, without the ones left out (None)."""
    return {k: v for k, v in fields.items() if v is not None}


class _Resource:
    def __init__(self, transport: Transport, call: Any) -> None:
        self._transport = transport
        self._call = call

    def _stream(self, response: Any, connection: Any, label: str, key: Optional[str]) -> ChatStream:
        return ChatStream(response, connection, label, key)


class Threads(_Resource):
    """Threads and their messages: ``client.threads``."""

    def create(
        self,
        dataset: str,
        *,
        tags: Optional[Sequence[str]] = None,
        settings: Optional[Dict[str, EpisodicOverride]] = None,
        timeout: Optional[float] = None,
        retries: Optional[int] = None,
        idempotency_key: IdempotencyKey = None,
    ) -> Thread:
        """A new thread in ``dataset`` (a new one on every call). ``settings``:
        ``{"episodic": {...}}``, this thread's episodic override."""
        body = _fields(dataset=_dataset(dataset), tags=tags, settings=settings)
        return self._call(
            "POST", "/v1/threads", "write",
            body=body, timeout=timeout, retries=retries, idempotency_key=idempotency_key,
        )

    def get(self, thread_id: str, *, timeout: Optional[float] = None, retries: Optional[int] = None) -> Thread:
        path = f"/v1/threads/{_segment('thread_id', thread_id)}"
        return self._call("GET", path, "read", timeout=timeout, retries=retries)

    def update(
        self,
        thread_id: str,
        *,
        tags: Optional[Sequence[str]] = None,
        settings: Optional[Dict[str, EpisodicOverride]] = None,
        timeout: Optional[float] = None,
        retries: Optional[int] = None,
        idempotency_key: IdempotencyKey = None,
    ) -> Thread:
        """Replaces the tags and/or the episodic override."""
        path = f"/v1/threads/{_segment('thread_id', thread_id)}"
        return self._call(
            "PATCH", path, "write",
            body=_fields(tags=tags, settings=settings), timeout=timeout, retries=retries,
            idempotency_key=idempotency_key,
        )

    def end(
        self,
        thread_id: str,
        *,
        timeout: Optional[float] = None,
        retries: Optional[int] = None,
        idempotency_key: IdempotencyKey = None,
    ) -> EndThreadResult:
        """Ends the thread: its episode (``episodeId``, pending) is summarised, then its facts
        extracted, in the background. See ``client.wait_for_episode``."""
        path = f"/v1/threads/{_segment('thread_id', thread_id)}/end"
        return self._call("POST", path, "write", timeout=timeout, retries=retries, idempotency_key=idempotency_key)

    def add_message(
        self,
        thread_id: str,
        *,
        role: Role,
        content: str,
        tokens: Optional[Tokens] = None,
        model: Optional[str] = None,
        latency_ms: Optional[float] = None,
        metadata: Optional[MessageMetadata] = None,
        timeout: Optional[float] = None,
        retries: Optional[int] = None,
        idempotency_key: IdempotencyKey = None,
    ) -> AddMessageResult:
        path = f"/v1/memory/working/threads/{_segment('thread_id', thread_id)}/messages"
        _content("content", content)
        body = _fields(role=role, content=content, tokens=tokens, model=model, latencyMs=latency_ms, metadata=metadata)
        return self._call(
            "POST", path, "write", body=body, timeout=timeout, retries=retries, idempotency_key=idempotency_key
        )

    def add_messages(
        self,
        thread_id: str,
        messages: Sequence[BatchMessage],
        *,
        timeout: Optional[float] = None,
        retries: Optional[int] = None,
        idempotency_key: IdempotencyKey = None,
    ) -> AddMessagesResult:
        """Many messages in one request, all or nothing (at most 1000), in order."""
        path = f"/v1/memory/working/threads/{_segment('thread_id', thread_id)}/messages:batch"
        body = {"messages": _batch(messages)}
        return self._call(
            "POST", path, "write", body=body, timeout=timeout, retries=retries, idempotency_key=idempotency_key
        )

    def messages(
        self,
        thread_id: str,
        *,
        limit: Optional[int] = None,
        before: Optional[int] = None,
        order: Optional[MessageOrder] = None,
        timeout: Optional[float] = None,
        retries: Optional[int] = None,
    ) -> ListMessagesResult:
        """Raw messages, cursor-paginated by sequence number (``before``)."""
        path = f"/v1/memory/working/threads/{_segment('thread_id', thread_id)}/messages"
        query = _fields(limit=limit, before=before, order=order)
        return self._call("GET", path, "read", query=query, timeout=timeout, retries=retries)

    def prepare(
        self,
        thread_id: str,
        *,
        message_limit: Optional[int] = None,
        timeout: Optional[float] = None,
        retries: Optional[int] = None,
    ) -> PrepareResult:
        """The LLM-ready window (no model call). A read: retried."""
        path = f"/v1/memory/working/threads/{_segment('thread_id', thread_id)}/prepare"
        query = _fields(messageLimit=message_limit)
        return self._call("POST", path, "read", query=query, timeout=timeout, retries=retries)

    def compact(
        self,
        thread_id: str,
        *,
        timeout: Optional[float] = None,
        retries: Optional[int] = None,
        idempotency_key: IdempotencyKey = None,
    ) -> Union[CompactResult, NothingToCompact]:
        """Folds older messages into a summary (one model call)."""
        path = f"/v1/memory/working/threads/{_segment('thread_id', thread_id)}/compact"
        return self._call("POST", path, "write", timeout=timeout, retries=retries, idempotency_key=idempotency_key)

    def stats(
        self, thread_id: str, *, timeout: Optional[float] = None, retries: Optional[int] = None
    ) -> ThreadStatsResult:
        path = f"/v1/memory/working/threads/{_segment('thread_id', thread_id)}/stats"
        return self._call("GET", path, "read", timeout=timeout, retries=retries)

    def chat(
        self,
        thread_id: str,
        *,
        content: str,
        message_limit: Optional[int] = None,
        instructions: Optional[str] = None,
        recall: Optional[bool] = None,
        timeout: Optional[float] = None,
        retries: Optional[int] = None,
        idempotency_key: IdempotencyKey = None,
    ) -> ChatReply:
        """The service's own reply: stores the message, recalls, calls its model, stores the
        reply. Not retried on a 5xx (the user's message is already stored then)."""
        path = f"/v1/memory/working/threads/{_segment('thread_id', thread_id)}/chat"
        _content("content", content)
        body = _fields(content=content, messageLimit=message_limit, instructions=instructions, recall=recall)
        return self._call(
            "POST", path, "write-no-5xx", body=body, timeout=timeout, retries=retries,
            idempotency_key=idempotency_key,
        )

    def chat_stream(
        self,
        thread_id: str,
        *,
        content: str,
        message_limit: Optional[int] = None,
        instructions: Optional[str] = None,
        recall: Optional[bool] = None,
        timeout: Optional[float] = None,
        retries: Optional[int] = None,
        idempotency_key: IdempotencyKey = None,
    ) -> ChatStream:
        """The same reply, streamed: iterate for its text chunks; ``stream.reply`` is the stored
        reply once it ends. Retried as ``chat`` is (under its key, never on a 5xx) until the
        response's headers arrive: a repeat meets the first request still streaming (409, waited
        for) or gets the events the service kept of it (the text as one chunk). Once the stream
        has started it is never asked again: a stream cut or stalled midway raises. ``timeout``
        bounds the wait for the stream to start and each gap between chunks."""
        path = f"/v1/memory/working/threads/{_segment('thread_id', thread_id)}/chat"
        _content("content", content)
        body = _fields(content=content, messageLimit=message_limit, instructions=instructions, recall=recall)
        response, connection, key = self._call(
            "POST", path, "write-no-5xx", body=body, timeout=timeout, retries=retries,
            idempotency_key=idempotency_key, accept="text/event-stream",
        )
        return self._stream(response, connection, f"POST {path}", key)


class Episodes(_Resource):
    """Episodes: ``client.episodes``."""

    def list(
        self,
        dataset: str,
        *,
        limit: Optional[int] = None,
        before: Optional[str] = None,
        before_id: Optional[str] = None,
        status: Optional[EpisodeStatus] = None,
        timeout: Optional[float] = None,
        retries: Optional[int] = None,
    ) -> ListEpisodesResult:
        """Episodes by ``endedAt``, newest first (``status`` default completed; ``before``: an
        ISO datetime cursor, the last one's ``endedAt``; ``before_id``: its ``episodeId`` too, so
        that episodes ending at that same instant are on the next page)."""
        path = f"/v1/memory/episodic/datasets/{_segment('dataset', _dataset(dataset))}/episodes"
        query = _fields(limit=limit, before=before, beforeId=before_id, status=status)
        return self._call("GET", path, "read", query=query, timeout=timeout, retries=retries)

    def search(
        self,
        dataset: str,
        q: str,
        *,
        limit: Optional[int] = None,
        timeout: Optional[float] = None,
        retries: Optional[int] = None,
    ) -> SearchEpisodesResult:
        """Semantic search of completed episodes' summaries."""
        path = f"/v1/memory/episodic/datasets/{_segment('dataset', _dataset(dataset))}/episodes/search"
        query = _fields(q=_required("q", q), limit=limit)
        return self._call("GET", path, "read", query=query, timeout=timeout, retries=retries)

    def get(
        self, episode_id: str, *, timeout: Optional[float] = None, retries: Optional[int] = None
    ) -> GetEpisodeResult:
        path = f"/v1/memory/episodic/episodes/{_segment('episode_id', episode_id)}"
        return self._call("GET", path, "read", timeout=timeout, retries=retries)

    def delete(
        self,
        episode_id: str,
        *,
        timeout: Optional[float] = None,
        retries: Optional[int] = None,
        idempotency_key: IdempotencyKey = None,
    ) -> DeleteEpisodeResult:
        """Archives the episode: it leaves retrieval, its facts remain."""
        path = f"/v1/memory/episodic/episodes/{_segment('episode_id', episode_id)}"
        return self._call("DELETE", path, "write", timeout=timeout, retries=retries, idempotency_key=idempotency_key)

    def retry(
        self,
        episode_id: str,
        *,
        timeout: Optional[float] = None,
        retries: Optional[int] = None,
        idempotency_key: IdempotencyKey = None,
    ) -> RetryEpisodeResult:
        """Re-queues a failed episode now."""
        path = f"/v1/memory/episodic/episodes/{_segment('episode_id', episode_id)}/retry"
        return self._call("POST", path, "write", timeout=timeout, retries=retries, idempotency_key=idempotency_key)


class Facts(_Resource):
    """Facts: ``client.facts``."""

    def list(
        self,
        dataset: str,
        *,
        limit: Optional[int] = None,
        episode_id: Optional[str] = None,
        entity: Optional[str] = None,
        include_invalidated: Optional[bool] = None,
        timeout: Optional[float] = None,
        retries: Optional[int] = None,
    ) -> ListFactsResult:
        path = f"/v1/memory/semantic/datasets/{_segment('dataset', _dataset(dataset))}/facts"
        query = _fields(limit=limit, episodeId=episode_id, entity=entity, includeInvalidated=include_invalidated)
        return self._call("GET", path, "read", query=query, timeout=timeout, retries=retries)

    def delete(
        self,
        dataset: str,
        fact_id: str,
        *,
        timeout: Optional[float] = None,
        retries: Optional[int] = None,
        idempotency_key: IdempotencyKey = None,
    ) -> DeleteFactResult:
        """Invalidates the fact (it leaves retrieval; the row remains)."""
        path = (
            f"/v1/memory/semantic/datasets/{_segment('dataset', _dataset(dataset))}"
            f"/facts/{_segment('fact_id', fact_id)}"
        )
        return self._call("DELETE", path, "write", timeout=timeout, retries=retries, idempotency_key=idempotency_key)


class Entities(_Resource):
    """Entities: ``client.entities``."""

    def list(
        self, dataset: str, *, timeout: Optional[float] = None, retries: Optional[int] = None
    ) -> ListEntitiesResult:
        path = f"/v1/memory/semantic/datasets/{_segment('dataset', _dataset(dataset))}/entities"
        return self._call("GET", path, "read", timeout=timeout, retries=retries)

    def facts(
        self, dataset: str, name: str, *, timeout: Optional[float] = None, retries: Optional[int] = None
    ) -> EntityFactsResult:
        """Live facts linked to an entity (an unknown entity has none)."""
        path = (
            f"/v1/memory/semantic/datasets/{_segment('dataset', _dataset(dataset))}"
            f"/entities/{_segment('name', name)}/facts"
        )
        return self._call("GET", path, "read", timeout=timeout, retries=retries)


class Datasets(_Resource):
    """Whole datasets: ``client.datasets``."""

    def export(
        self, dataset: str, *, timeout: Optional[float] = None, retries: Optional[int] = None
    ) -> DatasetExport:
        """Everything in the dataset, unpaginated."""
        path = f"/v1/memory/recall/datasets/{_segment('dataset', _dataset(dataset))}/export"
        return self._call("GET", path, "read", timeout=timeout, retries=retries)

    def delete(
        self,
        dataset: str,
        *,
        timeout: Optional[float] = None,
        retries: Optional[int] = None,
        idempotency_key: IdempotencyKey = None,
    ) -> DeleteDatasetResult:
        """Hard-erases every thread, message, episode, fact and entity of the dataset. No undo."""
        path = f"/v1/memory/recall/datasets/{_segment('dataset', _dataset(dataset))}"
        return self._call("DELETE", path, "write", timeout=timeout, retries=retries, idempotency_key=idempotency_key)


class Memory(_Resource):
    """The calls on the whole memory, mixed into the client: ``client.recall``,
    ``client.add_messages``."""

    def recall(
        self,
        dataset: str,
        query: Optional[str] = None,
        *,
        include: Optional[Sequence[RecallPart]] = None,
        limit: Optional[int] = None,
        min_confidence: Optional[float] = None,
        as_of: Optional[str] = None,
        message_limit: Optional[int] = None,
        timeout: Optional[float] = None,
        retries: Optional[int] = None,
    ) -> RecallResponse:
        """What the service knows about a dataset, as a prompt-ready block (``context``). A read:
        retried. Without ``include`` it asks for ``["messages"]``: the conversation's best-matching
        messages come back (and into the block) as soon as they are stored, before any episode;
        ``include=[]`` gives the facts-only answer of the plain API."""
        if query is not None and len(query) > 2000:
            raise InvalidRequestError("query: must be at most 2000 characters")
        body = _fields(
            dataset=_dataset(dataset),
            query=query,
            include=list(include) if include is not None else ["messages"],
            limit=limit,
            minConfidence=min_confidence,
            asOf=as_of,
            messageLimit=message_limit,
        )
        return self._call("POST", "/v1/memory/recall", "read", body=body, timeout=timeout, retries=retries)

    def usage(
        self,
        *,
        start: Optional[str] = None,
        end: Optional[str] = None,
        group_by: Optional[str] = None,
        limit: Optional[int] = None,
        timeout: Optional[float] = None,
        retries: Optional[int] = None,
    ) -> UsageReport:
        """What the project's model calls cost: the usage ledger over ``[start, end)`` (ISO datetime
        or YYYY-MM-DD; default this month), grouped by ``day``, ``dataset``, ``operation`` or
        ``model``, and the monthly token budget. A read: retried."""
        query = _fields(start=start, end=end, groupBy=group_by, limit=limit)
        return self._call("GET", "/v1/usage", "read", query=query, timeout=timeout, retries=retries)

    def add_messages(
        self,
        messages: Sequence[CrossThreadMessage],
        *,
        timeout: Optional[float] = None,
        retries: Optional[int] = None,
        idempotency_key: IdempotencyKey = None,
    ) -> AddMessagesAcrossThreadsResult:
        """Messages for many threads in one request, all or nothing; each names its ``threadId``."""
        batch = _batch(messages)
        for i, message in enumerate(batch):
            _required(f"messages[{i}].threadId", message.get("threadId"))
        return self._call(
            "POST", "/v1/memory/working/messages:batch", "write",
            body={"messages": batch}, timeout=timeout, retries=retries, idempotency_key=idempotency_key,
        )
