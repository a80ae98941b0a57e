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
from array import array
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
FIRST_TOKEN_TIMEOUT_S = 600.0  # a long prompt queued behind a burst: minutes (a prior, not measured)
IDLE_TIMEOUT_S = 60.0  # between two events of one stream; a decode step takes milliseconds
MAX_IN_FLIGHT = 1024  # requests open at once (each a socket); a larger burst is sent as fast as they close


@dataclass(frozen=True)
class Timeouts:
    """Per request: to connect, from sending to the first token (status and headers included), and between
    two events of the stream. A request past one fails with TimeoutError (it is never waited for forever)."""

    connect_s: float = CONNECT_TIMEOUT_S
    first_token_s: float = FIRST_TOKEN_TIMEOUT_S
    idle_s: float = IDLE_TIMEOUT_S


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
    token_times_s: Sequence[float] = ()  # each token event, seconds after start (an array of doubles)
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


async def _open(target: Target, timeout_s: float = CONNECT_TIMEOUT_S):
    context = ssl.create_default_context() if target.scheme == "https" else None
    try:
        return await asyncio.wait_for(asyncio.open_connection(target.host, target.port, ssl=context), timeout_s)
    except asyncio.TimeoutError:
        raise TimeoutError(f"no connection in {timeout_s:g} s") from None


async def _within(awaitable, timeout_s: float, what: str):
    try:
        return await asyncio.wait_for(awaitable, timeout_s)
    except asyncio.TimeoutError:
        raise TimeoutError(f"{what} in {timeout_s:g} s") from None


async def http_request(
    target: Target, method: str, path: str, body: bytes = b"", timeouts: Timeouts = Timeouts()
) -> tuple[int, dict[str, str], asyncio.StreamReader, asyncio.StreamWriter]:
    """Connect and send one request; returns (status, lower-cased headers, reader positioned at the body, writer)."""
    reader, writer = await _open(target, timeouts.connect_s)
    try:
        status, headers = await _within(
            exchange(reader, writer, target, method, path, body), timeouts.idle_s, "no response"
        )
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


async def send_one(
    target: Target, req: TraceRequest, model: str, endpoint: str, seed: int, t0: float, timeouts: Timeouts = Timeouts()
):
    """Run one streamed request; every failure becomes RequestResult.error (the run goes on): an HTTP error, a
    stream that stalls (Timeouts) or ends before its `[DONE]` event (truncated), an error event. The clock starts
    when the request is sent on its open connection, as with a client's pooled keep-alive connection."""
    body = json.dumps(request_body(req, model, endpoint, seed)).encode()
    times = array("d")
    usage: dict = {}
    writer = None
    start = time.perf_counter()
    waiting = "no response"
    try:
        reader, writer = await _open(target, timeouts.connect_s)
        start = time.perf_counter()
        loop = asyncio.get_running_loop()
        # one deadline, moved on at each event (asyncio.timeout_at adds no task per read, so no delay to the clock)
        async with asyncio.timeout_at(loop.time() + timeouts.first_token_s) as deadline:
            status, headers = await exchange(reader, writer, target, "POST", ENDPOINTS[endpoint], body)
            if status != 200:
                deadline.reschedule(loop.time() + timeouts.idle_s)
                waiting = f"HTTP {status}, no body"
                text = (await _head(reader, headers)).decode("utf-8", "replace")
                raise ConnectionError(f"HTTP {status}: {text.strip()[:200]}")
            waiting = "no token"
            finished = False
            async for data in sse_events(reader, headers):
                now = time.perf_counter()
                if data == "[DONE]":
                    finished = True
                    break
                payload = json.loads(data)
                if not isinstance(payload, dict):
                    raise ValueError(f"not an event object: {data[:80]!r}")
                if payload.get("error"):
                    raise ConnectionError(f"server error: {str(payload['error'])[:200]}")
                if _event_text(payload, endpoint):
                    times.append(now - start)
                usage = payload.get("usage") or usage
                if times:
                    waiting = "the stream stalled: no event"
                    deadline.reschedule(loop.time() + timeouts.idle_s)
        end = time.perf_counter() - start
        if not times:
            raise ConnectionError("the stream ended without a token")
        if not finished:
            raise ConnectionError(f"the stream ended after {len(times)} tokens without [DONE] (truncated)")
        error = ""
    except TimeoutError:
        limit = timeouts.idle_s if times or waiting.startswith("HTTP") else timeouts.first_token_s
        end, error = time.perf_counter() - start, f"TimeoutError: {waiting} in {limit:g} s"
    except (OSError, ConnectionError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError) as exc:
        end, error = time.perf_counter() - start, f"{type(exc).__name__}: {exc}"
    finally:
        if writer is not None:
            writer.close()
    return RequestResult(
        index=req.index,
        input_tokens=_count(usage.get("prompt_tokens"), req.input_tokens),
        output_tokens=_count(usage.get("completion_tokens"), len(times)),
        start_s=start - t0,
        ttft_s=times[0] if times else 0.0,
        e2e_s=end,
        token_times_s=times,
        error=error,
    )


async def _head(reader: asyncio.StreamReader, headers: dict[str, str], limit: int = 4096) -> bytes:
    """The first `limit` bytes of a body (an error message; the rest is not read)."""
    kept = b""
    async for chunk in body_chunks(reader, headers):
        kept += chunk
        if len(kept) >= limit:
            break
    return kept[:limit]


def _count(reported, fallback: int) -> int:
    """A count the server reported in `usage`, when it is one."""
    return reported if isinstance(reported, int) and not isinstance(reported, bool) and reported > 0 else fallback


async def run_requests(
    target: Target,
    requests: Sequence[TraceRequest],
    model: str,
    concurrency: int,
    endpoint: str,
    seed: int,
    timeouts: Timeouts = Timeouts(),
) -> tuple[list[RequestResult], float]:
    """Send each request at its arrival time, at most `concurrency` in flight (0 = no cap, bounded by
    MAX_IN_FLIGHT); (results, seconds). Requests become tasks only as a slot frees: memory stays bounded by the
    requests in flight and the results, whatever the count."""
    cap = min(concurrency, MAX_IN_FLIGHT) if concurrency > 0 else MAX_IN_FLIGHT
    slots = asyncio.Semaphore(cap)
    t0 = time.perf_counter()
    results: list[RequestResult] = []
    running: set[asyncio.Task] = set()

    async def one(req: TraceRequest) -> None:
        try:
            delay = req.arrival_s - (time.perf_counter() - t0)
            if delay > 0:
                await asyncio.sleep(delay)
            results.append(await send_one(target, req, model, endpoint, seed, t0, timeouts))
        finally:
            slots.release()

    for req in requests:
        await slots.acquire()
        task = asyncio.ensure_future(one(req))
        running.add(task)
        task.add_done_callback(running.discard)
    if running:
        await asyncio.gather(*running)
    return sorted(results, key=lambda r: r.index), time.perf_counter() - t0


async def get_json(target: Target, path: str, timeouts: Timeouts = Timeouts()) -> tuple[int, object]:
    status, headers, reader, writer = await http_request(target, "GET", path, timeouts=timeouts)

    async def read() -> bytes:
        return b"".join([c async for c in body_chunks(reader, headers)])

    try:
        raw = await _within(read(), timeouts.idle_s, "no complete answer")
    finally:
        writer.close()
    try:
        return status, json.loads(raw) if raw.strip() else None
    except ValueError:
        return status, raw.decode("utf-8", "replace")


async def served_model(target: Target, timeouts: Timeouts = Timeouts()) -> str:
    """The first model id /v1/models lists."""
    try:
        status, doc = await get_json(target, "/v1/models", timeouts)
    except (OSError, asyncio.TimeoutError, ConnectionError) as exc:
        raise MiTuneError(f"--url: cannot reach {target.host}:{target.port}: {exc}") from None
    data = doc.get("data") if isinstance(doc, dict) else None
    if status != 200 or not data:
        raise MiTuneError(f"--url: GET /v1/models answered {status} with no model; pass --model")
    return str(data[0].get("id"))
