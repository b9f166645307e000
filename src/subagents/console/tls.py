"""HTTPS for a console served on another address than loopback (``serve --tls-cert FILE
[--tls-key FILE]``; docs/console.md, "Security").

Why: with ``--expose`` the console listens where others on the network reach it, and over
plain HTTP its token (in the printed URL, then in a cookie on every request) travels in
clear: whoever sees the traffic holds the door into every run. The certificate and key are
PEM files handed to uvicorn; they are loaded here first, so a wrong path or a key that does
not fit says so at start, naming the file, instead of failing on each connection. Free of
uvicorn, as ``serve_cmd`` reads its options without the ``console`` extra.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import msgspec

from subagents.cli.state import EXIT_USAGE, CliError


class Tls(msgspec.Struct, frozen=True):
    """The certificate (PEM, with its key in it unless ``key``) a console serves HTTPS with."""

    cert: Path
    key: Path | None = None


def checked_tls(cert: Path | None, key: Path | None) -> Tls | None:
    """The TLS files given, loaded once to check them; None without ``--tls-cert``;
    ``CliError`` naming what is wrong with them."""
    if cert is None:
        if key is not None:
            raise CliError(f"--tls-key {key}: give the certificate too (--tls-cert)", EXIT_USAGE)
        return None
    given = f"--tls-cert {cert}" + (f" --tls-key {key}" if key is not None else "")
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key)
    except ssl.SSLError as exc:
        raise CliError(
            f"{given}: not a certificate and its private key in PEM ({exc.reason or exc})",
            EXIT_USAGE,
        ) from exc
    except OSError as exc:
        raise CliError(f"{given}: {exc.strerror or exc}", EXIT_USAGE) from exc
    return Tls(cert, key)
