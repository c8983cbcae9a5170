"""Where the Dask engine reads and writes: local paths and fsspec URLs, the protocols taken, the
file system of a location with every request to it under the storage deadline, and how a
storage error is said (unreachable, missing, no credentials). The engine, the score table's
reader and the app make every file system they use here."""

from __future__ import annotations

import contextlib
import difflib
import functools
import inspect
import os
import re
from collections.abc import Iterator

from ..errors import InputError, LitmusReviewError
from ..files import check_regular

URL_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")
"""How a URL begins (``scheme://``): a location without it is a local path."""
PROTOCOLS = frozenset({"file", "local", "s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "hdfs", "http", "https"})
"""The fsspec protocols the engine reads and writes. Any other (``zip://``, ``reference://``,
``data:``, ``memory://``, ``dask://``, ``ftp://``...) and every chained URL (``a::b``) is refused
with a message naming the location: some keep nothing (``memory://``), some read other
locations named inside the URL (``zip://...::data:``), and fsspec's own errors for the rest are
tracebacks, not answers."""
WRITE_PROTOCOLS = PROTOCOLS - {"http", "https"}
"""Where ``--out`` may write (HTTP takes no directory)."""


def protocol(url: str) -> str:
    """The fsspec protocol of a location (``file`` for a local path)."""
    return url.split("://", 1)[0].lower() if URL_SCHEME.match(url) else "file"


def check_location(url: str, allowed: frozenset[str] = PROTOCOLS, *, what: str = "location") -> None:
    """InputError naming ``url`` unless it is a local path or a URL of an ``allowed`` protocol,
    not chained (checked before fsspec sees it)."""
    if "::" in url:
        raise InputError(f"chained URLs (with '::') are not read; give the {what} as a path or a plain URL",
                         source=url)
    proto = protocol(url)
    if proto not in allowed:
        verb = "written" if allowed is WRITE_PROTOCOLS else "read"
        raise InputError(f"the {proto}:// protocol is not {verb} here (allowed: "
                         f"{', '.join(sorted(allowed - {'local'}))})", source=url)


def file_system(url: str, storage_options: dict, allowed: frozenset[str] = PROTOCOLS):
    """(file system, path) of ``url``, every request to it under the storage deadline
    (``with_deadline``): the one place the engine, the score tables and the app make one."""
    import fsspec  # optional: the dask extra

    check_location(url, allowed)
    options = with_deadline(url, storage_options)
    try:
        fs, path = fsspec.core.url_to_fs(url, **options)
    except (ImportError, ValueError, TypeError, OSError) as exc:  # a missing backend, a malformed URL
        raise InputError(f"cannot open this location: {type(exc).__name__}: {exc}", source=url) from exc
    if protocol(url) in ("s3", "s3a"):
        # s3fs tries each call again up to 5 times (its class attribute; no option sets it), each
        # time with all of botocore's attempts: 25 waits of the read deadline for one call to an
        # endpoint that never answers. Botocore's attempts (with_deadline) are the only ones.
        fs.retries = 1
    return fs, path


STORAGE_TIMEOUT_ENV = "LITMUS_REVIEW_STORAGE_TIMEOUT"
"""The storage deadline in seconds (``--storage-timeout`` sets it for a command and the
LocalCluster it starts): how long one request to an object store may wait for an answer."""
DEFAULT_STORAGE_TIMEOUT_S = 15.0
"""The read deadline of a request when nothing sets one: s3fs's own (what its users have run
with for years); it bounds the wait for each byte, not a transfer, so a large read is never cut."""
CONNECT_TIMEOUT_S = 5.0
"""The most a connection may take (the storage deadline when it is smaller): a reachable
endpoint connects in well under a second; 5 s lets two lost SYNs be sent again (Linux resends
at 1 s and 3 s)."""
STORAGE_ATTEMPTS = 2
"""Attempts of one request (one retry, for a dropped connection or a throttled request):
botocore's default of 5 legacy attempts, inside s3fs's 5 tries, made an endpoint that accepts
and never answers hold a call for 25 read deadlines."""
MAX_STORAGE_TIMEOUT_S = 3600.0
STORAGE_TOTAL_READS = 4
"""A request's whole-call deadline, in read deadlines beyond its connection's: a request (one page
of a listing, one byte range of a file, one part of an upload), its answer read to the end, must
be done within ``connect + STORAGE_TOTAL_READS × read`` seconds (``request_deadline``), or it is
cut as a silent one is. The read deadline alone is met by an endpoint that sends a byte within
each; the total is not. It bounds one request, never a call: listing a bucket of a million keys
is a thousand requests of a thousand keys, each with its own. The largest single request made is
a read of s3fs's read-ahead block (50 MiB) with the bytes asked for (an engine block of 16 MiB),
or an upload's 50 MiB part: by default, about 1 MiB/s (66 MiB in 65 s); a slower link takes a
longer storage deadline, which moves the total with it."""


def storage_timeout(value: str | float | None = None, *, what: str = STORAGE_TIMEOUT_ENV) -> float:
    """The storage deadline in seconds: ``value`` (a setting's), else the environment's
    ``LITMUS_REVIEW_STORAGE_TIMEOUT``, else the default. InputError naming ``what`` for a value
    that is not a number of seconds in (0, 3600]: there is always a deadline."""
    if value is None:
        value = os.environ.get(STORAGE_TIMEOUT_ENV, "").strip() or None
        if value is None:
            return DEFAULT_STORAGE_TIMEOUT_S
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = float("nan")
    if not 0 < seconds <= MAX_STORAGE_TIMEOUT_S:  # NaN fails too
        raise InputError(f"the storage deadline must be a number of seconds above 0 and at most "
                         f"{MAX_STORAGE_TIMEOUT_S:g}, not {value!r}", source=what)
    return seconds


@contextlib.contextmanager
def storage_deadline(seconds: float | None) -> Iterator[None]:
    """``LITMUS_REVIEW_STORAGE_TIMEOUT`` set to ``seconds`` while inside (None: as it is), for
    this process and the LocalCluster workers it starts inside (they inherit its environment);
    the workers of a remote cluster read their own environment's."""
    if seconds is None:
        yield
        return
    was = os.environ.get(STORAGE_TIMEOUT_ENV)
    os.environ[STORAGE_TIMEOUT_ENV] = repr(storage_timeout(seconds, what="--storage-timeout"))
    try:
        yield
    finally:
        if was is None:
            os.environ.pop(STORAGE_TIMEOUT_ENV, None)
        else:
            os.environ[STORAGE_TIMEOUT_ENV] = was


LISTING_REQUESTS = 2
"""How long one whole listing, its pages together, may take on an object store: this many
whole-request deadlines of the storage deadline (130 s by default; ``listed``). A request's
deadline bounds each page, never their number: an endpoint that answers every page at once and
never ends the listing held the Score tables page, and ``score`` given a pattern, for as long as
it went on."""


def listing_deadline() -> float:
    """The most one whole listing may take (``LISTING_REQUESTS`` whole-request deadlines)."""
    read = storage_timeout()
    return LISTING_REQUESTS * request_deadline(read, min(read, CONNECT_TIMEOUT_S))


def listed(fs, method: str, *args: object, source: str, **kwargs: object):
    """``fs.<method>(*args, **kwargs)`` (a listing: ``find``, ``glob``, ``ls``), on an object store
    within ``listing_deadline`` (fsspec's own ``timeout`` of an async call: the listing is
    cancelled, not left running); past it, InputError naming ``source``: unreachable."""
    from fsspec.asyn import AsyncFileSystem, FSTimeoutError  # optional: the dask extra, as ``file_system``'s

    if not isinstance(fs, AsyncFileSystem):
        return getattr(fs, method)(*args, **kwargs)
    allowed = listing_deadline()
    try:
        return getattr(fs, method)(*args, timeout=allowed, **kwargs)
    except FSTimeoutError as exc:
        raise InputError(f"unreachable: listing it did not end within {allowed:g} s (an endless listing, or one too "
                         "large to list here)", source=source) from exc


def request_deadline(read: float, connect: float) -> float:
    """The whole-call deadline of one request (``STORAGE_TOTAL_READS``): its connection deadline
    plus that many read deadlines."""
    return connect + STORAGE_TOTAL_READS * read


def _deadline(options: dict, key: str, default: float, url: str, where: str) -> float:
    """``options[key]`` when the user gave it (a number of seconds above 0: it may lower or raise
    the deadline, never remove it), else ``default``."""
    if key not in options:
        return default
    value = options[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= MAX_STORAGE_TIMEOUT_S:
        raise InputError(f"storage option {where}{key}: give a number of seconds above 0 and at most "
                         f"{MAX_STORAGE_TIMEOUT_S:g} (every request to an object store has a deadline), not {value!r}",
                         source=url)
    return float(value)


def _attempts(config: dict, url: str) -> dict:
    """botocore's ``retries`` with at most ``STORAGE_ATTEMPTS`` attempts a request: a user's own
    may lower it, never raise it (fifty attempts of a deadline each is no deadline)."""
    given = config.get("retries")
    if given is None:
        return {"total_max_attempts": STORAGE_ATTEMPTS, "mode": "standard"}
    if not isinstance(given, dict):
        raise InputError(f"storage option config_kwargs.retries: give an object, not {given!r}", source=url)
    out = {k: v for k, v in given.items() if k not in ("max_attempts", "total_max_attempts")}
    asked = [v for k in ("total_max_attempts", "max_attempts") if isinstance(v := given.get(k), int)
             and not isinstance(v, bool)]
    out["total_max_attempts"] = max(1, min([STORAGE_ATTEMPTS, *asked]))
    out.setdefault("mode", "standard")
    return out


def with_deadline(url: str, storage_options: dict, timeout: float | None = None) -> dict:
    """``storage_options`` for ``url`` with the storage deadline filled in where the user gave
    none: connect within ``min(timeout, 5 s)``, each read within ``timeout`` (default:
    ``storage_timeout()``), each request done, its answer read to the end, within
    ``request_deadline`` (connect + 4 reads: 65 s by default), each request attempted at most
    twice. A deadline the user gave is kept (shorter, or longer up to ``MAX_STORAGE_TIMEOUT_S``;
    one that removes the deadline — None, 0, past that — is refused), the total follows the read
    and connect deadlines in effect, and a request's attempts are never more than
    ``STORAGE_ATTEMPTS``. Made when a file system is made (``file_system``), never stored: a table's
    record, a plan and the options a task is given hold the user's options only."""
    proto = protocol(url)
    if proto not in OBJECT_STORES | {"http", "https"}:
        return storage_options
    read = storage_timeout() if timeout is None else timeout
    connect = min(read, CONNECT_TIMEOUT_S)
    out = dict(storage_options)
    if proto in ("s3", "s3a"):  # botocore's Config
        from ..s3_session import DeadlineSession  # optional: the dask extra's aiobotocore (with s3fs)

        config = dict(out.get("config_kwargs") or {})
        if "http_session_cls" in config:
            raise InputError("storage option config_kwargs.http_session_cls: not taken (the storage deadline's "
                             "session gives every request its total deadline)", source=url)
        config["connect_timeout"] = _deadline(config, "connect_timeout", connect, url, "config_kwargs.")
        config["read_timeout"] = _deadline(config, "read_timeout", read, url, "config_kwargs.")
        config["retries"] = _attempts(config, url)
        config["http_session_cls"] = functools.partial(
            DeadlineSession, total=request_deadline(config["read_timeout"], config["connect_timeout"]))
        out["config_kwargs"] = config
    elif proto in ("az", "abfs", "abfss"):  # adlfs passes them to the Azure SDK's transport (no total)
        out["connection_timeout"] = _deadline(out, "connection_timeout", connect, url, "")
        out["read_timeout"] = _deadline(out, "read_timeout", read, url, "")
    else:  # aiohttp: fsspec's HTTP (client_kwargs) and gcsfs (session_kwargs)
        import aiohttp  # optional: installed with the backends that use it

        key = "client_kwargs" if proto in ("http", "https") else "session_kwargs"
        session = dict(out.get(key) or {})
        given = session.get("timeout")
        if isinstance(given, aiohttp.ClientTimeout):
            if given.sock_read is None and given.total is None:
                raise InputError(f"storage option {key}.timeout: give sock_read or total (every request to an "
                                 "object store has a deadline)", source=url)
            if given.total is None and given.sock_read is not None:  # a read deadline alone is met by a trickle
                session["timeout"] = aiohttp.ClientTimeout(
                    total=request_deadline(given.sock_read, given.sock_connect or connect), connect=given.connect,
                    sock_connect=given.sock_connect, sock_read=given.sock_read, ceil_threshold=given.ceil_threshold)
        else:
            seconds = _deadline(session, "timeout", read, url, f"{key}.")
            connect_s = min(seconds, CONNECT_TIMEOUT_S)
            session["timeout"] = aiohttp.ClientTimeout(total=request_deadline(seconds, connect_s),
                                                       sock_connect=connect_s, sock_read=seconds)
        out[key] = session
    return out


UNREACHABLE = frozenset({
    "ConnectTimeoutError", "ReadTimeoutError", "EndpointConnectionError", "ConnectionClosedError",  # botocore
    "ServerTimeoutError", "ConnectionTimeoutError", "SocketTimeoutError", "ClientConnectorError",  # aiohttp
    "ServerDisconnectedError", "FSTimeoutError", "ServiceRequestError", "ServiceResponseError",  # fsspec, Azure
    "TimeoutError", "ConnectionRefusedError"})
"""The names of the errors (anywhere in an error's chain) that say a storage endpoint did not
answer or could not be reached: by name, since the backends that raise them are optional."""


def unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` (or an error it was raised from) says its storage did not answer in time
    or could not be reached."""
    seen: set[int] = set()
    at: BaseException | None = exc
    while at is not None and id(at) not in seen:
        seen.add(id(at))
        if any(k.__name__ in UNREACHABLE for k in type(at).__mro__):
            return True
        at = at.__cause__ or at.__context__
    return False


def unreachable_message() -> str:
    """What an error of storage that did not answer says (the location is named beside it)."""
    read = storage_timeout()
    connect = min(read, CONNECT_TIMEOUT_S)
    return (f"unreachable: its storage did not answer within the deadline ({read:g} s a read, "
            f"{request_deadline(read, connect):g} s a request, {connect:g} s to connect, {STORAGE_ATTEMPTS} "
            f"attempts, unless its storage options set others; {STORAGE_TIMEOUT_ENV} or --storage-timeout sets it)")


OBJECT_STORES = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss"})
"""Protocols whose "folders" are only key prefixes: nothing to make before a write (s3fs asks
for the bucket on every ``makedirs``: one request a file written, for nothing)."""


def is_object_store(fs) -> bool:
    protocols = fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)
    return bool(OBJECT_STORES.intersection(protocols))


def make_folders(fs, path: str) -> None:
    """``fs.makedirs(path, exist_ok=True)`` where a file system has folders."""
    if not is_object_store(fs):
        fs.makedirs(path, exist_ok=True)


def check_regular_file(fs, fpath: str, source: str) -> None:
    """A local file must be a regular file (a device never ends, a FIFO may block for ever):
    refused before a byte is read, as the local engine refuses them (``files.check_regular``)."""
    from fsspec.implementations.local import LocalFileSystem  # optional: the dask extra

    if isinstance(fs, LocalFileSystem) and os.path.exists(fpath):  # a missing file is reported as such by the read
        try:
            check_regular(fpath)
        except InputError as exc:
            raise InputError(exc.message, source=source) from exc


def absolute_location(path: str) -> str:
    return path if URL_SCHEME.match(path) else os.path.abspath(path)


def exists(path: str, storage_options: dict | None = None) -> bool:
    """Whether a file is at ``path`` (a local path or fsspec URL). On an object store, one read
    of its first byte: ``isfile`` there asks twice for a missing key (is it a "folder"?)."""
    fs, fpath = file_system(absolute_location(path), dict(storage_options or {}))
    try:
        if is_object_store(fs):
            try:
                fs.cat_file(fpath, start=0, end=1)
                return True
            except FileNotFoundError:
                return False
            except Exception as exc:  # an empty object (no byte to range over): asked as a file
                if unreachable(exc):
                    raise
        return fs.isfile(fpath)
    except Exception as exc:  # OSError, or a storage backend's own: the run's own read reports it, located
        if unreachable(exc):  # asked again, the run's read would wait as long for the same answer
            raise InputError(f"cannot read: {unreachable_message()}", source=path) from exc
        return False


def check_storage_options(url: str, storage_options: dict) -> None:
    """``InputError`` naming an option the location's file system does not take (a mistyped
    ``--storage-option`` would otherwise be ignored without a word, or fail on a worker)."""
    import fsspec  # optional: the dask extra

    proto = protocol(url)
    if not storage_options or proto == "file":  # the options are for URLs; a local path takes none
        return
    try:
        cls = fsspec.get_filesystem_class(proto)
    except (ImportError, ValueError) as exc:
        raise InputError(f"cannot open this location: {error_message(exc)}", source=url) from exc
    known: set[str] = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is not None:
            known |= {n for n, p in inspect.signature(init).parameters.items()
                      if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    known |= {"skip_instance_cache", "use_listings_cache", "listings_expiry_time", "max_paths"}
    if proto in ("s3", "s3a"):
        known.add("profile")  # s3fs passes it to its botocore session: an AWS profile's credentials
    for key in storage_options:
        if key not in known:
            near = difflib.get_close_matches(key, sorted(known), n=1)
            raise InputError(f"--storage-option {key}: not an option of {proto}:// ({cls.__name__})"
                             + (f"; did you mean {near[0]}?" if near else ""), source=url)


def error_message(exc: BaseException) -> str:
    if isinstance(exc, LitmusReviewError):
        return str(exc)
    return unreachable_message() if unreachable(exc) else f"{type(exc).__name__}: {exc}"


def missing_message(exc: FileNotFoundError, what: str = "no such file") -> str:
    """``what`` (a file not found), or that its storage is unreachable: fsspec's HTTP says a URL
    whose server did not answer is not found (the timeout is the error's cause)."""
    return unreachable_message() if unreachable(exc) else what


def reason_message(exc: BaseException) -> str:
    """An error's own words (``str``), or that its storage is unreachable: a timeout's text
    names the endpoint and the request, not what happened."""
    return unreachable_message() if unreachable(exc) else str(exc)


def credentials_hint(exc: BaseException) -> str:
    """What to do about a storage backend's credentials error (empty for any other)."""
    if "Credentials" in type(exc).__name__ or "credentials" in str(exc).lower():
        return (" (no credentials reached the process that read it: give them as storage options, or in that "
                "process's environment, fsspec or AWS configuration)")
    return ""


CREDENTIAL_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE",
                        "AWS_WEB_IDENTITY_TOKEN_FILE", "GOOGLE_APPLICATION_CREDENTIALS",
                        "AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_KEY")
"""Where a client's credentials for object storage may come from its environment."""


def seen_from_the_client(error: str, source: str, storage_options: dict) -> str:
    """A run's error from the worker that read it, with what the client sees differently: a
    local path the client has but the workers do not, or credentials in the client's
    environment only (the workers have their own environment; the options travel, the
    environment does not)."""
    if error.endswith(": no such file") and not URL_SCHEME.match(source) and os.path.isfile(source):
        return (f"{error} on the worker that read it, though this client has it: the workers cannot see this path "
                "(they read a local path on their own machines; give a URL, or a path on a file system they share)")
    here = [v for v in CREDENTIAL_VARIABLES  # a variable naming a file counts where the file is there
            if os.environ.get(v) and (not v.endswith("_FILE") or os.path.isfile(os.environ[v]))]
    if "credentials" in error.lower() and here and not ({"key", "secret", "token", "profile"} & set(storage_options)):
        return (f"{error}. This client has credentials in its environment ({', '.join(here)}), the workers do "
                "not: give them as --storage-option, or set them in the workers' environment")
    return error


def join_url(base: str, *parts: str) -> str:
    return "/".join([base.rstrip("/"), *parts])
