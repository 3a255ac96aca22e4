"""Serving throughput and latency: braze's OpenAI-compatible server (examples/llm/server.py)
vs llama-cpp-python's (``python -m llama_cpp.server``, where installed), same GGUF.

Each server runs as its own process on a free local port. For each concurrency level
(``--streams``, default 1,4,16) that many clients stream chat completions at once, each
sending ``--requests`` requests back to back (fixed prompts, ``max_tokens`` fixed,
temperature 0); one untimed round first (braze traces a compiled step per batch bucket).
Reported per server and level: aggregate generated tokens/s (all streams' tokens / wall
time), p50/p99 time to first token and inter-token latency, failed requests; and the
ratios braze/llama.cpp and N-streams/1-stream. ``--rounds R``: braze's levels measured R
times, interleaved (the median run per level, and the ratio per round). ``--duration S``:
a soak instead, S seconds at the highest level, counting lost or failed requests.

    .venv/bin/python benchmarks/serve.py [--streams 1,4,16] [--max-tokens 128]
                                         [--requests 2] [--rounds 3] [--duration 300]
                                         [--llama-python PYTHON] [--only braze]

``--llama-python`` (default ``$LLAMA_CPP_PYTHON``, else this interpreter) must import
``llama_cpp`` and its server's dependencies (``pip install fastapi uvicorn sse-starlette
starlette-context pydantic-settings``); it runs with 2 threads, a 2048-token context and
``--interrupt_requests False`` (by default each new request cuts the running one short).
Its server decodes one request at a time (it has no batching), which is what a user
running it gets. Token counts come from each stream's usage chunk where the server sends
one, else from its content chunks. The header names the ISA braze's kernels ran on.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples", "llm"))
sys.path.insert(0, HERE)
import json  # noqa: E402

import httptools  # noqa: E402  (uvicorn's C HTTP parser: in the serve extras)
from _timing import isa  # noqa: E402

try:
    import httpx2 as httpx
except ImportError:  # older openai releases' HTTP library
    import httpx  # type: ignore[no-redef]

PROMPTS = ["Write a short story about a lighthouse keeper.",
           "Explain how a bicycle works to a child.",
           "Describe a walk through a forest in autumn.",
           "Write a letter to a friend about a trip to the sea.",
           "Explain why the sky is blue.",
           "Describe your favourite meal and how to cook it.",
           "Tell me about the history of the printing press.",
           "Write a poem about the moon."]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_up(base: str, proc: subprocess.Popen, timeout: float = 600) -> None:
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        if proc.poll() is not None:
            proc.log.seek(0)  # type: ignore[attr-defined]
            raise RuntimeError(f"the server exited: {proc.log.read()[-2000:]}")  # type: ignore[attr-defined]
        try:
            if httpx.get(base + "/health", timeout=2).status_code == 200 or \
                    httpx.get(base + "/v1/models", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise TimeoutError("the server did not come up")


def start(kind: str, model_path: str, llama_python: str) -> tuple[str, str, subprocess.Popen]:
    """(base url, model name, process) of a server of ``kind``."""
    port = _free_port()
    if kind == "braze":
        cmd = [sys.executable, os.path.join(HERE, "..", "examples", "llm", "server.py"),
               "--port", str(port), "--max-batch", "16", "--log-level", "warning"]
        name = os.path.basename(model_path).split(".")[0]
    else:
        cmd = [llama_python, "-m", "llama_cpp.server", "--model", model_path,
               "--n_threads", "2", "--n_ctx", "2048", "--port", str(port), "--host", "127.0.0.1",
               # (by default a new request interrupts the running one: most would fail)
               "--interrupt_requests", "False"]
        name = model_path
    # (its log to a file: llama.cpp's is verbose, and a full pipe would block the server)
    log = tempfile.TemporaryFile("w+")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, text=True)
    proc.log = log  # type: ignore[attr-defined]
    base = f"http://127.0.0.1:{port}"
    _wait_up(base, proc)
    return base, name, proc


class _SSE(asyncio.Protocol):
    """One streamed response, read by an asyncio protocol (each chunk parsed by httptools
    as it arrives: no stream reader, no task wake-up per chunk): a timestamp per content
    chunk and the usage chunk (cheap byte tests: no JSON parsing per chunk)."""

    def __init__(self, request: bytes) -> None:
        self.request = request
        self.parser = httptools.HttpResponseParser(self)
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.times: list[float] = []
        self.usage: dict[str, Any] | None = None
        self.pending = b""
        self.status = 0

    def connection_made(self, transport: Any) -> None:
        transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
            self.status = self.parser.get_status_code()
        except httptools.HttpParserError as e:
            self._end(e)

    def connection_lost(self, exc: Exception | None) -> None:
        self._end(exc)

    def _end(self, exc: BaseException | None = None) -> None:
        if not self.done.done():
            if exc is None:
                self.done.set_result(None)
            else:
                self.done.set_exception(exc)

    def on_body(self, data: bytes) -> None:
        now = time.perf_counter()
        *lines, self.pending = (self.pending + data).split(b"\n")
        for line in lines:
            if not line.startswith(b"data: {"):
                continue
            if b'"usage": {' in line or b'"usage":{' in line:
                self.usage = json.loads(line[6:])["usage"]
            elif b'"content": ""' not in line and b'"content":""' not in line and \
                    b'"content":' in line:
                self.times.append(now)

    def on_message_complete(self) -> None:
        self._end()


async def one_request(base: str, model: str, prompt: str, max_tokens: int
                      ) -> dict[str, Any]:
    """Stream one chat completion: token count, time to first token, inter-token gaps.

    HTTP/1.1 parsed by httptools (C) in an asyncio protocol, every stream of a level on one
    thread: the load generator shares the server's 2 cores, and a thread per stream
    parsing with httpx took ~13 % of them at 16 streams (real clients run elsewhere);
    h11's pure-Python parser ~5 %."""
    host, port = base.removeprefix("http://").rsplit(":", 1)
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": prompt}],
                       "max_tokens": max_tokens, "temperature": 0, "stream": True,
                       "stream_options": {"include_usage": True}}).encode()
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n").encode()
    stream = _SSE(head + body)
    t0 = time.perf_counter()
    transport, _ = await asyncio.get_running_loop().create_connection(lambda: stream, host,
                                                                      int(port))
    try:
        await stream.done
    finally:
        transport.close()
    if stream.status != 200:
        return {"ok": False, "error": f"HTTP {stream.status}"}
    times, usage = stream.times, stream.usage
    if not times:
        return {"ok": False, "error": "no tokens"}
    n = usage["completion_tokens"] if usage else len(times)
    gaps = [b - a for a, b in zip(times, times[1:])]
    return {"ok": True, "tokens": n, "ttft": times[0] - t0, "gaps": gaps}


def _lower_priority() -> None:
    """This client thread at nice 10: the load generator shares the servers' 2 cores, and
    its thread waking up in the middle of a server's parallel kernels would stall them
    (real clients run elsewhere). Linux threads have their own nice values."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        pass


async def _request_or_failure(base: str, model: str, prompt: str, max_tokens: int
                              ) -> dict[str, Any]:
    try:
        return await one_request(base, model, prompt, max_tokens)
    except Exception as e:  # counted as failed
        return {"ok": False, "error": repr(e)}


def _run_clients(streams: int, client: Callable[[int], Awaitable[None]]) -> float:
    """Wall seconds of ``streams`` coroutines ``client(i)`` at once, on one event loop in a
    thread of lowered priority."""
    wall: list[float] = []

    async def all_clients() -> None:
        t0 = time.perf_counter()
        await asyncio.gather(*(client(i) for i in range(streams)))
        wall.append(time.perf_counter() - t0)

    def thread() -> None:
        _lower_priority()
        asyncio.run(all_clients())

    t = threading.Thread(target=thread)
    t.start()
    t.join()
    return wall[0]


def run_level(base: str, model: str, streams: int, requests: int, max_tokens: int
              ) -> dict[str, Any]:
    results: list[dict[str, Any]] = []

    async def client(i: int) -> None:
        for j in range(requests):
            results.append(await _request_or_failure(base, model, PROMPTS[(i + j) % len(PROMPTS)],
                                                     max_tokens))

    wall = _run_clients(streams, client)
    ok = [r for r in results if r["ok"]]
    gaps = sorted(g for r in ok for g in r["gaps"])
    ttft = sorted(r["ttft"] for r in ok)

    def pct(xs: list[float], p: float) -> float:
        return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else float("nan")

    return {"streams": streams, "tok_s": sum(r["tokens"] for r in ok) / wall,
            "ttft50": pct(ttft, 0.5), "ttft99": pct(ttft, 0.99), "itl50": pct(gaps, 0.5),
            "itl99": pct(gaps, 0.99), "failed": len(results) - len(ok), "requests": len(results)}


def soak(base: str, model: str, streams: int, seconds: float, max_tokens: int
         ) -> dict[str, Any]:
    """``streams`` clients sending requests back to back for ``seconds``."""
    stop = time.perf_counter() + seconds
    counts = {"ok": 0, "failed": 0, "tokens": 0}
    errors: list[str] = []

    async def client(i: int) -> None:
        j = 0
        while time.perf_counter() < stop:
            r = await _request_or_failure(base, model, PROMPTS[(i + j) % len(PROMPTS)],
                                          max_tokens)
            j += 1
            counts["ok" if r["ok"] else "failed"] += 1
            counts["tokens"] += r.get("tokens", 0)
            if not r["ok"]:
                errors.append(r["error"])

    wall = _run_clients(streams, client)
    return {**counts, "seconds": wall, "tok_s": counts["tokens"] / wall, "errors": errors[:5]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", default="1,4,16")
    ap.add_argument("--requests", type=int, default=2, help="requests per stream per level")
    ap.add_argument("--rounds", type=int, default=1,
                    help="braze: the levels measured this many times, interleaved (medians)")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--duration", type=float, default=0.0, help="soak seconds (0: none)")
    ap.add_argument("--only", default="braze,llama.cpp")
    ap.add_argument("--llama-python", default=os.environ.get("LLAMA_CPP_PYTHON", sys.executable))
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error(f"--rounds must be at least 1, got {args.rounds}")
    import llama

    model_path = llama.default_model_path()
    levels = [int(x) for x in args.streams.split(",")]
    kinds = [k for k in args.only.split(",") if k in ("braze", "llama.cpp")]
    if "llama.cpp" in kinds and subprocess.run(
            [args.llama_python, "-c", "import llama_cpp.server"], capture_output=True
    ).returncode != 0:
        print(f"(llama.cpp: {args.llama_python} cannot import llama_cpp.server: skipped)")
        kinds.remove("llama.cpp")
    print(f"serving {os.path.basename(model_path)}, {os.cpu_count()} cpus, braze on {isa()}; "
          f"max_tokens {args.max_tokens}, {args.requests} requests per stream, temperature 0")
    table: dict[str, dict[int, dict[str, Any]]] = {}
    ratios: list[float] = []  # braze's highest level / lowest, per round
    for kind in kinds:
        base, name, proc = start(kind, model_path, args.llama_python)
        try:
            for n in levels:
                run_level(base, name, n, 1, 8)  # warm-up (compiled steps, caches)
            runs: dict[int, list[dict[str, Any]]] = {n: [] for n in levels}
            # the levels interleaved, round after round: this host's speed drifts within
            # minutes, and a level measured once is at its mercy
            for _ in range(args.rounds if kind == "braze" else 1):
                for n in levels:
                    h0 = httpx.get(base + "/health").json() if kind == "braze" else {}
                    r = run_level(base, name, n, args.requests, args.max_tokens)
                    if kind == "braze":  # where the engine's time went in this level
                        h = httpx.get(base + "/health").json()
                        r["engine"] = {k: round(h[k] - h0[k], 3) for k in (
                            "steps", "batch_rows", "prefill_seconds", "decode_seconds")}
                    runs[n].append(r)
                    print(f"{kind:10s} {n:3d} streams: {r['tok_s']:7.1f} tok/s  TTFT p50 "
                          f"{r['ttft50'] * 1e3:7.0f} ms p99 {r['ttft99'] * 1e3:7.0f} ms  ITL p50 "
                          f"{r['itl50'] * 1e3:6.1f} ms p99 {r['itl99'] * 1e3:6.1f} ms  failed "
                          f"{r['failed']}/{r['requests']}", r.get("engine", ""), flush=True)
                if kind == "braze" and len(levels) > 1:
                    ratios.append(runs[max(levels)][-1]["tok_s"] / runs[min(levels)][-1]["tok_s"])
            # per level: the run of median throughput
            table[kind] = {n: sorted(rs, key=lambda r: r["tok_s"])[len(rs) // 2]
                           for n, rs in runs.items()}
            if args.duration:
                s = soak(base, name, max(levels), args.duration, args.max_tokens)
                print(f"{kind:10s} soak {max(levels)} streams {s['seconds']:.0f} s: {s['ok']} "
                      f"requests ok, {s['failed']} failed, {s['tok_s']:.1f} tok/s "
                      f"{s['errors'] or ''}", flush=True)
        finally:
            proc.terminate()
            proc.wait(60)
    if "braze" in table:
        b = table["braze"]
        lo, hi = min(levels), max(levels)
        if hi != lo:
            print(f"braze {hi} streams / {lo} stream: {b[hi]['tok_s'] / b[lo]['tok_s']:.2f}x "
                  f"(medians); per round: {', '.join(f'{r:.2f}x' for r in ratios)}, median "
                  f"{statistics.median(ratios):.2f}x")
        if "llama.cpp" in table:
            for n in levels:
                print(f"braze / llama.cpp at {n} streams: "
                      f"{b[n]['tok_s'] / table['llama.cpp'][n]['tok_s']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
