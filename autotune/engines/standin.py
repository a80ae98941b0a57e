"""A stand-in engine for tests: a small OpenAI-compatible server (stdlib asyncio) whose timing is set by a JSON
file, so that `serve`, `bench` and `measure` run end to end on a machine without a GPU.

Timing (all keys optional, ms):
    TTFT of a request = ttft_ms + ttft_ms_per_input_token * its input tokens + ttft_ms_per_running * (others running)
    each later token  = tpot_ms + tpot_ms_per_running * (others running when it is produced)
Tokens are emitted at absolute deadlines (the first from the request's arrival, the others from the first), so
scheduling jitter does not accumulate and a late first token does not shorten the gaps after it.
Other keys: `model` (the id /v1/models lists; default: the engine argv's model), `startup_s` (seconds before it
listens, like weights loading), `fail` (print this line and exit 1 at once: an engine that cannot start),
`tokens_per_step` (speculative decoding: tokens a sequence advances per verify step, bonus included; 0 = none).

`python standin.py --timing FILE -- <engine argv>` takes --host/--port (and --served-model-name / --model-path /
`serve MODEL`) from the engine argv it stands in for and ignores every other flag. Input tokens: a completions
prompt of token ids counts one per id; text counts one per whitespace-separated word.
Endpoints: GET /health, GET /v1/models, POST /v1/completions and /v1/chat/completions (streamed or not), and with
tokens_per_step GET /metrics: the speculative counters of the engine it stands in for (SGLang when its argv names
sglang, else vLLM), counted per finished request as measure/acceptance.py reads them.
This file runs as a script with the standard library only (fast start); `substitute` is the mi-tune side.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from autotune.specs.errors import MiTuneError

TIMING_KEYS = {
    "ttft_ms": 20.0,
    "ttft_ms_per_input_token": 0.0,
    "ttft_ms_per_running": 0.0,
    "tpot_ms": 10.0,
    "tpot_ms_per_running": 0.0,
    "startup_s": 0.0,
    "tokens_per_step": 0.0,
}
DEFAULT_MAX_TOKENS = 16


def load_timing(path: str | Path) -> dict:
    """The timing file as a dict of the known keys; ValueError naming the file and the bad key."""
    doc = json.loads(Path(path).read_text())
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: expected a JSON object")
    unknown = set(doc) - set(TIMING_KEYS) - {"model", "fail"}
    if unknown:
        known = ", ".join([*TIMING_KEYS, "model", "fail"])
        raise ValueError(f"{path}: unknown keys {', '.join(sorted(unknown))} (known: {known})")
    timing = dict(TIMING_KEYS)
    for key in TIMING_KEYS:
        if key in doc:
            value = doc[key]
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{path}: {key}: expected a number >= 0, got {value!r}")
            timing[key] = float(value)
    timing["model"] = str(doc.get("model", ""))
    timing["fail"] = str(doc.get("fail", ""))
    return timing


def engine_args(argv: list[str]) -> tuple[str, int, str]:
    """(host, port, model) from a vLLM / SGLang / router argv."""
    host, port, names = "127.0.0.1", 8000, {}
    for k, arg in enumerate(argv[:-1]):
        value = argv[k + 1]
        if arg == "--host":
            host = value
        elif arg == "--port":
            port = int(value)
        elif arg in ("--served-model-name", "--model-path", "--model"):
            names.setdefault(arg, value)
        elif arg == "serve" and not value.startswith("-"):
            names.setdefault("serve", value)
    order = ("--served-model-name", "--model-path", "--model", "serve")  # what the engine lists, first
    return host, port, next((names[k] for k in order if k in names), "stand-in")


class StandIn:
    def __init__(self, timing: dict, model: str, family: str = "vllm"):
        self.timing, self.model, self.running, self.family = timing, model, 0, family
        self.counters: dict[str, float] = {}

    def count_speculation(self, output_tokens: int) -> None:
        """Count a finished request's verify steps the way the engine's counters would (tokens after the first
        come tokens_per_step at a time)."""
        per_step = self.timing["tokens_per_step"]
        if per_step < 1 or output_tokens < 1:
            return
        steps = -(-(output_tokens - 1) // per_step) if output_tokens > 1 else 0
        if self.family == "sglang":
            names = {"sglang:generation_tokens_total": output_tokens, "sglang:num_requests_total": 1,
                     "sglang:spec_verify_calls_total": steps}  # fmt: skip
        else:
            names = {"vllm:spec_decode_num_drafts_total": steps,
                     "vllm:spec_decode_num_accepted_tokens_total": output_tokens - 1 - steps}  # fmt: skip
        for name, value in names.items():
            self.counters[name] = self.counters.get(name, 0.0) + value

    def metrics_text(self) -> bytes:
        lines = [f"# TYPE {name} counter\n{name}{{model_name=\"{self.model}\"}} {value}" for name, value in
                 sorted(self.counters.items())]  # fmt: skip
        return ("\n".join(lines) + "\n").encode()

    def ttft_s(self, input_tokens: int) -> float:
        t = self.timing
        ms = t["ttft_ms"] + t["ttft_ms_per_input_token"] * input_tokens + t["ttft_ms_per_running"] * (self.running - 1)
        return ms / 1e3

    def tpot_s(self) -> float:
        return (self.timing["tpot_ms"] + self.timing["tpot_ms_per_running"] * (self.running - 1)) / 1e3

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            method, path, body, arrived = await _read_request(reader)
            if method == "GET" and path == "/health":
                await _send(writer, 200, b"", "text/plain")
            elif method == "GET" and path == "/metrics" and self.timing["tokens_per_step"]:
                await _send(writer, 200, self.metrics_text(), "text/plain")
            elif method == "GET" and path == "/v1/models":
                doc = {"object": "list", "data": [{"id": self.model, "object": "model", "owned_by": "mi-tune"}]}
                await _send(writer, 200, json.dumps(doc).encode())
            elif method == "POST" and path in ("/v1/completions", "/v1/chat/completions"):
                await self.generate(writer, json.loads(body or b"{}"), path.endswith("chat/completions"), arrived)
            else:
                await _send(writer, 404, json.dumps({"error": f"no route {method} {path}"}).encode())
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except ValueError as exc:
            await _send(writer, 400, json.dumps({"error": str(exc)}).encode())
        finally:
            writer.close()

    async def generate(self, writer: asyncio.StreamWriter, req: dict, chat: bool, start: float) -> None:
        """Stream (or return) max_tokens tokens; `start` is when the request line arrived."""
        input_tokens = _input_tokens(req, chat)
        max_tokens = int(req.get("max_tokens") or req.get("max_completion_tokens") or DEFAULT_MAX_TOKENS)
        stream = bool(req.get("stream"))
        usage_wanted = bool((req.get("stream_options") or {}).get("include_usage"))
        self.running += 1
        try:
            if stream:
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
                    b"Connection: close\r\n\r\n"
                )
            deadline = start + self.ttft_s(input_tokens)
            for k in range(max_tokens):
                if k:
                    deadline += self.tpot_s()
                delay = deadline - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                if not k:  # later tokens count from the first one sent: a late first token delays them all
                    deadline = max(deadline, time.perf_counter())
                if stream:
                    choice = {"index": 0, "finish_reason": "length" if k == max_tokens - 1 else None}
                    choice.update({"delta": {"content": " tok"}} if chat else {"text": " tok"})
                    await _chunk(writer, {"object": "chunk", "model": self.model, "choices": [choice]})
            usage = {
                "prompt_tokens": input_tokens,
                "completion_tokens": max_tokens,
                "total_tokens": input_tokens + max_tokens,
            }
            self.count_speculation(max_tokens)
            if stream:
                if usage_wanted:
                    await _chunk(writer, {"object": "chunk", "model": self.model, "choices": [], "usage": usage})
                writer.write(_chunked(b"data: [DONE]\n\n") + b"0\r\n\r\n")
                await writer.drain()
                return
            text = " tok" * max_tokens
            choice = {"index": 0, "finish_reason": "length"}
            choice.update({"message": {"role": "assistant", "content": text}} if chat else {"text": text})
            await _send(writer, 200, json.dumps({"model": self.model, "choices": [choice], "usage": usage}).encode())
        finally:
            self.running -= 1


def _input_tokens(req: dict, chat: bool) -> int:
    if chat:
        return sum(len(str(m.get("content", "")).split()) for m in req.get("messages") or [])
    prompt = req.get("prompt", "")
    if isinstance(prompt, list):
        return len(prompt[0]) if prompt and isinstance(prompt[0], list) else len(prompt)
    return len(str(prompt).split())


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str, bytes, float]:
    line = (await reader.readline()).decode("latin-1").split()
    arrived = time.perf_counter()
    if len(line) < 2:
        raise ConnectionError("empty request")
    headers = {}
    while (raw := await reader.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = raw.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length") or 0)
    body = await reader.readexactly(length) if length else b""
    return line[0], line[1].split("?")[0], body, arrived


def _chunked(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def _chunk(writer: asyncio.StreamWriter, doc: dict) -> None:
    writer.write(_chunked(b"data: " + json.dumps(doc).encode() + b"\n\n"))
    await writer.drain()


async def _send(writer: asyncio.StreamWriter, status: int, body: bytes, ctype: str = "application/json") -> None:
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}.get(status, "")
    head = f"HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\nConnection: close"
    writer.write(head.encode() + b"\r\n\r\n" + body)
    await writer.drain()


async def _serve(timing: dict, host: str, port: int, model: str, family: str = "vllm") -> None:
    if timing["startup_s"]:
        await asyncio.sleep(timing["startup_s"])
    server = await asyncio.start_server(StandIn(timing, model, family).handle, host, port)
    print(f"stand-in engine: listening on {host}:{port}, model {model}, timing {json.dumps(timing)}", flush=True)
    async with server:
        await server.serve_forever()


def standin_main(argv: list[str] | None, prog: str, label: str, load: Callable, start: Callable) -> int:
    """A stand-in's entry point: `--timing FILE -- <engine argv>`; `load(path)` reads the timing (a `fail` entry
    makes the process exit 1 with that line, as an engine that cannot start), `start(timing, engine_argv)` is the
    coroutine that serves."""
    parser = argparse.ArgumentParser(prog=prog, description=label)
    parser.add_argument("--timing", required=True, help="timing JSON file")
    parser.add_argument("engine_argv", nargs=argparse.REMAINDER, help="-- then the engine's argv (flags ignored)")
    args = parser.parse_args(argv)
    try:
        timing = load(args.timing)
    except (OSError, ValueError, MiTuneError) as exc:
        print(f"{label}: {exc}", file=sys.stderr)
        return 2
    if timing["fail"]:
        print(f"{label}: {timing['fail']}", flush=True)
        return 1
    rest = args.engine_argv[1:] if args.engine_argv[:1] == ["--"] else args.engine_argv
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(start(timing, rest))
    return 0


def main(argv: list[str] | None = None) -> int:
    def start(timing, rest):
        host, port, model = engine_args(rest)
        family = "sglang" if any("sglang" in arg for arg in rest) else "vllm"
        return _serve(timing, host, port, timing["model"] or model, family)

    return standin_main(argv, "standin", "stand-in engine", load_timing, start)


def substitute(launch, timing_path: str | Path):
    """The launch with every process's executable replaced by this stand-in (same argv after it, same env), so
    the plan -> argv path runs unchanged and only what executes differs. The timing file is checked first."""
    return substitute_with(launch, timing_path, Path(__file__), load_timing)


def substitute_with(launch, timing_path: str | Path, script: Path, load) -> object:
    """`launch` with each process run by the stand-in `script` (`--timing FILE -- <the argv>`), after `load`
    checked the timing file (a bad one is the --stand-in flag's error)."""
    import dataclasses

    from autotune.specs.errors import MiTuneError

    path = Path(timing_path).resolve()
    try:
        load(path)
    except (OSError, ValueError) as exc:
        raise MiTuneError(f"--stand-in {timing_path}: {exc}") from None
    argv = [sys.executable, str(script.resolve()), "--timing", str(path), "--"]
    processes = tuple(dataclasses.replace(p, argv=(*argv, *p.argv)) for p in launch.processes)
    return dataclasses.replace(launch, processes=processes)


if __name__ == "__main__":
    sys.exit(main())
