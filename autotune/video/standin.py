"""A stand-in for `sglang serve` of a video model (stdlib only, runs as a script): the asynchronous video API of
SGLang Diffusion (runtime/entrypoints/openai/video_api.py:65, :480 POST /v1/videos -> a queued job;
:834 GET /v1/videos/{id} -> its status, `completed` when done), with `--dp-size` replicas each rendering one video
at a time in arrival order, so `serve`, `bench --endpoint videos` and `measure` run end to end without a GPU.

Timing JSON (all optional): seconds_per_video (default 2.0) + seconds_per_step x num_inference_steps of the
request, startup_s, fail (print it and exit 1). `python standin.py --timing FILE -- <sglang serve argv>` takes
--host, --port and --dp-size from that argv and ignores every other flag.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import sys
import time
from pathlib import Path

from autotune.engines.standin import standin_main
from autotune.specs.io import read_text

TIMING_KEYS = {"seconds_per_video": 2.0, "seconds_per_step": 0.0, "startup_s": 0.0}


def load_timing(path: str | Path) -> dict:
    doc = json.loads(read_text(path))
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: expected a JSON object")
    unknown = set(doc) - set(TIMING_KEYS) - {"fail"}
    if unknown:
        raise ValueError(f"{path}: unknown keys {', '.join(sorted(unknown))} (known: {', '.join(TIMING_KEYS)}, fail)")
    timing = dict(TIMING_KEYS)
    for key in TIMING_KEYS:
        value = doc.get(key, timing[key])
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{path}: {key}: expected a number >= 0, got {value!r}")
        timing[key] = float(value)
    timing["fail"] = str(doc.get("fail", ""))
    return timing


def engine_args(argv: list[str]) -> tuple[str, int, int]:
    """(host, port, replicas) from a `sglang serve` argv."""
    values = {"--host": "127.0.0.1", "--port": "8000", "--dp-size": "1"}
    for i, token in enumerate(argv):
        name, _, inline = token.partition("=")
        if name in values:
            values[name] = inline or (argv[i + 1] if i + 1 < len(argv) else values[name])
    return values["--host"], int(values["--port"]), max(1, int(values["--dp-size"]))


class VideoStandIn:
    def __init__(self, timing: dict, replicas: int):
        self.timing, self.jobs, self.ids = timing, {}, itertools.count()
        self.queue: asyncio.Queue = asyncio.Queue()
        self.replicas = replicas

    async def worker(self) -> None:
        while True:
            job_id, steps = await self.queue.get()
            job = self.jobs[job_id]
            job["status"] = "in_progress"
            seconds = self.timing["seconds_per_video"] + self.timing["seconds_per_step"] * steps
            await asyncio.sleep(seconds)
            job.update(status="completed", progress=100, completed_at=int(time.time()), inference_time_s=seconds)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            method, path, body = await _read_request(reader)
            if method == "GET" and path == "/health":
                await _send(writer, 200, b"{}")
            elif method == "POST" and path == "/v1/videos":
                req = json.loads(body or b"{}")
                if not isinstance(req, dict) or not req.get("prompt"):
                    await _send(writer, 400, b'{"detail": "prompt is required"}')
                    return
                job_id = f"video_{next(self.ids)}"
                self.jobs[job_id] = {"id": job_id, "object": "video", "status": "queued", "progress": 0,
                                     "size": str(req.get("size", ""))}  # fmt: skip
                self.queue.put_nowait((job_id, int(req.get("num_inference_steps") or 0)))
                await _send(writer, 200, json.dumps(self.jobs[job_id]).encode())
            elif method == "GET" and path.startswith("/v1/videos/") and path[11:] in self.jobs:
                await _send(writer, 200, json.dumps(self.jobs[path[11:]]).encode())
            else:
                await _send(writer, 404, b'{"detail": "Not Found"}')
        except (ValueError, ConnectionError):
            with contextlib.suppress(ConnectionError):
                await _send(writer, 400, b'{"detail": "bad request"}')
        finally:
            writer.close()


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    return method, path, await reader.readexactly(length) if length else b""


async def _send(writer: asyncio.StreamWriter, status: int, body: bytes) -> None:
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}.get(status, "")
    head = f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    writer.write(head.encode() + b"Connection: close\r\n\r\n" + body)
    await writer.drain()


async def _serve(timing: dict, host: str, port: int, replicas: int) -> None:
    if timing["startup_s"]:
        await asyncio.sleep(timing["startup_s"])
    app = VideoStandIn(timing, replicas)
    workers = [asyncio.create_task(app.worker()) for _ in range(replicas)]
    server = await asyncio.start_server(app.handle, host, port)
    print(f"video stand-in: listening on {host}:{port}, {replicas} replica(s), timing {json.dumps(timing)}", flush=True)
    async with server:
        await server.serve_forever()
    for w in workers:
        w.cancel()


def main(argv: list[str] | None = None) -> int:
    def start(timing, rest):
        host, port, replicas = engine_args(rest)
        return _serve(timing, host, port, replicas)

    return standin_main(argv, "video-standin", "video stand-in", load_timing, start)


def substitute(launch, timing_path: str | Path):
    """The launch with `sglang` replaced by this stand-in (same argv after it, same env)."""
    from autotune.engines.standin import substitute_with

    return substitute_with(launch, timing_path, Path(__file__), load_timing)


if __name__ == "__main__":
    sys.exit(main())
