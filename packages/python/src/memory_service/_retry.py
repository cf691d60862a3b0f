"""When to try a call again, and after how long: pure decisions (the loops acting on them are in
_transport.py)."""

from __future__ import annotations

import random
import time
from email.utils import parsedate_to_datetime
from typing import Callable, Optional

from ._errors import APIConnectionError, APIError, MemoryServiceError

# How a call may be repeated:
# - "safe": reads (GET, recall, prepare): always;
# - "keyed": a write sent with an Idempotency-Key: the service answers a repeat from the first answer;
# - "keyed-no-5xx": a keyed write whose 5xx may already have written part of its work (chat stores
#   the user's message before the model call, and a 5xx frees the key: a retry would store it again);
# - "unsafe": a write sent without a key: never repeated.
SAFE, KEYED, KEYED_NO_5XX, UNSAFE = "safe", "keyed", "keyed-no-5xx", "unsafe"


def is_retryable(error: MemoryServiceError, repeatability: str) -> bool:
    """Whether a failed attempt may be repeated (the attempt count is checked by the caller)."""
    if repeatability == UNSAFE:
        return False
    if isinstance(error, APIConnectionError):
        return True
    if not isinstance(error, APIError):
        return False
    status = error.status
    if status == 429:
        return True
    # 409 on /v1: "a request with this Idempotency-Key is still being processed; retry later".
    if status == 409:
        return repeatability != SAFE
    if status >= 500:
        return repeatability != KEYED_NO_5XX and status != 501
    return False


def backoff(
    retry: int,
    base: float,
    maximum: float,
    retry_after: Optional[float] = None,
    draw: Callable[[], float] = random.random,
) -> Optional[float]:
    """The wait in seconds before retry number ``retry`` (0 for the first): "full jitter"
    exponential backoff, uniform in [0, min(maximum, base * 2**retry)), so clients that failed
    together do not come back together. A ``Retry-After`` is a floor; None when it is longer than
    ``maximum`` (the caller gives up and raises rather than sleeping that long)."""
    if retry_after is not None and retry_after > maximum:
        return None
    ceiling = min(maximum, base * (2**retry))
    return max(draw() * ceiling, retry_after or 0.0)


def parse_retry_after(value: Optional[str], now: Optional[float] = None) -> Optional[float]:
    """``Retry-After`` in seconds: delay-seconds or an HTTP date; None when absent or unreadable."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        at = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, at - (time.time() if now is None else now))
