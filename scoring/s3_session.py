"""aiobotocore's HTTP session with a whole-request deadline (``storage.with_deadline`` gives it to
s3fs for every ``s3://`` file system the engine, the score tables and the app make).

botocore's ``read_timeout`` bounds the wait for each byte of an answer, not the answer: an
endpoint that sends one byte within every read deadline holds a request for as long as it likes.
This session gives every request a total deadline as well (aiohttp's ``ClientTimeout.total``,
which covers connecting, sending, the status line, the headers and reading the body to its end),
so such a request is cut and botocore reports a ``ReadTimeoutError`` like a silent one. The total
is given by the caller (``functools.partial(DeadlineSession, total=...)`` as ``http_session_cls``:
aiobotocore calls it, it need not be a class); this module holds no rule of its own.

Needs the ``dask`` extra (s3fs brings aiobotocore): imported only where an ``s3://`` file system
is made.
"""

from __future__ import annotations

from typing import Any

import aiohttp
from aiobotocore.httpsession import AIOHTTPSession


def _with_total(timeout: aiohttp.ClientTimeout, total: float) -> aiohttp.ClientTimeout:
    return aiohttp.ClientTimeout(total=total, connect=timeout.connect, sock_connect=timeout.sock_connect,
                                 sock_read=timeout.sock_read, ceil_threshold=timeout.ceil_threshold)


class DeadlineSession(AIOHTTPSession):
    """``AIOHTTPSession`` whose every request, body included, ends within ``total`` seconds."""

    _timeout: aiohttp.ClientTimeout

    def __init__(self, *args: Any, total: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._total = float(total)
        self._timeout = _with_total(self._timeout, self._total)

    def _get_request_timeout(self, request: Any) -> aiohttp.ClientTimeout:
        # aiobotocore's own answer is None (the session's timeout) or a request's read deadline
        # without a total; either way the request keeps the total.
        return _with_total(super()._get_request_timeout(request) or self._timeout, self._total)
