"""The exceptions the client raises. Every one extends ``MemoryServiceError``."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Type

from ._schema import Episode


class MemoryServiceError(Exception):
    """Base of every exception this client raises: one ``except`` catches them all."""

    idempotency_key: Optional[str] = None
    """A write sent with an ``Idempotency-Key`` (the automatic one, or yours) that failed: the key
    it and its retries were sent with. Pass it as the call's ``idempotency_key`` to resume the
    write: if the service did it, the repeat gets the stored answer (a 409 while it still runs);
    if not, it runs once."""


class APIError(MemoryServiceError):
    """The service answered with an error status.

    ``message`` is the service's own (the ``error`` of its body); messages are not stable, so
    branch on the class or on ``status``. ``body`` is the whole parsed body (or ``{"error": text}``
    when something other than the service answered, such as a proxy's HTML page).
    """

    status: int
    body: Dict[str, Any]
    message: str
    headers: Dict[str, str]
    retry_after: Optional[float]
    """The wait the service asked for (``Retry-After``), in seconds, when it sent one."""
    request: str
    """Method and path of the failed call, for logs (``POST /v1/threads``)."""

    def __init__(
        self,
        status: int,
        body: Dict[str, Any],
        *,
        headers: Optional[Mapping[str, str]] = None,
        retry_after: Optional[float] = None,
        request: str = "",
    ) -> None:
        self.status = status
        self.body = body
        self.message = str(body.get("error") or f"HTTP {status}")
        self.headers = dict(headers or {})
        self.retry_after = retry_after
        self.request = request
        super().__init__(f"{status} {self.message}" + (f" ({request})" if request else ""))


class ValidationError(APIError):
    """400: the request was invalid. ``issues`` name the offending fields (the spec's zod issues:
    ``code``, ``path``, ``message`` and code-specific details)."""

    @property
    def issues(self) -> List[Dict[str, Any]]:
        issues = self.body.get("issues")
        return issues if isinstance(issues, list) else []


class AuthenticationError(APIError):
    """401: no API key, an unknown one, or a revoked one."""


class NotFoundError(APIError):
    """404: not found, or not in the API key's project (the same answer)."""


class ConflictError(APIError):
    """409: a request with this ``Idempotency-Key`` is still being processed (the client waits and
    asks again, honouring ``Retry-After``, for up to (retries + 1) x timeout from the call's start)."""


class PayloadTooLargeError(APIError):
    """413: the body is over the service's limit (1 MB; 5 MB for a batch of messages), raised by the
    service or, for a body already known to be over it, before sending."""


class IdempotencyKeyReusedError(APIError):
    """422: this ``Idempotency-Key`` was used for a different request (method, path or body)."""


class RateLimitError(APIError):
    """429: chat once the project's monthly token budget is spent (its user message is stored),
    or a proxy in front of the service (the service itself has no rate limit)."""


class InternalServerError(APIError):
    """500 and other 5xx: the request failed on the server (``Failed to generate reply``, ...)."""


class ProviderUnavailableError(InternalServerError):
    """503: a dependency is unavailable (a proxy's or gateway's 503; the database, on /health)."""


class APIConnectionError(MemoryServiceError):
    """The request got no answer: connection refused or reset, DNS, a body cut short."""


class APITimeoutError(APIConnectionError):
    """An attempt took longer than its timeout and was abandoned."""


class InvalidResponseError(APIConnectionError):
    """A 2xx answer whose body is not JSON: not the service's answer (a proxy's or a captive
    portal's page), so no usable answer came. Retried like a connection error (a write under its
    key: the repeat gets the service's stored answer); ``status`` is the 2xx that came, and the
    message starts with what it held."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class InvalidRequestError(MemoryServiceError, ValueError):
    """Refused before sending: an input the service would reject (an empty id, a dataset over 256
    characters, empty content, an ``idempotency_key`` it would refuse), or one that would reach
    another route (a path value ``.`` or ``..``)."""


class ChatStreamError(MemoryServiceError):
    """A streamed chat reply ended with an ``error`` event (the provider failed midway); no reply
    was stored."""


class WaitTimeoutError(MemoryServiceError, TimeoutError):
    """``wait_for_episode`` gave up: the episode did not finish in time. ``episode`` is the last
    state seen (None when none was found); ``last_error`` what the last poll raised when it failed
    (the service down or hung through the deadline), else None."""

    def __init__(
        self,
        message: str,
        episode: Optional[Episode] = None,
        last_error: Optional[MemoryServiceError] = None,
    ) -> None:
        super().__init__(message)
        self.episode = episode
        self.last_error = last_error


_BY_STATUS: Dict[int, Type[APIError]] = {
    400: ValidationError,
    401: AuthenticationError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    422: IdempotencyKeyReusedError,
    429: RateLimitError,
    503: ProviderUnavailableError,
}


def error_for(status: int) -> Type[APIError]:
    """The exception class for an error status."""
    found = _BY_STATUS.get(status)
    if found is not None:
        return found
    return InternalServerError if status >= 500 else APIError
