"""An asyncio load generator for OpenAI-compatible servers: /v1/completions or /v1/chat/completions, streamed as
server-sent events, every token event timestamped.

The HTTP/1.1 client is stdlib only (asyncio.open_connection, chunked transfer decoding): the timing of each
event is taken as its bytes are read, with no client library between the socket and the clock, and mi-tune adds
no HTTP dependency. One connection per request (`Connection: close`).
"""

from __future__ import annotations

import asyncio
import json
import random
import ssl
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

from autotune.specs.errors import MiTuneError

ENDPOINTS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
# Prompt token ids: drawn per request from a range every catalog tokenizer holds (vocabularies are >= 32k), so
# requests share no prefix and the engine's prefix cache does not shorten prefill.
TOKEN_ID_RANGE = (1000, 20000)
CONNECT_TIMEOUT_S = 10.0


class TraceRequest(Protocol):
    """What the client needs of a request (autotune.sim.trace.Request has these)."""

    index: int
    arrival_s: float
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class RequestResult:
    index: int
    input_tokens: int  # sent (or the server's usage.prompt_tokens when it reports one)
    output_tokens: int  # the server's usage.completion_tokens, else the token events counted
    start_s: float  # when the request was sent, seconds from the start of the run
    ttft_s: float  # first token event after start (0 when none came)
    e2e_s: float  # last byte after start
    token_times_s: tuple[float, ...] = ()  # each token event, seconds after start
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error

    @property
    def tpot_s(self) -> float:
        """Mean time per output token after the first: (e2e - ttft) / (tokens - 1), as vLLM's and SGLang's
        bench clients define it; 0 for a one-token answer."""
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1) if self.output_tokens > 1 else 0.0


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str
    port: int
    base_path: str  # path prefix of the URL, without a trailing slash

    @classmethod
    def parse(cls, url: str) -> Target:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise MiTuneError(f"--url: expected http://HOST:PORT (or https://), got {url!r}")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise MiTuneError(f"--url: bad port in {url!r}") from None
        base = parts.path.rstrip("/")
        if base.endswith("/v1"):  # an OpenAI base URL: the endpoints below add /v1 themselves
            base = base[:-3]
        return cls(parts.scheme, parts.hostname, port, base)


def prompt_ids(index: int, tokens: int, seed: int) -> list[int]:
    rng = random.Random(seed * 1_000_003 + index)
    return [rng.randrange(*TOKEN_ID_RANGE) for _ in range(tokens)]


def request_body(req: TraceRequest, model: str, endpoint: str, seed: int) -> dict:
    """Completions send token ids (an exact input length, no tokenizer needed); chat sends one word per token."""
    common = {
        "model": model,
        "max_tokens": req.output_tokens,
        "ignore_eos": True,  # vLLM and SGLang extension: generate exactly max_tokens
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    ids = prompt_ids(req.index, req.input_tokens, seed)
    if endpoint == "chat":
        return {**common, "messages": [{"role": "user", "content": " ".join(f"w{i}" for i in ids)}]}
    return {**common, "prompt": ids}


async def _open(target: Target):
    context = ssl.create_default_context() if target.scheme == "https" else None
    return await asyncio.wait_for(
        asyncio.open_connection(target.host, target.port, ssl=context), timeout=CONNECT_TIMEOUT_S
    )


async def http_request(
    target: Target, method: str, path: str, body: bytes = b""
) -> tuple[int, dict[str, str], asyncio.StreamReader, asyncio.StreamWriter]:
    """Connect and send one request; returns (status, lower-cased headers, reader positioned at the body, writer)."""
    reader, writer = await _open(target)
    try:
        status, headers = await exchange(reader, writer, target, method, path, body)
    except BaseException:
        writer.close()
        raise
    return status, headers, reader, writer


async def exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, target: Target, method: str, path: str, body: bytes
) -> tuple[int, dict[str, str]]:
    """Send a request on an open connection and read the status line and headers."""
    lines = [
        f"{method} {target.base_path}{path} HTTP/1.1",
        f"Host: {target.host}:{target.port}",
        "Connection: close",
        "Accept: text/event-stream, application/json",
    ]
    if body:
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
    await writer.drain()
    status_line = await reader.readline()
    parts = status_line.decode("latin-1").split(" ", 2)
    if len(parts) < 2 or not parts[1].isdigit():
        raise ConnectionError(f"not an HTTP response: {status_line[:80]!r}")
    found: dict[str, str] = {}
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b"\n", b""):
            break
        name, _, value = line.decode("latin-1").partition(":")
        found[name.strip().lower()] = value.strip()
    return int(parts[1]), found


async def body_chunks(reader: asyncio.StreamReader, headers: dict[str, str]) -> AsyncIterator[bytes]:
    """The response body as it arrives: chunked transfer decoded, or Content-Length bytes, or until close."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            size_line = await reader.readline()
            if not size_line:
                return
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                await reader.readline()  # the empty line after the last chunk (no trailers are sent)
                return
            yield await reader.readexactly(size)
            await reader.readexactly(2)  # CRLF after each chunk
    elif "content-length" in headers:
        left = int(headers["content-length"])
        while left > 0:
            data = await reader.read(min(left, 65536))
            if not data:
                return
            left -= len(data)
            yield data
    else:
        while data := await reader.read(65536):
            yield data


async def sse_events(reader: asyncio.StreamReader, headers: dict[str, str]) -> AsyncIterator[str]:
    """The `data:` payloads of a server-sent event stream, one per event."""
    buffer = b""
    async for chunk in body_chunks(reader, headers):
        buffer += chunk.replace(b"\r\n", b"\n")
        while b"\n\n" in buffer:
            event, buffer = buffer.split(b"\n\n", 1)
            data = [line[5:].strip() for line in event.split(b"\n") if line.startswith(b"data:")]
            if data:
                yield b"\n".join(data).decode("utf-8", "replace")


def _event_text(payload: dict, endpoint: str) -> str:
    choices = payload.get("choices") or []
    if not choices:
        return ""
    choice = choices[0]
    if endpoint == "chat":
        delta = choice.get("delta") or {}
        return (delta.get("content") or "") + (delta.get("reasoning_content") or "")
    return choice.get("text") or ""


async def send_one(target: Target, req: TraceRequest, model: str, endpoint: str, seed: int, t0: float):
    """Run one streamed request; every failure becomes RequestResult.error (the run goes on). The clock starts
    when the request is sent on its open connection, as with a client's pooled keep-alive connection."""
    body = json.dumps(request_body(req, model, endpoint, seed)).encode()
    times: list[float] = []
    usage: dict = {}
    writer = None
    start = time.perf_counter()
    try:
        reader, writer = await _open(target)
        start = time.perf_counter()
        status, headers = await exchange(reader, writer, target, "POST", ENDPOINTS[endpoint], body)
        if status != 200:
            text = b"".join([c async for c in body_chunks(reader, headers)]).decode("utf-8", "replace")
            raise ConnectionError(f"HTTP {status}: {text.strip()[:200]}")
        async for data in sse_events(reader, headers):
            now = time.perf_counter()
            if data == "[DONE]":
                break
            payload = json.loads(data)
            if payload.get("error"):
                raise ConnectionError(f"server error: {str(payload['error'])[:200]}")
            if _event_text(payload, endpoint):
                times.append(now - start)
            usage = payload.get("usage") or usage
        end = time.perf_counter() - start
        if not times:
            raise ConnectionError("the stream ended without a token")
        error = ""
    except (OSError, ConnectionError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError) as exc:
        end, error = time.perf_counter() - start, f"{type(exc).__name__}: {exc}"
    finally:
        if writer is not None:
            writer.close()
    return RequestResult(
        index=req.index,
        input_tokens=int(usage.get("prompt_tokens") or req.input_tokens),
        output_tokens=int(usage.get("completion_tokens") or len(times)),
        start_s=start - t0,
        ttft_s=times[0] if times else 0.0,
        e2e_s=end,
        token_times_s=tuple(times),
        error=error,
    )


async def run_requests(
    target: Target, requests: Sequence[TraceRequest], model: str, concurrency: int, endpoint: str, seed: int
) -> tuple[list[RequestResult], float]:
    """Send each request at its arrival time, at most `concurrency` in flight (0 = no cap); (results, seconds)."""
    limit = asyncio.Semaphore(concurrency) if concurrency > 0 else None
    t0 = time.perf_counter()

    async def one(req: TraceRequest) -> RequestResult:
        delay = req.arrival_s - (time.perf_counter() - t0)
        if delay > 0:
            await asyncio.sleep(delay)
        if limit is None:
            return await send_one(target, req, model, endpoint, seed, t0)
        async with limit:
            return await send_one(target, req, model, endpoint, seed, t0)

    results = await asyncio.gather(*(one(r) for r in requests))
    return sorted(results, key=lambda r: r.index), time.perf_counter() - t0


async def get_json(target: Target, path: str) -> tuple[int, object]:
    status, headers, reader, writer = await http_request(target, "GET", path)
    try:
        raw = b"".join([c async for c in body_chunks(reader, headers)])
    finally:
        writer.close()
    try:
        return status, json.loads(raw) if raw.strip() else None
    except ValueError:
        return status, raw.decode("utf-8", "replace")


async def served_model(target: Target) -> str:
    """The first model id /v1/models lists."""
    try:
        status, doc = await get_json(target, "/v1/models")
    except (OSError, asyncio.TimeoutError, ConnectionError) as exc:
        raise MiTuneError(f"--url: cannot reach {target.host}:{target.port}: {exc}") from None
    data = doc.get("data") if isinstance(doc, dict) else None
    if status != 200 or not data:
        raise MiTuneError(f"--url: GET /v1/models answered {status} with no model; pass --model")
    return str(data[0].get("id"))
