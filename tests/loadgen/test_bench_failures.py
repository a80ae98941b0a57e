"""bench never hangs and never calls a failure a success: servers that stall, fail or cut their streams."""

import asyncio
import json
import threading

import pytest

from autotune.cli import run
from autotune.loadgen import bench
from autotune.specs import MiTuneError, Workload

SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"


def _event(text: str) -> bytes:
    return f"data: {json.dumps({'choices': [{'text': text}]})}\n\n".encode()


async def _silent(reader, writer):  # accepts, reads, never answers
    await reader.read(65536)
    await asyncio.sleep(3600)


async def _stalls_mid_stream(reader, writer):
    await reader.read(65536)
    writer.write(SSE_HEAD + _event("a") + _event("b"))
    await writer.drain()
    await asyncio.sleep(3600)


async def _http_500(reader, writer):
    await reader.read(65536)
    writer.write(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 5\r\nConnection: close\r\n\r\noops!")
    await writer.drain()
    writer.close()


async def _truncated(reader, writer):  # tokens, then the connection closes without [DONE]
    await reader.read(65536)
    writer.write(SSE_HEAD + _event("a") + _event("b"))
    await writer.drain()
    writer.close()


async def _garbage(reader, writer):
    await reader.read(65536)
    writer.write(SSE_HEAD + b"data: [1, 2]\n\ndata: not json\n\n")
    await writer.drain()
    writer.close()


@pytest.fixture
def serve():
    """serve(handler) -> URL of an asyncio server on 127.0.0.1 (its own loop in a thread)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    def start(handler) -> str:
        server = asyncio.run_coroutine_threadsafe(asyncio.start_server(handler, "127.0.0.1", 0), loop).result(10)
        return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"

    yield start
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)


FAST = ["--connect-timeout", "2", "--first-token-timeout", "1", "--idle-timeout", "1"]


@pytest.mark.parametrize(
    "handler, error",
    [
        (_silent, "TimeoutError: no response in 1 s"),
        (_stalls_mid_stream, "TimeoutError: the stream stalled: no event in 1 s"),
        (_http_500, "HTTP 500: oops!"),
        (_truncated, "ended after 2 tokens without [DONE] (truncated)"),
        (_garbage, "ValueError"),
    ],
    ids=["never-answers", "stalls-mid-stream", "http-500", "truncated", "garbage"],
)
def test_a_failing_server_ends_the_bench_with_exit_1(serve, handler, error, capsys):
    url = serve(handler)
    argv = ["bench", "--url", url, "--model", "m", "--isl", "4", "--osl", "2", "--concurrency", "2"]
    assert run([*argv, "--num-requests", "3", *FAST]) == 1
    captured = capsys.readouterr()
    assert "0 completed, 3 failed" in captured.out
    assert "mi-tune: bench failed: 3 of 3 requests failed (--max-failed 0); first error: " in captured.err
    assert error in captured.err


def test_max_failed_admits_a_share_of_failures(serve, capsys):
    url = serve(_http_500)
    argv = ["bench", "--url", url, "--model", "m", "--isl", "4", "--osl", "2", "--concurrency", "1", *FAST]
    assert run([*argv, "--num-requests", "2", "--max-failed", "1"]) == 0
    assert run([*argv, "--num-requests", "2", "--max-failed", "0.5"]) == 1


def test_a_silent_server_asked_for_its_models_is_one_line_exit_2(serve, capsys):
    url = serve(_silent)
    assert run(["bench", "--url", url, "--concurrency", "1", "--num-requests", "1", *FAST]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mi-tune: error: --url: cannot reach") and "no response in 1 s" in err


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--burst", "100000000"], "--burst: expected 0..10,000,000 requests"),
        (["--concurrency", "1", "--num-requests", "500000", "--osl", "1024"], "--num-requests: at most"),
        (["--concurrency", "1", "--idle-timeout", "0"], "--idle-timeout: expected 0 < x"),
        (["--concurrency", "1", "--max-failed", "2"], "--max-failed: expected 0..1 (a share of the requests)"),
    ],
)
def test_request_counts_and_timeouts_are_bounded_before_any_request(argv, expected, capsys):
    assert run(["bench", "--url", "http://127.0.0.1:9", "--model", "m", *argv]) == 2
    assert expected in capsys.readouterr().err


def test_a_burst_above_the_in_flight_cap_is_sent_in_waves(serve, monkeypatch):
    from autotune.loadgen import client

    monkeypatch.setattr(client, "MAX_IN_FLIGHT", 2)
    url = serve(_http_500)
    report = bench(url, Workload(isl=4, osl=2, burst=7), model="m")
    assert report.num_requests == 7 and report.failed == 7


def test_the_api_refuses_a_burst_it_cannot_hold():
    with pytest.raises(MiTuneError, match="--burst"):
        bench("http://127.0.0.1:9", Workload(isl=4, osl=2, burst=2_000_000), model="m")
