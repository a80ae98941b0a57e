"""The proxy against tiny fake vLLM servers on 127.0.0.1 ephemeral ports."""

import http.client
import json
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from autotune.engines.proxy import PREFILL_KV_TRANSFER, ProxyServer, main, parse_args, proxy_argv
from autotune.specs.errors import MiTuneError

TIMEOUT_S = 10.0
POLL_S = 0.02  # serve_forever poll: shutdown() waits up to this long
KV_FROM_PREFILL = {
    "do_remote_prefill": True,
    "do_remote_decode": False,
    "remote_engine_id": "prefill-engine",
    "remote_block_ids": [3, 4],
    "remote_host": "127.0.0.1",
    "remote_port": 5600,
}
SSE_EVENTS = [b'data: {"choices":[{"text":"a"}]}\n\n', b'data: {"choices":[{"text":"b"}]}\n\n', b"data: [DONE]\n\n"]


class FakeEngine(ThreadingHTTPServer):
    """Records each request; answers JSON, or an SSE stream in chunks when the request asks to stream."""

    daemon_threads = True

    def __init__(self, name: str, kv_transfer_params: dict | None = None):
        super().__init__(("127.0.0.1", 0), _FakeHandler)
        self.name, self.kv_transfer_params = name, kv_transfer_params
        self.requests: list[tuple[str, dict, dict]] = []  # (path, headers, body)
        self.first_chunk_seen = threading.Event()  # the test sets it once the first event came through the proxy
        threading.Thread(target=self.serve_forever, args=(POLL_S,), daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _FakeHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.server.requests.append((self.path, dict(self.headers), {}))
        self._json({"object": "list", "data": [{"id": "test-org/m", "owned_by": self.server.name}]})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append((self.path, dict(self.headers), body))
        if not body.get("stream"):
            reply = {"id": "cmpl-1", "served_by": self.server.name, "choices": [{"text": "x"}]}
            return self._json({**reply, "kv_transfer_params": self.server.kv_transfer_params})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for i, event in enumerate(SSE_EVENTS):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            self.wfile.flush()
            if i == 0:
                self.server.first_chunk_seen.wait(TIMEOUT_S)
        self.wfile.write(b"0\r\n\r\n")

    def _json(self, doc):
        body = json.dumps(doc).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def servers():
    started = []

    def start(server):
        started.append(server)
        if isinstance(server, ProxyServer):
            threading.Thread(target=server.serve_forever, args=(POLL_S,), daemon=True).start()
        return server

    yield start
    for server in started:
        server.shutdown()
        server.server_close()


def request(port: int, method: str, path: str, doc=None, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_S)
    body = None if doc is None else json.dumps(doc).encode()
    conn.request(method, path, body=body, headers={"Content-Type": "application/json", **(headers or {})})
    return conn, conn.getresponse()


def test_round_robin_over_replicas_and_models(servers):
    a, b = servers(FakeEngine("a")), servers(FakeEngine("b"))
    proxy = servers(ProxyServer("127.0.0.1", 0, backends=[a.url, b.url]))
    port = proxy.server_address[1]
    served = []
    for path in ("/v1/completions", "/v1/chat/completions", "/v1/completions", "/v1/completions"):
        _, response = request(port, "POST", path, {"model": "test-org/m", "prompt": "hi", "max_tokens": 4})
        assert response.status == 200
        served.append(json.loads(response.read())["served_by"])
    assert served == ["a", "b", "a", "b"]
    assert [r[0] for r in a.requests] == ["/v1/completions", "/v1/completions"]
    _, models = request(port, "GET", "/v1/models")
    assert json.loads(models.read())["data"][0]["id"] == "test-org/m"


def test_prefill_then_decode_protocol_streams_the_decoder(servers):
    prefill = servers(FakeEngine("p", kv_transfer_params=KV_FROM_PREFILL))
    decode = servers(FakeEngine("d"))
    proxy = servers(ProxyServer("127.0.0.1", 0, prefill=[prefill.url], decode=[decode.url]))
    original = {"model": "test-org/m", "prompt": "hello", "max_tokens": 64, "stream": True, "stream_options": {"a": 1}}
    conn, response = request(proxy.server_address[1], "POST", "/v1/completions", original, {"X-Request-Id": "req-7"})
    assert response.status == 200
    assert response.getheader("Content-Type") == "text/event-stream"
    first = response.read1(1 << 16)  # arrives while the decoder still holds back the rest: streamed, not buffered
    assert first == SSE_EVENTS[0]
    decode.first_chunk_seen.set()
    rest = response.read()
    assert first + rest == b"".join(SSE_EVENTS)

    (p_path, p_headers, p_body), (d_path, d_headers, d_body) = prefill.requests[0], decode.requests[0]
    assert p_path == d_path == "/v1/completions"
    assert p_body["max_tokens"] == 1 and p_body["stream"] is False and "stream_options" not in p_body
    assert p_body["kv_transfer_params"] == PREFILL_KV_TRANSFER
    assert d_body == {**original, "kv_transfer_params": KV_FROM_PREFILL}
    assert p_headers["X-Request-Id"] == d_headers["X-Request-Id"] == "req-7"


def test_pd_chat_caps_max_completion_tokens_and_makes_a_request_id(servers):
    prefill = servers(FakeEngine("p", kv_transfer_params=KV_FROM_PREFILL))
    decode = servers(FakeEngine("d"))
    proxy = servers(ProxyServer("127.0.0.1", 0, prefill=[prefill.url], decode=[decode.url]))
    chat = {"model": "test-org/m", "messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 9}
    _, response = request(proxy.server_address[1], "POST", "/v1/chat/completions", chat)
    assert json.loads(response.read())["served_by"] == "d"
    p_headers, p_body = prefill.requests[0][1:]
    assert p_body["max_completion_tokens"] == 1
    assert decode.requests[0][2]["max_completion_tokens"] == 9
    assert p_headers["X-Request-Id"] == decode.requests[0][1]["X-Request-Id"] != ""


def test_health_reports_down_backends(servers):
    up = servers(FakeEngine("up"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead_port = s.getsockname()[1]
    proxy = servers(ProxyServer("127.0.0.1", 0, backends=[up.url]))
    _, ok = request(proxy.server_address[1], "GET", "/health")
    assert ok.status == 200
    broken = servers(ProxyServer("127.0.0.1", 0, backends=[up.url, f"http://127.0.0.1:{dead_port}"]))
    _, down = request(broken.server_address[1], "GET", "/health")
    assert down.status == 503 and json.loads(down.read())["down"] == [f"127.0.0.1:{dead_port}"]
    _, missing = request(broken.server_address[1], "POST", "/v1/embeddings", {})
    assert missing.status == 404


@pytest.mark.parametrize(
    "argv",
    [
        ["--port", "1"],
        ["--port", "1", "--backend", "http://a:1", "--prefill", "http://b:2", "--decode", "http://c:3"],
        ["--port", "1", "--prefill", "http://b:2"],
        ["--port", "1", "--backend", "localhost:8000"],
        ["--backend", "http://a:1"],
    ],
)
def test_cli_refuses_incomplete_or_mixed_modes(argv, capsys):
    with pytest.raises(MiTuneError):
        parse_args(argv)
    assert main(argv) == 2
    assert capsys.readouterr().err.startswith("error: proxy: ")


def test_runs_as_a_module(servers):
    backend = servers(FakeEngine("m"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = proxy_argv("127.0.0.1", port, [backend.url], [], [])
    proc = subprocess.Popen([sys.executable, *argv[1:]], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            try:
                _, response = request(port, "POST", "/v1/completions", {"prompt": "x"})
                break
            except OSError:
                assert time.monotonic() < deadline, "proxy did not start"
                time.sleep(0.05)
        assert json.loads(response.read())["served_by"] == "m"
    finally:
        proc.terminate()
        proc.wait(TIMEOUT_S)
