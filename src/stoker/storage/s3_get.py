"""GETs of S3 objects without botocore's per-call pipeline: a presigned URL per object, reused.

A botocore ``get_object`` call costs about 4 ms of CPU (endpoint rules, user agent, event
hooks, signing, parsing every response header), more than receiving a MiB over loopback. A
reader makes many ranged GETs of few objects, so here botocore presigns each object's URL once
(SigV4 in the query string: it works out the endpoint, the addressing style and the signature,
with session tokens too), and every ranged GET is a plain request on a keep-alive pool
(:mod:`stoker.storage.http_pool`) made from the client's settings as botocore's own (TLS
verification and CA bundle, timeouts, pool size, TCP keep-alive, client certificate:
:class:`Transport`); through a proxy, botocore's HTTP session sends it. Only public botocore API
is used. ``Range``,
``If-Match`` and ``If-None-Match`` are ordinary headers, which a presigned URL does not need
signed. A server that refuses presigned URLs (403 before any presigned GET worked: some gateways
and emulators accept only signed headers) gets botocore's ``get_object`` from then on.

Errors look like botocore's: an answer other than 2xx raises :class:`S3HttpError`, whose
``response`` has the ``Error.Code`` of the XML body, so the callers' error handling and
:func:`stoker.storage.retry.is_transient` treat both alike.
"""

from __future__ import annotations

import re
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from stoker.storage.retry import BadResponse
from stoker.storage.s3_http import keepalive_for, verify_for

#: How long a presigned URL is valid; it is renewed at half that age.
URL_SECONDS = 3600
_MAX_URLS = 4096
#: Answers of S3 to a request sent to the wrong region.
_REDIRECTS = (301, 307)
_CODE = re.compile(rb"<Code>([^<]*)</Code>")
_MESSAGE = re.compile(rb"<Message>([^<]*)</Message>")


class S3HttpError(Exception):
    """An S3 answer other than 2xx, shaped like botocore's ``ClientError`` for callers."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"HTTP {status} {code}: {message}".rstrip(": "))
        self.status = status
        self.response = {
            "Error": {"Code": code, "Message": message},
            "ResponseMetadata": {"HTTPStatusCode": status},
        }


@dataclass(frozen=True)
class _Target:
    """A presigned URL and when it was made."""

    url: str
    made: float


class Getter:
    """Ranged GETs of one client's objects by presigned URLs (one per object, renewed)."""

    def __init__(
        self, client: Any, http: Any = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._client = client
        self._clock = clock
        #: Sends the GETs (a :class:`Transport` of the client's settings).
        self._http = http if http is not None else Transport(client)
        self._urls: OrderedDict[tuple[str, str], _Target] = OrderedDict()
        self._lock = threading.Lock()
        #: None until the first answer to a presigned GET tells whether the server takes them.
        self._presigned_ok: bool | None = None

    def _url(self, bucket: str, key: str, fresh: bool = False) -> _Target:
        now = self._clock()
        with self._lock:
            found = self._urls.get((bucket, key))
            if found is not None and not fresh and now - found.made < URL_SECONDS / 2:
                self._urls.move_to_end((bucket, key))
                return found
        url = self._client.generate_presigned_url(
            "get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=URL_SECONDS
        )
        target = _Target(url, now)
        with self._lock:
            self._urls[(bucket, key)] = target
            while len(self._urls) > _MAX_URLS:
                self._urls.popitem(last=False)
        return target

    def get(self, bucket: str, key: str, headers: dict[str, str]) -> Any:
        """The urllib3 response of a 2xx answer, its body not read yet.

        Raises:
            S3HttpError: any other answer (its XML error code in ``response``).
        """
        if self._presigned_ok is False:
            return self._get_signed(bucket, key, headers)
        found = self._url(bucket, key)
        response = self._send(found, headers)
        if response.status == 403 and self._presigned_ok is not True:
            # Maybe the server takes no presigned URLs: ask with headers. (Not only while
            # unknown: another thread's refused GET may have found that out meanwhile.)
            _discard(response)
            signed = self._get_signed(bucket, key, headers)
            self._presigned_ok = False
            return signed
        if response.status < 400:
            self._presigned_ok = True
        if response.status == 403 and self._clock() - found.made > 5:
            # The URL may have outlived its credentials (temporary ones renew): presign again.
            _discard(response)
            response = self._send(self._url(bucket, key, fresh=True), headers)
        elif response.status in _REDIRECTS:
            # The bucket lives in another region: botocore follows the redirect of a HEAD and
            # remembers the region, which the next presigned URL then uses.
            _discard(response)
            self._client.head_object(Bucket=bucket, Key=key)
            response = self._send(self._url(bucket, key, fresh=True), headers)
        if response.status >= 300:
            body = _discard(response)
            code = _CODE.search(body)
            message = _MESSAGE.search(body)
            raise S3HttpError(
                response.status,
                code.group(1).decode() if code else str(response.status),
                message.group(1).decode() if message else "",
            )
        return response

    def _get_signed(self, bucket: str, key: str, headers: dict[str, str]) -> Any:
        """The same GET through botocore's ``get_object`` (signed headers)."""
        names = {"Range": "Range", "If-Match": "IfMatch", "If-None-Match": "IfNoneMatch"}
        args = {names[k]: v for k, v in headers.items() if k in names}
        try:
            answer = self._client.get_object(Bucket=bucket, Key=key, **args)
        except Exception as e:
            response = getattr(e, "response", None)
            if not isinstance(response, dict):
                raise
            error = response.get("Error") or {}
            status = int((response.get("ResponseMetadata") or {}).get("HTTPStatusCode") or 0)
            raise S3HttpError(
                status,
                str(error.get("Code", status)),
                str(error.get("Message", "")),
            ) from e
        return _Body(answer)

    def _send(self, found: _Target, headers: dict[str, str]) -> Any:
        """The urllib3 response (body not read) of a GET of ``found`` with ``headers``."""
        try:
            return self._http.get(found.url, headers)
        except (ValueError, OverflowError) as e:  # an answer's head the client could not parse
            raise BadResponse(f"the answer could not be parsed: {type(e).__name__}") from e
        except Exception as e:
            clean = _without_query(e, found.url)
            if clean is None:
                raise
            raise clean from None  # (the original names the signature too)


class _Body:
    """A botocore ``get_object`` answer, read like a urllib3 response: its :attr:`status`,
    :attr:`headers` (any case) and streaming body."""

    def __init__(self, answer: dict[str, Any]) -> None:
        from urllib3 import HTTPHeaderDict

        self._body = answer["Body"]
        meta = answer.get("ResponseMetadata") or {}
        self.status = int(meta.get("HTTPStatusCode") or 200)
        self.headers = HTTPHeaderDict(meta.get("HTTPHeaders") or {})
        raw = getattr(self._body, "_raw_stream", None)  # its urllib3 response, for the deadline
        self.connection = getattr(raw, "connection", None)

    def read(self, amt: int | None = None) -> bytes:
        return bytes(self._body.read(amt))

    def close(self) -> None:
        self._body.close()

    def drain_conn(self) -> None:
        """Nothing to do: a body not read whole is closed, not reused."""

    def release_conn(self) -> None:
        """Nothing to do: urllib3 gives the connection back once the body was read whole."""


class Transport:
    """Sends presigned GETs as botocore would for ``client``, at less CPU per request.

    A keep-alive pool (:class:`stoker.storage.http_pool.Pool`) made with botocore's settings
    for the client (its timeouts, pool size, TLS context, CA bundle from
    ``ca_bundle``/``AWS_CA_BUNDLE``/``REQUESTS_CA_BUNDLE``, client certificate, TCP_NODELAY and
    ``tcp_keepalive``) takes the request straight to a connection to the URL's host, the URL
    parsed once, where botocore's ``send`` would parse the long URL three more times and a
    urllib3 pool would encode it again (together about 0.5 ms of CPU per request). A URL that
    goes through a proxy (the client's ``proxies``, else the environment's) is sent by botocore's
    own HTTP session.
    """

    def __init__(self, client: Any) -> None:
        import socket

        from botocore.httpsession import (  # type: ignore[import-untyped]
            ProxyConfiguration,
            URLLib3Session,
        )
        from botocore.utils import get_environ_proxies  # type: ignore[import-untyped]

        from stoker.storage.http_pool import Pool

        config = client.meta.config
        verify = verify_for(client)
        proxies = config.proxies or get_environ_proxies(client.meta.endpoint_url)
        options = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
        if keepalive_for(client):
            options.append((socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1))
        timeout = (config.connect_timeout, config.read_timeout)
        self._proxies = ProxyConfiguration(proxies, config.proxies_config)
        self._routes: dict[str, tuple[str, str, int, str]] = {}
        self._pool = Pool(
            connect_timeout=timeout[0],
            read_timeout=timeout[1],
            maxsize=config.max_pool_connections,
            socket_options=options,
            ssl_context=tls_context(verify, config.client_cert),
        )
        self._botocore = URLLib3Session(
            verify=verify, proxies=proxies, timeout=timeout, socket_options=options,
            max_pool_connections=config.max_pool_connections, client_cert=config.client_cert,
            proxies_config=config.proxies_config,
        )  # fmt: skip

    def get(self, url: str, headers: dict[str, str]) -> Any:
        """The response (body not read) of a GET of ``url``."""
        route = self._routes.get(url)
        if route is None:
            route = self._route(url)
        if route is _PROXIED:
            from botocore.awsrequest import AWSPreparedRequest  # type: ignore[import-untyped]

            return self._botocore.send(AWSPreparedRequest("GET", url, headers, None, True)).raw
        scheme, host, port, target = route
        return self._pool.get(scheme, host, port, target, headers)

    def _route(self, url: str) -> tuple[str, str, int, str]:
        """Where ``url`` goes (parsed once: a presigned URL is long and used many times)."""
        from urllib3.util import parse_url

        if self._proxies.proxy_url_for(url) is not None:
            route = _PROXIED
        else:
            parts = parse_url(url)
            scheme = parts.scheme or "http"
            port = parts.port or (443 if scheme == "https" else 80)
            route = (scheme, parts.host or "", port, parts.request_uri)
        if len(self._routes) >= _MAX_URLS:
            self._routes.clear()
        self._routes[url] = route
        return route


#: The route of a URL that goes through a proxy (botocore's session sends it).
_PROXIED = ("", "", 0, "")


def tls_context(verify: bool | str, client_cert: str | tuple[str, str] | None) -> Any:
    """The TLS context botocore's HTTP session would use: its ciphers and options, the CA
    bundle of ``verify`` (a path; True: botocore's default bundle; False: no verification) and
    the client certificate."""
    import ssl

    from botocore.httpsession import create_urllib3_context, get_cert_path

    context = create_urllib3_context()
    if verify:
        context.verify_mode = ssl.CERT_REQUIRED
        context.check_hostname = True
        context.load_verify_locations(cafile=get_cert_path(verify))
    else:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if client_cert:
        cert, key = client_cert if isinstance(client_cert, tuple) else (client_cert, None)
        context.load_cert_chain(cert, key)
    return context


def _without_query(error: Exception, url: str) -> Exception | None:
    """``error`` again, of its class, naming ``url`` without its query (the signature, a
    credential for an hour, must not reach logs); None if it does not name ``url``."""
    kwargs = getattr(error, "kwargs", None)
    if not isinstance(kwargs, dict) or kwargs.get("endpoint_url") != url:
        return None
    try:
        clean: Exception = type(error)(**{**kwargs, "endpoint_url": url.partition("?")[0]})
    except Exception:
        return None
    return clean


def _discard(response: Any) -> bytes:
    """Read a small error body and give the connection back."""
    try:
        return bytes(response.read(65536) or b"")
    finally:
        response.drain_conn()  # the rest, if any, so that the connection can serve again
        response.release_conn()


_GETTERS: weakref.WeakKeyDictionary[Any, Getter] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def getter_for(client: Any) -> Getter:
    """The :class:`Getter` of a boto3 client (clients are per process, so getters are too)."""
    getter = _GETTERS.get(client)
    if getter is None:
        with _LOCK:
            getter = _GETTERS.get(client)
            if getter is None:
                getter = _GETTERS[client] = Getter(client)
    return getter
