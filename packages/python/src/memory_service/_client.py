"""The blocking client and the asyncio client: the same resources over one transport."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable, Dict, List, Mapping, Optional, Tuple

from ._async_resources import (
    AsyncDatasets,
    AsyncEntities,
    AsyncEpisodes,
    AsyncFacts,
    AsyncMemory,
    AsyncThreads,
)
from ._errors import (
    APIConnectionError,
    APIError,
    InvalidRequestError,
    MemoryServiceError,
    WaitTimeoutError,
)
from ._resources import Datasets, Entities, Episodes, Facts, Memory, Threads
from ._schema import Episode
from ._retry import SAFE, is_retryable
from ._transport import RetryEvent, Transport

_ACTIVE = ("pending", "processing")
_DONE = ("completed", "failed")
_PAGE = 50
"""Episodes read per page when looking for a thread's: the API's largest page (1-50)."""


def _finished(episode: Episode, facts: bool) -> bool:
    """Completed, failed or archived (archived is final too); with ``facts``, a completed episode
    also needs its extraction report (written once fact extraction has run)."""
    if episode["status"] in ("failed", "archived"):
        return True
    return episode["status"] == "completed" and (not facts or episode.get("extractionReport") is not None)


Cursor = Tuple[str, str]
"""Where the next page of episodes starts: the last one's ``endedAt`` and ``episodeId``."""


def _scan(page: Dict[str, Any], thread_id: str) -> Tuple[Optional[Episode], Optional[Cursor]]:
    """One page of the dataset's episodes (newest ``endedAt`` first): the thread's first one on
    it, or else the cursor of the next page (None when there is none). The cursor holds the last
    episode's id as well: episodes of threads imported in one batch end at the same instant, and
    ``before`` alone skipped those past a page's end, so a wait never found its thread's."""
    episodes = page["episodes"]
    for episode in episodes:
        if episode["threadId"] == thread_id:
            return episode, None
    if not (page.get("hasMore") and episodes):
        return None, None
    return None, (episodes[-1]["endedAt"], episodes[-1]["episodeId"])


def _after(cursor: Optional[Cursor]) -> Dict[str, str]:
    """The list's cursor arguments for the page after ``cursor`` (none for the first)."""
    return {"before": cursor[0], "before_id": cursor[1]} if cursor else {}


def _newest_of_thread(pages: Callable[[Optional[Cursor]], Dict[str, Any]], thread_id: str) -> Optional[Episode]:
    """The thread's newest episode of one status: pages of the dataset's until one of the
    thread's comes, or the pages run out."""
    found, before = _scan(pages(None), thread_id)
    while found is None and before is not None:
        found, before = _scan(pages(before), thread_id)
    return found


async def _newest_of_thread_async(
    pages: Callable[[Optional[Cursor]], Awaitable[Dict[str, Any]]], thread_id: str
) -> Optional[Episode]:
    """As ``_newest_of_thread``, for the asyncio client."""
    found, before = _scan(await pages(None), thread_id)
    while found is None and before is not None:
        found, before = _scan(await pages(before), thread_id)
    return found


def _latest(episodes: List[Episode]) -> Optional[Episode]:
    return max(episodes, key=lambda e: (e.get("createdAt") or "", e["episodeId"])) if episodes else None


def _thread_state(found: Dict[str, Optional[Episode]], facts: bool) -> Tuple[Optional[Episode], bool]:
    """A thread's episode to report, and whether the wait is over: its newest active one while
    any is pending or processing, else its newest finished one."""
    active = [e for e in (found["pending"], found["processing"]) if e is not None]
    last = _latest(active) or _latest([e for e in (found["completed"], found["failed"]) if e is not None])
    return last, not active and last is not None and _finished(last, facts)


def _poll_timeout(timeout: Optional[float], left: float) -> float:
    """One poll's timeout: the client's, cut to the time the wait has left (a past deadline
    leaves a moment: the call times out, and the wait ends)."""
    left = max(left, 0.001)
    return left if not timeout else min(timeout, left)


def _pause(poll_interval: float, failure: Optional[MemoryServiceError]) -> float:
    """Until the next poll: ``poll_interval``, or a failed poll's ``Retry-After`` when longer."""
    retry_after = failure.retry_after if isinstance(failure, APIError) else None
    return max(poll_interval, retry_after or 0.0)


def _wait_timeout(
    timeout: float, last: Optional[Episode], failure: Optional[MemoryServiceError]
) -> WaitTimeoutError:
    message = f"the episode did not finish within {timeout} s" + (
        f" (last seen: {last['status']})" if last else " (none found)"
    )
    if failure is not None:
        message += f"; last error: {type(failure).__name__}: {failure}"
    return WaitTimeoutError(message, last, failure)


_DOC = """
    ``base_url`` (default ``MEMORY_API_URL``) is where the service is, e.g.
    ``http://127.0.0.1:8787`` (no ``/v1``); ``api_key`` (default ``MEMORY_API_KEY``) a project's
    API key, a server-side secret.

    ``timeout``: seconds one attempt may take (connecting, and each read), default 30; 0 or None
    is no limit.
    ``max_retries``: attempts after the first for a retryable failure (default 2): connection
    errors and timeouts, 5xx (not 501), 429, and for writes 409 (the same key still running: waited
    out, honouring ``Retry-After``, for up to (max_retries + 1) x timeout from the call's start,
    without using up retries); never another 4xx, and never a chat's 5xx. A keyed write's
    exception carries ``idempotency_key``, to resume it with. ``backoff_base``/``backoff_max``: the first wait's
    ceiling and the longest wait, in seconds (0.25 and 10): full-jitter exponential backoff, and
    at least a ``Retry-After`` (one longer than ``backoff_max`` is not waited for).
    ``idempotency_keys``: send an automatic ``Idempotency-Key`` on every write (default True; a
    write without one is never retried). ``on_retry``: called with a ``RetryEvent`` before each
    retry. ``headers``: sent on every call.
"""


class MemoryClient(Memory):
    __doc__ = (
        """A blocking client for the memory service's /v1 API (standard library only; safe to share
    between threads: each thread keeps its own connection).
    """
        + _DOC
    )

    threads: Threads
    episodes: Episodes
    facts: Facts
    entities: Entities
    datasets: Datasets

    def __init__(
        self,
        base_url: Optional[str] = None,
        api_key: Optional[str] = None,
        *,
        timeout: Optional[float] = 30.0,
        max_retries: int = 2,
        backoff_base: float = 0.25,
        backoff_max: float = 10.0,
        idempotency_keys: bool = True,
        on_retry: Optional[Callable[[RetryEvent], None]] = None,
        headers: Optional[Mapping[str, str]] = None,
    ) -> None:
        transport = Transport(
            base_url,
            api_key,
            timeout=timeout,
            max_retries=max_retries,
            backoff_base=backoff_base,
            backoff_max=backoff_max,
            idempotency_keys=idempotency_keys,
            headers=headers,
            on_retry=on_retry,
        )
        super().__init__(transport, transport.call)
        self.threads = Threads(transport, transport.call)
        self.episodes = Episodes(transport, transport.call)
        self.facts = Facts(transport, transport.call)
        self.entities = Entities(transport, transport.call)
        self.datasets = Datasets(transport, transport.call)

    @property
    def base_url(self) -> str:
        return self._transport.base_url

    def wait_for_episode(
        self,
        episode_id: Optional[str] = None,
        *,
        thread_id: Optional[str] = None,
        facts: bool = False,
        timeout: float = 60.0,
        poll_interval: float = 0.25,
    ) -> Episode:
        """Waits until an episode is completed, failed or archived, and returns it (check
        ``status``).

        By ``episode_id`` (as ``threads.end`` returns it), or by ``thread_id``: the thread's
        newest episode, once none of its episodes is pending or processing. With ``facts=True``
        a completed episode also waits for its fact extraction (its ``extractionReport``), so
        that facts and recall include it; an extraction that is skipped (semantic memory off)
        or fails writes no report, and the wait then times out.

        ``timeout`` bounds the whole wait: each poll is one attempt cut to the time left, and a
        poll that fails for a reason worth retrying (5xx, 429, a connection error or a timeout)
        is polled again after ``poll_interval`` (or its ``Retry-After``), until the deadline. Then
        it raises ``WaitTimeoutError`` (``episode`` as last seen, ``last_error`` the last failed
        poll's, if the last poll failed). Any other error (404: no such episode or thread, 401)
        is raised at once.
        """
        if (episode_id is None) == (thread_id is None):
            raise InvalidRequestError("wait_for_episode: pass episode_id or thread_id (one of them)")
        deadline = time.monotonic() + timeout

        def bound() -> Dict[str, Any]:
            # Each call is one attempt cut to the time left: the loop below is the retry.
            return {"timeout": _poll_timeout(self._transport.timeout, deadline - time.monotonic()), "retries": 0}

        dataset: Optional[str] = None
        last: Optional[Episode] = None
        failure: Optional[MemoryServiceError] = None
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise _wait_timeout(timeout, last, failure)
            try:
                if episode_id is not None:
                    last = self.episodes.get(episode_id, **bound())["episode"]
                    done = _finished(last, facts)
                else:
                    if dataset is None:
                        dataset = self.threads.get(thread_id, **bound())["dataset"]
                    found = {
                        status: _newest_of_thread(
                            lambda cursor, status=status: self.episodes.list(
                                dataset, status=status, limit=_PAGE, **_after(cursor), **bound()
                            ),
                            thread_id,
                        )
                        for status in (*_ACTIVE, *_DONE)
                    }
                    last, done = _thread_state(found, facts)
                failure = None
            except (APIError, APIConnectionError) as error:
                if not is_retryable(error, SAFE):
                    raise
                failure, done = error, False
            if done and last is not None:
                return last
            pause = _pause(poll_interval, failure)
            if time.monotonic() + pause > deadline:
                raise _wait_timeout(timeout, last, failure)
            time.sleep(pause)

    def close(self) -> None:
        """Closes the kept-alive connections."""
        self._transport.close()

    def __enter__(self) -> "MemoryClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class AsyncMemoryClient(AsyncMemory):
    __doc__ = (
        """The asyncio client: the same methods as ``MemoryClient``, as coroutines
    (``await client.recall(...)``). Each attempt runs the blocking transport in the client's own
    thread pool (``max_concurrency`` threads, default min(32, CPUs + 4)); waits between retries
    are ``asyncio.sleep``, so the event loop never blocks.
    """
        + _DOC
    )

    threads: AsyncThreads
    episodes: AsyncEpisodes
    facts: AsyncFacts
    entities: AsyncEntities
    datasets: AsyncDatasets

    def __init__(
        self,
        base_url: Optional[str] = None,
        api_key: Optional[str] = None,
        *,
        timeout: Optional[float] = 30.0,
        max_retries: int = 2,
        backoff_base: float = 0.25,
        backoff_max: float = 10.0,
        idempotency_keys: bool = True,
        on_retry: Optional[Callable[[RetryEvent], None]] = None,
        headers: Optional[Mapping[str, str]] = None,
        max_concurrency: Optional[int] = None,
    ) -> None:
        transport = Transport(
            base_url,
            api_key,
            timeout=timeout,
            max_retries=max_retries,
            backoff_base=backoff_base,
            backoff_max=backoff_max,
            idempotency_keys=idempotency_keys,
            headers=headers,
            on_retry=on_retry,
            max_workers=max_concurrency,
        )
        call = transport.call_async
        super().__init__(transport, call)
        self.threads = AsyncThreads(transport, call)
        self.episodes = AsyncEpisodes(transport, call)
        self.facts = AsyncFacts(transport, call)
        self.entities = AsyncEntities(transport, call)
        self.datasets = AsyncDatasets(transport, call)

    @property
    def base_url(self) -> str:
        return self._transport.base_url

    async def wait_for_episode(
        self,
        episode_id: Optional[str] = None,
        *,
        thread_id: Optional[str] = None,
        facts: bool = False,
        timeout: float = 60.0,
        poll_interval: float = 0.25,
    ) -> Episode:
        """As ``MemoryClient.wait_for_episode``."""
        if (episode_id is None) == (thread_id is None):
            raise InvalidRequestError("wait_for_episode: pass episode_id or thread_id (one of them)")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout

        def bound() -> Dict[str, Any]:
            return {"timeout": _poll_timeout(self._transport.timeout, deadline - loop.time()), "retries": 0}

        dataset: Optional[str] = None
        last: Optional[Episode] = None
        failure: Optional[MemoryServiceError] = None
        while True:
            left = deadline - loop.time()
            if left <= 0:
                raise _wait_timeout(timeout, last, failure)
            try:
                if episode_id is not None:
                    last = (await self.episodes.get(episode_id, **bound()))["episode"]
                    done = _finished(last, facts)
                else:
                    if dataset is None:
                        dataset = (await self.threads.get(thread_id, **bound()))["dataset"]
                    # One status after the other, in the order an episode goes through them (as the
                    # blocking client does): one that moves on between two reads is seen in the
                    # later one. Read together, an episode completing meanwhile could be in neither
                    # the processing list (read after) nor the completed one (read before), and the
                    # wait returned the thread's previous episode.
                    found: Dict[str, Optional[Episode]] = {}
                    for status in (*_ACTIVE, *_DONE):
                        found[status] = await _newest_of_thread_async(
                            lambda cursor, status=status: self.episodes.list(
                                dataset, status=status, limit=_PAGE, **_after(cursor), **bound()
                            ),
                            thread_id,
                        )
                    last, done = _thread_state(found, facts)
                failure = None
            except (APIError, APIConnectionError) as error:
                if not is_retryable(error, SAFE):
                    raise
                failure, done = error, False
            if done and last is not None:
                return last
            pause = _pause(poll_interval, failure)
            if loop.time() + pause > deadline:
                raise _wait_timeout(timeout, last, failure)
            await asyncio.sleep(pause)

    async def aclose(self) -> None:
        """Closes the kept-alive connections and the thread pool."""
        self._transport.close()

    async def __aenter__(self) -> "AsyncMemoryClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()
