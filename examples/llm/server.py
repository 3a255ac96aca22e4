"""An OpenAI-compatible HTTP server for the LLM example, with continuous batching.

    python examples/llm/server.py [--model PATH] [--host 127.0.0.1] [--port 8000]

Endpoints (OpenAI's API, so any client library, editor plugin or agent framework
works): ``POST /v1/chat/completions`` (the model's chat template; ``stream`` as
server-sent events in OpenAI's chunk format ending with ``data: [DONE]``;
``max_tokens`` / ``max_completion_tokens``, ``temperature``, ``top_p``, ``seed``,
``stop``, ``stream_options.include_usage``), ``POST /v1/completions``, ``GET
/v1/models``, ``GET /health`` (503 while the model loads, then 200 with the
engine's running/waiting counts). Errors are OpenAI's error JSON: 400 for a
malformed body, a field of the wrong type or range, a prompt longer than the
context; 404 for an unknown model; 429 when the queue is full; 503 while loading.

Requests share one :class:`batching.Engine` (continuous batching over a slot cache);
the HTTP side is FastAPI on uvicorn; a stream is a Starlette streaming response of
server-sent events (Starlette listens for the client's disconnect and stops it).

Safe defaults for a server others may reach: it listens on 127.0.0.1 unless ``--host``
says otherwise (a non-loopback address gets a warning); ``--api-key`` (or
``$BRAZE_API_KEY``) makes every request but ``/health`` (the API, and FastAPI's own
``/docs``) present ``Authorization: Bearer KEY`` (401 otherwise); request bodies are limited
(``--max-body-bytes``: 413), as are prompt tokens and ``max_tokens`` (400), concurrent
connections (``--max-connections``: 429 for the one over) and idle keep-alive time; a
client must send its whole request within ``--request-timeout`` seconds, so one that
trickles it (slow loris) is dropped without delaying the others. No request field
names a file on the server. Example::

    curl http://127.0.0.1:8000/v1/chat/completions -H 'Content-Type: application/json' \\
      -d '{"model": "SmolLM2-135M-Instruct", "messages": [{"role": "user", "content": "Hi"}]}'
"""

from __future__ import annotations

import argparse
import asyncio
import hmac
import json
import logging
import os
import sys
import threading
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

# OpenMP's workers keep spinning between the kernels of a batched decode step (GOMP's own
# default, which braze lowers to 10000 for programs that mix numpy's BLAS in): at 16
# sequences a step's small parallel kernels otherwise wait for a sleeping worker to wake
# (~0.05 ms each; the step ran ~10 % slower). Set before braze is imported.
os.environ.setdefault("GOMP_SPINCOUNT", "300000")

import braze  # noqa: E402, F401  (before numpy: braze tunes OpenBLAS's thread pool)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import batching  # noqa: E402
import llama  # noqa: E402
from fastapi import FastAPI, Request  # noqa: E402
from fastapi.exceptions import RequestValidationError  # noqa: E402
from fastapi.responses import JSONResponse, StreamingResponse  # noqa: E402
from pydantic import BaseModel, ConfigDict, Field  # noqa: E402
from starlette.exceptions import HTTPException as StarletteHTTPException  # noqa: E402

log = logging.getLogger("braze.serve")
MAX_STOP = 4  # stop strings per request (OpenAI's limit)


# ---------------------------------------------------------------- request bodies
class StreamOptions(BaseModel):
    include_usage: bool = False


class _Body(BaseModel):
    # unknown fields (other clients' extensions) are ignored; known ones are type-checked
    model_config = ConfigDict(extra="ignore", strict=False)

    model: str
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    temperature: float = Field(default=1.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    seed: int | None = None
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = Field(default=1, ge=1, le=1)


class TextPart(BaseModel):
    type: Literal["text"]
    text: str


class Message(BaseModel):
    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[TextPart]

    def as_template(self) -> dict[str, str]:
        """(role, text) for the chat template ("developer" is OpenAI's newer "system")."""
        text = self.content if isinstance(self.content, str) else \
            "".join(p.text for p in self.content)
        return {"role": "system" if self.role == "developer" else self.role, "content": text}


class ChatBody(_Body):
    messages: list[Message] = Field(min_length=1)


class CompletionBody(_Body):
    prompt: str | list[str]


class APIError(Exception):
    """An error reply in OpenAI's format."""

    def __init__(self, status: int, message: str, type_: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = \
            status, message, type_, param, code

    def response(self) -> JSONResponse:
        return JSONResponse(status_code=self.status, content={"error": {
            "message": self.message, "type": self.type, "param": self.param,
            "code": self.code}})


# ---------------------------------------------------------------- the application
class Served:
    """The loaded model behind the app: engine, tokenizer, chat template, name."""

    def __init__(self, engine: batching.Engine, name: str,
                 render: Callable[[list[dict[str, str]]], str]) -> None:
        self.engine, self.name, self.render = engine, name, render
        self.tok = engine.tok


def serve_model(model_path: str | None, max_batch: int, context: int, queue_limit: int,
                ready: Callable[[Served], None], warm_prefill: int = 0) -> None:
    """Load the model (default: SmolLM2-135M-Instruct), hand it to ``ready``, then run
    the engine's loop on this thread until it is stopped (every model call on one
    thread: see :meth:`batching.Engine.run`)."""
    path = model_path or llama.default_model_path()
    model, tok = llama.load(path)
    meta = braze.load(path, return_metadata=True)[1]
    name = os.path.basename(path).split(".")[0]
    engine = batching.Engine(model, tok, max_batch=max_batch, context=context,
                             queue_limit=queue_limit, warm_prefill=warm_prefill)
    ready(Served(engine, name, batching.chat_template(meta.get("tokenizer.chat_template"))))
    engine.run()


@dataclass(frozen=True)
class Limits:
    """What one request may ask of the server (see the module docstring)."""

    api_key: str | None = None
    max_body_bytes: int = 1 << 20
    max_prompt_tokens: int | None = None  # None: the context less one
    max_tokens: int | None = None  # None: the context


def _error_body(status: int, message: str, type_: str, code: str | None) -> bytes:
    return json.dumps({"error": {"message": message, "type": type_, "param": None,
                                 "code": code}}).encode()


class _Guard:
    """Pure ASGI middleware: the API key and the body size, checked before FastAPI reads
    the body (a refused request is never parsed)."""

    def __init__(self, app: Any, limits: Limits) -> None:
        self.app, self.limits = app, limits
        self.key = ("Bearer " + limits.api_key).encode() if limits.api_key else None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        if self.key is not None and scope["path"] != "/health" and not \
                hmac.compare_digest(headers.get(b"authorization", b""), self.key):
            return await _reply(send, 401, "Incorrect API key provided (send it as "
                                "'Authorization: Bearer KEY').", "invalid_request_error",
                                "invalid_api_key")
        limit = self.limits.max_body_bytes
        try:
            declared = int(headers.get(b"content-length", b"0"))
        except ValueError:
            return await _reply(send, 400, "malformed Content-Length", "invalid_request_error",
                                None)
        if declared > limit:
            return await _reply(send, 413, f"the request body is {declared} bytes; this "
                                f"server accepts at most {limit}", "invalid_request_error",
                                "request_too_large")
        seen = 0
        refused = False

        async def counted() -> Any:  # a chunked body: counted as it arrives
            nonlocal seen, refused
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:  # the app sees the client leave; the reply is ours
                    refused = True
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Any) -> None:
            if not refused:
                await send(message)

        try:
            await self.app(scope, counted, guarded_send)
        except Exception:
            if not refused:
                raise
        if refused:
            await _reply(send, 413, f"the request body is over {limit} bytes",
                         "invalid_request_error", "request_too_large")


async def _reply(send: Any, status: int, message: str, type_: str, code: str | None) -> None:
    body = _error_body(status, message, type_, code)
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def guarded_protocol(request_timeout: float, max_connections: int) -> type:
    """uvicorn's httptools protocol (a C parser: at 16 streams the event loop formats and
    writes a chunk per stream per decode step, on the cores the step's kernels need; h11's
    pure-Python state machine took ~20 % more of the loop's time) with two
    connection-level guards uvicorn lacks: a whole request (head and body) must arrive
    within ``request_timeout`` seconds of the connection (or of the previous response),
    else the connection is closed -- a slow loris holds nothing for long, and asyncio
    serves the others meanwhile; and past ``max_connections`` open connections a new one
    is answered 429 and closed. Streamed responses are not limited: the deadline is off
    once the request is in."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    too_many = _error_body(429, f"too many connections (at most {max_connections})",
                           "rate_limit_exceeded", "too_many_connections")

    class GuardedHttpToolsProtocol(HttpToolsProtocol):
        # whole requests received and responses completed on this connection: equal while
        # the client owes the server a request (pipelined ones counted as they arrive)
        _received = _answered = 0
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                transport.write(b"HTTP/1.1 429 Too Many Requests\r\ncontent-type: "
                                b"application/json\r\nconnection: close\r\ncontent-length: "
                                + str(len(too_many)).encode() + b"\r\n\r\n" + too_many)
                transport.close()
                return
            self._arm()

        def _arm(self) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(request_timeout, self._expired)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expired(self) -> None:
            self._deadline = None
            if not self.transport.is_closing() and self._received == self._answered:
                who = f"{self.client[0]}:{self.client[1]}" if self.client else "a client"
                log.warning("dropped %s: no whole request within %.0f s", who, request_timeout)
                self.transport.close()

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._received += 1
            self._disarm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._answered += 1
            if self._received == self._answered and not self.transport.is_closing():
                self._arm()  # the next request on this connection: the same deadline

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return GuardedHttpToolsProtocol


def host_warning(host: str) -> str | None:
    """The warning for listening on ``host``, or None for this machine only.

    >>> host_warning("127.0.0.1") is None and host_warning("localhost") is None
    True
    >>> "other machines" in host_warning("0.0.0.0")
    True
    """
    import ipaddress

    try:
        local = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name: it may resolve anywhere
        local = False
    if local:
        return None
    return (f"listening on {host}: the server is reachable from other machines; pass "
            "--api-key (or set BRAZE_API_KEY) unless the network is trusted")


def create_app(loader: Callable[[Callable[[Served], None]], None],
               limits: Limits | None = None) -> FastAPI:
    """The FastAPI app. ``loader(ready)`` runs on a background thread from startup: it
    loads the model, calls ``ready(served)`` (``/health`` answers 503 until then), and
    may go on running the engine there until shutdown stops it. ``limits``: the API key
    and per-request limits (default :class:`Limits`)."""
    limits = limits or Limits()
    state: dict[str, Any] = {"served": None, "error": None}

    def ready(served: Served) -> None:
        state["served"] = served
        log.info("model loaded: %s", served.name)

    def load() -> None:
        try:
            loader(ready)
        except Exception as e:  # reported by /health and every request
            log.exception("loading or serving the model failed")
            state["error"] = f"{type(e).__name__}: {e}"

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        thread = threading.Thread(target=load, name="braze-engine", daemon=True)
        thread.start()
        yield
        served = state["served"]
        if served is not None:
            await asyncio.to_thread(served.engine.stop)
            await asyncio.to_thread(thread.join, 30)

    app = FastAPI(title="braze", lifespan=lifespan)
    app.add_middleware(_Guard, limits=limits)

    @app.exception_handler(APIError)
    async def api_error(_: Request, e: APIError) -> JSONResponse:
        return e.response()

    @app.exception_handler(RequestValidationError)
    async def bad_body(_: Request, e: RequestValidationError) -> JSONResponse:
        errs = e.errors()
        first = errs[0] if errs else {}
        where = ".".join(str(p) for p in first.get("loc", ())[1:]) or None
        msg = "; ".join(f"{'.'.join(str(p) for p in x.get('loc', ())[1:]) or 'body'}: "
                        f"{x.get('msg')}" for x in errs) or "malformed request body"
        return APIError(400, msg, param=where).response()

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, e: StarletteHTTPException) -> JSONResponse:
        return APIError(e.status_code, str(e.detail),
                        "not_found_error" if e.status_code == 404 else "invalid_request_error"
                        ).response()

    def served_or_503() -> Served:
        if state["error"] is not None:
            raise APIError(503, f"the model failed to load: {state['error']}", "server_error")
        served = state["served"]
        if served is None:
            raise APIError(503, "the model is loading", "server_error", code="model_loading")
        return served

    @app.get("/health")
    async def health() -> JSONResponse:
        try:
            served = served_or_503()
        except APIError as e:
            return JSONResponse(status_code=503, content={"status": "loading" if state[
                "error"] is None else "error", "error": e.message})
        return JSONResponse({"status": "ok", **served.engine.stats()})

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        served = served_or_503()
        return {"object": "list", "data": [{"id": served.name, "object": "model",
                                            "created": int(time.time()), "owned_by": "braze"}]}

    @app.post("/v1/chat/completions")
    async def chat(body: ChatBody, request: Request) -> Any:
        served = served_or_503()
        _check_model(served, body)
        text = served.render([m.as_template() for m in body.messages])
        return await _generate(served, body, served.tok.encode(text).ids, request, limits,
                               chat=True)

    @app.post("/v1/completions")
    async def completions(body: CompletionBody, request: Request) -> Any:
        served = served_or_503()
        _check_model(served, body)
        prompt = body.prompt
        if isinstance(prompt, list):
            if len(prompt) != 1:
                raise APIError(400, "prompt: one prompt per request is supported",
                               param="prompt")
            prompt = prompt[0]
        return await _generate(served, body, served.tok.encode(prompt).ids, request, limits,
                               chat=False)

    return app


def _check_model(served: Served, body: _Body) -> None:
    if body.model != served.name:
        raise APIError(404, f"The model '{body.model}' does not exist (this server has "
                            f"'{served.name}')", param="model", code="model_not_found")


async def _generate(served: Served, body: _Body, ids: list[int], request: Request,
                    limits: Limits, chat: bool) -> Any:
    """Queue the request on the engine; a JSON reply or a server-sent event stream."""
    engine = served.engine
    context = engine.context
    if not ids:
        raise APIError(400, "the prompt is empty", param="prompt")
    if len(ids) >= context:
        raise APIError(400, f"This model's maximum context length is {context} tokens. "
                            f"However, your prompt has {len(ids)} tokens.",
                       param="messages" if chat else "prompt", code="context_length_exceeded")
    if limits.max_prompt_tokens is not None and len(ids) > limits.max_prompt_tokens:
        raise APIError(400, f"the prompt has {len(ids)} tokens; this server accepts at most "
                            f"{limits.max_prompt_tokens}", param="messages" if chat else
                       "prompt", code="context_length_exceeded")
    room = context - len(ids)
    max_tokens = body.max_completion_tokens or body.max_tokens
    cap = min(context, limits.max_tokens or context)
    if max_tokens is not None and max_tokens > cap:
        raise APIError(400, f"max_tokens is too large: {max_tokens}. This server generates "
                            f"at most {cap} tokens per request"
                            + (f" (the model supports {context} of prompt and completion)."
                               if cap < context else "."), param="max_tokens")
    room = min(room, cap)
    max_tokens = min(max_tokens or room, room)
    stop = [body.stop] if isinstance(body.stop, str) else list(body.stop or [])
    if len(stop) > MAX_STOP or any(not s for s in stop):
        raise APIError(400, f"stop: at most {MAX_STOP} non-empty strings", param="stop")
    queue: asyncio.Queue[batching.Event] = asyncio.Queue()
    mailbox = _mailbox(asyncio.get_running_loop())

    def emit(ev: batching.Event) -> None:  # (the engine's thread)
        mailbox.post(queue, ev)

    req = batching.Request(ids, max_tokens, body.temperature, body.top_p, body.seed, stop,
                           emit)
    try:
        engine.submit(req)
    except batching.QueueFull as e:
        raise APIError(429, f"the server is busy: {e}; retry later", "rate_limit_exceeded",
                       code="rate_limit_exceeded") from None
    except (ValueError, RuntimeError) as e:
        raise APIError(400, str(e)) from None
    rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]
    created = int(time.time())
    if body.stream:
        usage = body.stream_options is not None and body.stream_options.include_usage
        return StreamingResponse(_stream(served, req, queue, rid, created, chat, usage),
                                 media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    parts: list[str] = []
    try:
        while True:
            ev = await queue.get()
            if ev.kind == "text":
                parts.append(ev.text)
            elif ev.kind == "error":
                raise APIError(500, ev.message, "server_error")
            else:
                break
    finally:
        req.cancel()  # (a no-op once done; frees the slot if the client left)
    text = "".join(parts)
    choice: dict[str, Any] = {"index": 0, "finish_reason": ev.finish_reason, "logprobs": None}
    if chat:
        choice["message"] = {"role": "assistant", "content": text}
    else:
        choice["text"] = text
    return {"id": rid, "object": "chat.completion" if chat else "text_completion",
            "created": created, "model": served.name, "choices": [choice], "usage": ev.usage}


class _Mailbox:
    """Events from the engine's thread to the event loop's queues, one wake-up of the
    loop for all the events posted before it runs (a decode step's tokens of every
    stream), not one per token: each wake-up is a pipe write and a loop iteration on
    cores that the next step's kernels need."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.items: list[tuple[asyncio.Queue[batching.Event], batching.Event]] = []
        self.lock = threading.Lock()
        self.scheduled = False

    def post(self, queue: asyncio.Queue[batching.Event], ev: batching.Event) -> None:
        with self.lock:
            self.items.append((queue, ev))
            if self.scheduled:
                return
            self.scheduled = True
        try:
            self.loop.call_soon_threadsafe(self._drain)
        except RuntimeError:  # the loop has closed (shutting down): nobody is listening
            pass

    def _drain(self) -> None:
        with self.lock:
            items, self.items, self.scheduled = self.items, [], False
        for queue, ev in items:
            queue.put_nowait(ev)


_MAILBOXES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Mailbox] = \
    weakref.WeakKeyDictionary()


def _mailbox(loop: asyncio.AbstractEventLoop) -> _Mailbox:
    """The mailbox of ``loop`` (one per event loop)."""
    box = _MAILBOXES.get(loop)
    if box is None:
        box = _MAILBOXES[loop] = _Mailbox(loop)
    return box


async def _stream(served: Served, req: batching.Request, queue: asyncio.Queue[batching.Event],
                  rid: str, created: int, chat: bool, include_usage: bool
                  ) -> AsyncIterator[bytes]:
    """OpenAI's chunks as server-sent events (``data: {json}`` lines); a client that
    disconnects cancels the request (the response stops iterating: ``finally`` frees the
    sequence). A chunk's JSON is its request's constant head and tail around the JSON of
    the new text: at 16 streams the event loop formats 16 chunks per decode step on cores
    the step's kernels need."""
    obj = "chat.completion.chunk" if chat else "text_completion"

    def chunk(delta: str | None, finish: str | None, role: bool = False) -> bytes:
        choice: dict[str, Any] = {"index": 0, "finish_reason": finish, "logprobs": None}
        if chat:
            d: dict[str, str] = {"role": "assistant"} if role else {}
            if delta is not None:
                d["content"] = delta
            choice["delta"] = d
        else:
            choice["text"] = delta or ""
        out: dict[str, Any] = {"id": rid, "object": obj, "created": created,
                               "model": served.name, "choices": [choice]}
        if include_usage:
            out["usage"] = None
        return b"data: " + json.dumps(out).encode() + b"\n\n"

    # the text chunk with a placeholder string, split around it (rendered once)
    head, tail = chunk("\x00", None).split(json.dumps("\x00").encode())

    try:
        if chat:
            yield chunk("", None, role=True)
        while True:
            ev = await queue.get()
            if ev.kind == "text":
                yield head + json.dumps(ev.text).encode() + tail
            elif ev.kind == "error":
                yield b"data: " + json.dumps({"error": {"message": ev.message,
                                                        "type": "server_error"}}).encode() + \
                    b"\n\n"
                break
            else:
                yield chunk(None if chat else "", ev.finish_reason)
                if include_usage:
                    yield b"data: " + json.dumps({
                        "id": rid, "object": obj, "created": created, "model": served.name,
                        "choices": [], "usage": ev.usage}).encode() + b"\n\n"
                break
        yield b"data: [DONE]\n\n"
    finally:
        req.cancel()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="a Llama-architecture .gguf (default: SmolLM2-135M-Instruct)")
    ap.add_argument("--host", default="127.0.0.1",
                    help="address to listen on (default 127.0.0.1: this machine only)")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--max-batch", type=int, default=16, help="sequences decoded together")
    ap.add_argument("--context", type=int, default=2048, help="positions per sequence")
    ap.add_argument("--queue-limit", type=int, default=64,
                    help="requests waiting for a slot before 429")
    ap.add_argument("--warm-prefill", type=int, default=32, metavar="TOKENS",
                    help="at start, trace the batched pre-fill of prompts up to TOKENS long "
                         "(after the system prompt) for every batch size (0: none)")
    ap.add_argument("--api-key", default=os.environ.get("BRAZE_API_KEY"),
                    help="require 'Authorization: Bearer KEY' on all but /health (default "
                         "$BRAZE_API_KEY)")
    ap.add_argument("--max-body-bytes", type=int, default=1 << 20)
    ap.add_argument("--max-prompt-tokens", type=int, default=None,
                    help="default: the context less one")
    ap.add_argument("--max-tokens", type=int, default=None,
                    help="the most a request may generate (default: the context)")
    ap.add_argument("--max-connections", type=int, default=64)
    ap.add_argument("--request-timeout", type=float, default=30.0,
                    help="seconds a client has to send a whole request")
    ap.add_argument("--idle-timeout", type=float, default=5.0,
                    help="seconds an idle keep-alive connection is kept")
    ap.add_argument("--log-level", default="info")
    args = ap.parse_args(argv)
    if args.max_batch < 1 or args.queue_limit < 0 or args.context < 16 or args.warm_prefill < 0:
        ap.error("--max-batch >= 1, --queue-limit >= 0, --warm-prefill >= 0 and --context >= 16 "
                 "please")
    if min(args.max_body_bytes, args.max_connections, args.max_prompt_tokens or 1,
           args.max_tokens or 1) < 1 or min(args.request_timeout, args.idle_timeout) <= 0:
        ap.error("the limits must be positive")
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    if (why := host_warning(args.host)) is not None:
        log.warning(why)
    import uvicorn

    limits = Limits(args.api_key or None, args.max_body_bytes, args.max_prompt_tokens,
                    args.max_tokens)
    app = create_app(lambda ready: serve_model(args.model, args.max_batch, args.context,
                                               args.queue_limit, ready, args.warm_prefill),
                     limits)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level,
                http=guarded_protocol(args.request_timeout, args.max_connections),
                timeout_keep_alive=int(max(1, args.idle_timeout)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
