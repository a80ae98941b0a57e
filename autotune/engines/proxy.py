"""mi-tune's small HTTP proxy for vLLM: round-robin over replicas, or vLLM's NIXL prefill/decode protocol.

    python -m autotune.engines.proxy --port 8000 --backend http://127.0.0.1:8010 http://127.0.0.1:8020
    python -m autotune.engines.proxy --port 8000 --prefill http://127.0.0.1:8010 --decode http://127.0.0.1:8020

P/D protocol (vLLM docs/features/nixl_connector_usage.md, toy_proxy_server.py): send the request to a prefiller with
max_tokens=1, stream=false and kv_transfer_params {do_remote_decode: true, ...}; copy the kv_transfer_params of its
answer into the original request; stream that from a decoder. Both calls carry the same X-Request-Id.
Standard library only.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from autotune.specs.errors import MiTuneError

COMMAND = ["python3", "-m", "autotune.engines.proxy"]
GENERATE_PATHS = {"/v1/completions", "/v1/chat/completions"}
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "te", "trailer", "upgrade"}
PREFILL_KV_TRANSFER = {
    "do_remote_decode": True,
    "do_remote_prefill": False,
    "remote_engine_id": None,
    "remote_block_ids": None,
    "remote_host": None,
    "remote_port": None,
}
CHUNK_BYTES = 64 * 1024
HEALTH_TIMEOUT_S = 5.0


class _Pool:
    """Thread-safe round robin over backend (host, port) pairs."""

    def __init__(self, urls: list[str]):
        self.addresses = [_address(u) for u in urls]
        self._cycle = itertools.cycle(self.addresses)
        self._lock = threading.Lock()

    def next(self) -> tuple[str, int]:
        with self._lock:
            return next(self._cycle)


def _address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname or not parts.port:
        raise MiTuneError(f"proxy: backend {url!r} must look like http://HOST:PORT")
    return parts.hostname, parts.port


class ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ProxyServer

    def log_message(self, format, *args):  # noqa: A002 - BaseHTTPRequestHandler's signature
        sys.stderr.write(f"proxy: {self.address_string()} {format % args}\n")

    def do_GET(self):
        if self.path == "/health":
            return self._health()
        if self.path == "/v1/models":
            return self._relay(self.server.read_pool.next(), "GET", None, self._forward_headers())
        self._send_json(404, {"error": f"no route {self.path}"})

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path not in GENERATE_PATHS:
            return self._send_json(404, {"error": f"no route {self.path}"})
        headers = self._forward_headers()
        if self.server.backends is not None:
            return self._relay(self.server.backends.next(), "POST", body, headers)
        try:
            request = json.loads(body)
        except json.JSONDecodeError as exc:
            return self._send_json(400, {"error": f"request body is not JSON: {exc.msg}"})
        self._prefill_then_decode(request, headers)

    def _prefill_then_decode(self, request: dict, headers: dict[str, str]) -> None:
        headers["X-Request-Id"] = headers.get("X-Request-Id") or str(uuid.uuid4())
        prefill = {**request, "kv_transfer_params": PREFILL_KV_TRANSFER, "stream": False, "max_tokens": 1}
        if "max_completion_tokens" in prefill:
            prefill["max_completion_tokens"] = 1
        prefill.pop("stream_options", None)
        status, payload = _call(self.server.prefill.next(), self.path, prefill, headers, self.server.timeout_s)
        if status is None or status >= 400:
            return self._send_json(502 if status is None else status, {"error": "prefill failed", "detail": payload})
        kv_transfer_params = payload.get("kv_transfer_params") if isinstance(payload, dict) else None
        decode = {**request, "kv_transfer_params": kv_transfer_params} if kv_transfer_params else request
        self._relay(self.server.decode.next(), "POST", json.dumps(decode).encode(), headers)

    def _forward_headers(self) -> dict[str, str]:
        return {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}

    def _relay(self, address: tuple[str, int], method: str, body: bytes | None, headers: dict[str, str]) -> None:
        """Send the request upstream and copy the answer back as it arrives (chunked when upstream streams)."""
        conn = http.client.HTTPConnection(*address, timeout=self.server.timeout_s)
        try:
            if body is not None:
                headers = {**headers, "Content-Type": "application/json", "Content-Length": str(len(body))}
            conn.request(method, self.path, body=body, headers=headers)
            upstream = conn.getresponse()
        except OSError as exc:
            conn.close()
            return self._send_json(502, {"error": f"backend {address[0]}:{address[1]} unreachable: {exc}"})
        try:
            self._copy_response(upstream)
        except OSError:  # the client went away mid-stream
            self.close_connection = True
        finally:
            conn.close()

    def _copy_response(self, upstream: http.client.HTTPResponse) -> None:
        length = upstream.getheader("Content-Length")
        self.send_response(upstream.status)
        for key, value in upstream.getheaders():
            if key.lower() not in HOP_BY_HOP:
                self.send_header(key, value)
        if length is None:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", length)
        self.end_headers()
        while chunk := upstream.read1(CHUNK_BYTES):
            self.wfile.write(chunk if length is not None else b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.flush()
        if length is None:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    def _health(self) -> None:
        down = [
            f"{h}:{p}"
            for h, p in self.server.all_addresses
            if _call((h, p), "/health", None, {}, HEALTH_TIMEOUT_S)[0] != 200
        ]
        self._send_json(503 if down else 200, {"status": "unhealthy" if down else "ok", "down": down})

    def _send_json(self, status: int, doc: dict) -> None:
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _call(address, path: str, doc: dict | None, headers: dict[str, str], timeout_s: float):
    """(status, parsed JSON or text) of one upstream call; (None, reason) when the backend is unreachable."""
    conn = http.client.HTTPConnection(*address, timeout=timeout_s)
    try:
        body = None if doc is None else json.dumps(doc).encode()
        sent = {**headers, "Content-Type": "application/json"} if body is not None else headers
        conn.request("GET" if body is None else "POST", path, body=body, headers=sent)
        response = conn.getresponse()
        text = response.read().decode(errors="replace")
    except OSError as exc:
        return None, f"{address[0]}:{address[1]} unreachable: {exc}"
    finally:
        conn.close()
    try:
        return response.status, json.loads(text)
    except json.JSONDecodeError:
        return response.status, text


class ProxyServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: str, port: int, backends=(), prefill=(), decode=(), timeout_s: float = 3600.0):
        super().__init__((host, port), ProxyHandler)
        self.backends = _Pool(list(backends)) if backends else None
        self.prefill = _Pool(list(prefill)) if prefill else None
        self.decode = _Pool(list(decode)) if decode else None
        self.read_pool = self.backends or self.decode  # who answers GET /v1/models
        self.all_addresses = [a for pool in (self.backends, self.prefill, self.decode) if pool for a in pool.addresses]
        self.timeout_s = timeout_s


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise MiTuneError(f"proxy: {message}")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m autotune.engines.proxy", description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--backend", nargs="+", action="extend", default=[], metavar="URL", help="round-robin replicas")
    p.add_argument("--prefill", nargs="+", action="extend", default=[], metavar="URL")
    p.add_argument("--decode", nargs="+", action="extend", default=[], metavar="URL")
    p.add_argument("--timeout-s", type=float, default=3600.0, help="per upstream call")
    return p


def parse_args(argv: list[str]) -> argparse.Namespace:
    args = _parser().parse_args(argv)
    if bool(args.backend) == bool(args.prefill or args.decode) or bool(args.prefill) != bool(args.decode):
        raise MiTuneError("proxy: give either --backend URL ... or both --prefill URL ... and --decode URL ...")
    for url in [*args.backend, *args.prefill, *args.decode]:
        _address(url)
    return args


def proxy_argv(host: str, port: int, backends: list[str], prefill: list[str], decode: list[str]) -> list[str]:
    """The proxy's command line (checked by its own parser)."""
    groups = [("--backend", backends), ("--prefill", prefill), ("--decode", decode)]
    argv = [*COMMAND, "--host", host, "--port", str(port), *(a for flag, urls in groups if urls for a in (flag, *urls))]
    parse_args(argv[len(COMMAND) :])
    return argv


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
        server = ProxyServer(args.host, args.port, args.backend, args.prefill, args.decode, args.timeout_s)
    except (MiTuneError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    mode = "round-robin" if args.backend else "prefill/decode"
    print(f"proxy: {mode} on http://{args.host}:{args.port}", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
