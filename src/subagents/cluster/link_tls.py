"""TLS for the link between a runtime's driver and its node hosts (``cluster.link``).

The link is always authenticated (an HMAC handshake on a random key per set-up, handed over
in Ray's own ``setup`` call); with TLS it is also encrypted, and each end must present a
certificate signed by the given CA (mutual TLS). Which files, read where the runtime starts
(``link_tls``), in this order:

- ``SUBAGENTS_LINK_TLS_CERT`` and ``SUBAGENTS_LINK_TLS_KEY`` (PEM files; both or neither),
  and ``SUBAGENTS_LINK_TLS_CA`` (the CA bundle that signed the peers' certificates; default:
  the certificate itself, for one self-signed certificate shared by every machine);
- else Ray's own TLS settings, when Ray runs with TLS (``RAY_USE_TLS=1``):
  ``RAY_TLS_SERVER_CERT``, ``RAY_TLS_SERVER_KEY``, ``RAY_TLS_CA_CERT``;
- else none: the link is plain TCP (authenticated, not encrypted), like Ray's own traffic
  by default.

The files are paths: the driver reads them where it runs, and each node host reads the same
paths on its own machine (they travel in the set-up call, never their contents). The peer's
host name is not checked (the driver reaches node hosts by IP address); its certificate
must be signed by the CA. TLS 1.3 only: both ends are this package.

Why ``ssl.SSLObject`` over memory buffers and not ``SSLContext.wrap_socket``: each end of
the link reads on one thread while another writes, and an OpenSSL connection must not be
used by two threads at once (python/cpython#76714; OpenSSL's own rule). ``TlsChannel``
holds a lock around the TLS object only, never around the socket's waits, so a reader
blocked waiting for bytes never holds up a writer.
"""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass

CERT_ENV = "SUBAGENTS_LINK_TLS_CERT"
KEY_ENV = "SUBAGENTS_LINK_TLS_KEY"
CA_ENV = "SUBAGENTS_LINK_TLS_CA"
RAY_TLS_ENV = ("RAY_USE_TLS", "RAY_TLS_SERVER_CERT", "RAY_TLS_SERVER_KEY", "RAY_TLS_CA_CERT")
CHUNK = 65536


@dataclass(frozen=True)
class LinkTls:
    """The files of the link's TLS (paths, the same on every machine) and where they were
    named (``source``: for errors)."""

    cert: str
    key: str
    ca: str
    source: str

    def server_context(self) -> ssl.SSLContext:
        """A node host's context: presents its certificate, requires the driver's."""
        return self._context(ssl.PROTOCOL_TLS_SERVER)

    def client_context(self) -> ssl.SSLContext:
        """The driver's context: presents its certificate, requires the node host's (signed
        by the CA; its name is not checked: node hosts are reached by IP address)."""
        return self._context(ssl.PROTOCOL_TLS_CLIENT)

    def _context(self, protocol: int) -> ssl.SSLContext:
        context = ssl.SSLContext(protocol)
        context.minimum_version = ssl.TLSVersion.TLSv1_3
        context.check_hostname = False
        context.verify_mode = ssl.CERT_REQUIRED
        try:
            context.load_cert_chain(self.cert, self.key)
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(
                f"the link's TLS certificate {self.cert} and key {self.key} ({self.source})"
                f" cannot be loaded: {exc}"
            ) from exc
        try:
            context.load_verify_locations(cafile=self.ca)
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(
                f"the link's TLS CA {self.ca} ({self.source}) cannot be loaded: {exc}"
            ) from exc
        return context


def link_tls(environ: Mapping[str, str] | None = None) -> LinkTls | None:
    """The link's TLS settings from ``environ`` (default: this process's environment), see
    the module; None for a plain link. A ``ValueError`` naming the variable or the file for
    settings that are incomplete or files that do not load (checked here, before any node
    host starts)."""
    env = os.environ if environ is None else environ
    cert, key, ca = (env.get(name, "").strip() for name in (CERT_ENV, KEY_ENV, CA_ENV))
    if cert or key or ca:
        if not (cert and key):
            missing = KEY_ENV if cert else CERT_ENV
            raise ValueError(
                f"{missing} is not set: the link's TLS needs {CERT_ENV} and {KEY_ENV}"
                f" (and {CA_ENV}, default the certificate) together"
            )
        tls = LinkTls(cert=cert, key=key, ca=ca or cert, source=f"${CERT_ENV}")
    elif env.get(RAY_TLS_ENV[0], "").strip().lower() in ("1", "true"):
        found = [env.get(name, "").strip() for name in RAY_TLS_ENV[1:]]
        if not all(found):
            unset = [name for name, value in zip(RAY_TLS_ENV[1:], found, strict=True) if not value]
            raise ValueError(
                f"RAY_USE_TLS is on but {', '.join(unset)} not set: the link reuses Ray's"
                f" TLS files (or set {CERT_ENV} and {KEY_ENV})"
            )
        tls = LinkTls(cert=found[0], key=found[1], ca=found[2], source="Ray's RAY_TLS_*")
    else:
        return None
    tls.server_context()  # the files load, and the key is the certificate's
    return tls


class TlsChannel:
    """A TLS connection over a connected socket, safe for one reader and one writer at once
    (see the module). ``handshake`` first; then ``sendall``, ``recv`` and ``pending``."""

    def __init__(self, sock: socket.socket, context: ssl.SSLContext, *, server: bool) -> None:
        self.sock = sock
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._incoming, self._outgoing, server_side=server)
        self._lock = threading.Lock()  # the TLS object and its buffers
        self._sending = threading.Lock()  # the order of what goes on the socket

    def handshake(self, deadline: float | None) -> None:
        """The TLS handshake, done by ``deadline`` (``time.monotonic``) or ``TimeoutError``;
        ``ssl.SSLError`` when the peer does not speak TLS or its certificate is refused."""
        while True:
            try:
                with self._lock:
                    self._tls.do_handshake()
                self._flush()
                return
            except ssl.SSLWantReadError:
                self._flush()
                self._fill(deadline)
            except ssl.SSLError:
                with contextlib.suppress(OSError):
                    self._flush()  # the alert saying why, so the peer's error says it too
                raise

    def sendall(self, data: bytes | memoryview) -> None:
        with self._sending:
            with self._lock:
                self._tls.write(data)
                out = self._outgoing.read()
            self.sock.sendall(out)

    def recv(self, size: int, deadline: float | None = None) -> bytes:
        """Up to ``size`` bytes; b"" at the end of the stream."""
        while True:
            with self._lock:
                try:
                    data = self._tls.read(size)
                except ssl.SSLWantReadError:
                    data = None
                except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                    data = b""
                more = self._outgoing.pending  # a reply the TLS layer owes (a key update)
            if more:
                self._flush()
            if data is not None:
                return data
            self._fill(deadline)

    def pending(self) -> bool:
        """Whether bytes already taken from the socket wait to be read."""
        with self._lock:
            return self._tls.pending() > 0 or self._incoming.pending > 0

    def _flush(self) -> None:
        with self._sending:
            with self._lock:
                out = self._outgoing.read()
            if out:
                self.sock.sendall(out)

    def _fill(self, deadline: float | None) -> None:
        """More bytes from the socket into the TLS object (the end of the stream too)."""
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("timed out")
            self.sock.settimeout(left)
        raw = self.sock.recv(CHUNK)
        with self._lock:
            if raw:
                self._incoming.write(raw)
            else:
                self._incoming.write_eof()
