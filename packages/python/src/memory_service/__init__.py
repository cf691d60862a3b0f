"""A client for the conversational memory service's /v1 API, standard library only.

    from memory_service import MemoryClient

    client = MemoryClient()  # MEMORY_API_URL, MEMORY_API_KEY
    block = client.recall("user-42", "Where does the user live?")["context"]

``MemoryClient`` blocks; ``AsyncMemoryClient`` has the same methods as coroutines.
"""

from ._client import AsyncMemoryClient, MemoryClient
from ._errors import (
    APIConnectionError,
    APIError,
    APITimeoutError,
    AuthenticationError,
    ChatStreamError,
    ConflictError,
    IdempotencyKeyReusedError,
    InternalServerError,
    InvalidRequestError,
    InvalidResponseError,
    MemoryServiceError,
    NotFoundError,
    PayloadTooLargeError,
    ProviderUnavailableError,
    RateLimitError,
    ValidationError,
    WaitTimeoutError,
)
from ._schema import *  # noqa: F401,F403  (the TypedDicts of every request and response)
from ._schema import OPERATIONS, Operation
from ._stream import AsyncChatStream, ChatStream
from ._transport import RetryEvent
from ._version import __version__

__all__ = [
    "MemoryClient",
    "AsyncMemoryClient",
    "ChatStream",
    "AsyncChatStream",
    "RetryEvent",
    "OPERATIONS",
    "Operation",
    "MemoryServiceError",
    "APIError",
    "ValidationError",
    "AuthenticationError",
    "NotFoundError",
    "ConflictError",
    "PayloadTooLargeError",
    "IdempotencyKeyReusedError",
    "RateLimitError",
    "InternalServerError",
    "ProviderUnavailableError",
    "APIConnectionError",
    "APITimeoutError",
    "InvalidResponseError",
    "InvalidRequestError",
    "ChatStreamError",
    "WaitTimeoutError",
    "__version__",
]
