"""A staging site over real HTTPS on 127.0.0.1, with certificates made for the test by `openssl`.

`Certificates(tmp)` makes a test CA and leaf certificates signed by it (valid 90 days, or 7 days), and one
self-signed leaf no CA vouches for. `StagingSite` serves one of them and answers with a chosen status,
or holds its answer until released (a slow site).
"""

from __future__ import annotations

import http.server
import ssl
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Leaf:
    cert: Path
    key: Path


class Certificates:
    def __init__(self, folder: Path):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.ca = self._self_signed("test-ca", days=365, ca=True)
        self.trusted = self._signed("staging-90d", days=90)
        self.expiring = self._signed("staging-7d", days=7)
        self.untrusted = self._self_signed("staging-self-signed", days=90, ca=False)

    @property
    def ca_file(self) -> Path:
        return self.ca.cert

    def _openssl(self, *args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=self.folder)

    def _self_signed(self, name: str, *, days: int, ca: bool) -> Leaf:
        cert, key = self.folder / f"{name}.pem", self.folder / f"{name}.key"
        extensions = (
            ["-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"]
            if ca
            else ["-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"]
        )
        self._openssl(
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", str(key), "-out", str(cert), "-days", str(days), "-subj", f"/CN={name}", *extensions,
        )  # fmt: skip
        return Leaf(cert, key)

    def _signed(self, name: str, *, days: int) -> Leaf:
        cert, key, csr = (self.folder / f"{name}.{ext}" for ext in ("pem", "key", "csr"))
        ext = self.folder / f"{name}.ext"
        ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
        self._openssl(
            "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={name}",
        )  # fmt: skip
        self._openssl(
            "x509", "-req", "-in", str(csr), "-CA", str(self.ca.cert), "-CAkey", str(self.ca.key),
            "-CAcreateserial", "-out", str(cert), "-days", str(days), "-extfile", str(ext),
        )  # fmt: skip
        return Leaf(cert, key)


class StagingSite:
    """An HTTPS site answering every GET with `status`; with `hold=True` it waits until `release()`."""

    def __init__(self, leaf: Leaf, *, status: int = 200, hold: bool = False):
        self.status = status
        self.released = threading.Event()
        if not hold:
            self.released.set()
        self.requests: list[str] = []
        site = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                site.requests.append(self.path)
                site.released.wait(timeout=15)
                body = b"<!doctype html><title>staging</title>"
                self.send_response(site.status)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(leaf.cert, leaf.key)
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.handle_error = lambda request, address: None  # refused handshakes are the point of some tests
        # The handshake happens in the handler's thread, so a client that refuses it never blocks the server.
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True, do_handshake_on_connect=False)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.server.server_address[1]}/health"

    def release(self) -> None:
        self.released.set()

    def __enter__(self) -> StagingSite:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()
