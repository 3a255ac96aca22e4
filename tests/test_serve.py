"""The LLM example's OpenAI-compatible server (examples/llm/server.py) and its engine.

* The engine (examples/llm/batching.py), in process: greedy output token-for-token the
  same alone and batched, stop strings, cancellation, a failing request among good
  ones, the queue limit.
* The server, started as a subprocess on a free local port and driven with the real
  ``openai`` client (and httpx for what a client library would not send): chat and
  completions, streaming and not, usage counts, 8 concurrent streams, a client that
  disconnects mid-stream, every bad request with its status and message, a clean
  shutdown on SIGINT.
* The app in process (FastAPI's TestClient): 503 while the model loads, 429 when full.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import braze as bz

pytest.importorskip("fastapi")
openai = pytest.importorskip("openai")
try:  # the openai client's HTTP library (httpx2 in its recent releases, httpx before)
    import httpx2 as httpx
except ImportError:  # pragma: no cover
    httpx = pytest.importorskip("httpx")
HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "examples", "llm"))
import batching  # noqa: E402
import llama  # noqa: E402

try:
    llama.default_model_path()
except FileNotFoundError as e:  # pragma: no cover - `make test` installs it
    pytest.skip(str(e), allow_module_level=True)

MODEL = "SmolLM2-135M-Instruct"
QUESTIONS = ["What is the capital of France?", "Write a haiku about the sea.",
             "What is 2+2?", "Name three colors.", "Who wrote Hamlet?",
             "What is the boiling point of water?", "Say hello in Spanish.",
             "What is the largest planet?"]


@pytest.fixture(scope="module", autouse=True)
def _cpu_only(backend_name):
    if backend_name != "cpu" and "cpu" in bz.backends.available():
        pytest.skip("the server tests run once, on the default (cpu) backend")


# ---------------------------------------------------------------- the engine
@pytest.fixture(scope="module")
def model_tok():
    return llama.load()


def _run(engine: batching.Engine, reqs: list[batching.Request], events: list[list],
         timeout: float = 120.0) -> None:
    for r in reqs:
        engine.submit(r)
    t0 = time.perf_counter()
    while not all(any(e.kind != "text" for e in ev) for ev in events):
        assert time.perf_counter() - t0 < timeout, "the engine did not finish"
        time.sleep(0.005)


def _request(tok, text: str, max_tokens: int = 24, stop=(), temperature=0.0, seed=None):
    events: list = []
    return batching.Request(tok.encode(llama.chat_prompt(text)).ids, max_tokens, temperature,
                            1.0, seed, list(stop), events.append), events


def _text(events: list) -> str:
    return "".join(e.text for e in events if e.kind == "text")


def test_greedy_output_is_the_same_alone_and_batched(model_tok) -> None:
    """Each prompt alone, then all of them in one batch, then a batch that changes while
    they run (requests joining and leaving between steps): token-for-token the same."""
    model, tok = model_tok
    engine = batching.Engine(model, tok, max_batch=4, context=512)
    engine.start()
    try:
        alone = []
        for q in QUESTIONS[:4]:
            r, ev = _request(tok, q)
            _run(engine, [r], [ev])
            alone.append((_text(ev), ev[-1].usage))
        pairs = [_request(tok, q) for q in QUESTIONS[:4]]
        _run(engine, [r for r, _ in pairs], [ev for _, ev in pairs])
        assert [(_text(ev), ev[-1].usage) for _, ev in pairs] == alone
        # staggered: lengths differ, so the batch shrinks and grows between steps
        pairs = [_request(tok, q, max_tokens=m) for q, m in zip(QUESTIONS[:4], (24, 5, 17, 9))]
        _run(engine, [pairs[0][0], pairs[1][0]], [pairs[0][1], pairs[1][1]])
        _run(engine, [pairs[2][0], pairs[3][0]], [pairs[2][1], pairs[3][1]])
        for (_, ev), (want, _), m in zip(pairs, alone, (24, 5, 17, 9)):
            got = _text(ev)
            assert want.startswith(got) and ev[-1].usage["completion_tokens"] <= m
        assert engine.steps and engine.batch_rows > engine.steps  # really batched
    finally:
        engine.stop()
    assert "Paris" in alone[0][0]


def test_admitted_requests_prefill_in_the_calls_of_fewest_rows(model_tok, monkeypatch) -> None:
    """5 short requests admitted at once pre-fill as calls of 4 and 1 prompts (a call of
    n prompts pads to batch_bucket(n) prompts: 5 in one call would run 8 x 8 rows, 4 + 1
    run 32 + 16); 7 chat prompts of 34-38 tokens as one call (8 x 40 padded rows, above
    llama.PACK_FROM: their 253 rows packed into 256, fewer than 4 + 2 + 1's 288); each
    request's first token the one it gets alone."""
    model, tok = model_tok
    engine = batching.Engine(model, tok, max_batch=8, context=256, prefix="")
    sizes: list[int] = []
    real = model.prefill_batch

    def spy(prompts, slots, cache):
        sizes.append(len(prompts))
        return real(prompts, slots, cache)

    monkeypatch.setattr(model, "prefill_batch", spy)
    alone = batching.Engine(model, tok, max_batch=1, context=256, prefix="")
    short = [(batching.Request(tok.encode("Hi " * (k + 1)).ids, 1, 0.0, 1.0, None, [],
                               ev.append), ev) for k, ev in enumerate([[] for _ in range(5)])]
    chat = [_request(tok, QUESTIONS[i % len(QUESTIONS)], max_tokens=1) for i in range(7)]
    assert sorted(len(r.prompt_ids) for r, _ in chat) == [34, 34, 35, 37, 37, 38, 38]
    for pairs, want in ((short, [4, 1]), (chat, [7])):
        sizes.clear()
        engine._admit([(r, slot) for slot, (r, _) in enumerate(pairs)])
        assert sizes == want
        for r, ev in pairs[-3:]:
            ev2: list = []
            r2 = batching.Request(r.prompt_ids, 1, 0.0, 1.0, None, [], ev2.append)
            alone._admit([(r2, 0)])
            assert _text(ev) == _text(ev2) and ev[-1].kind == ev2[-1].kind == "done"


def test_warm_up_traces_the_prefill_shapes_requests_then_use(model_tok) -> None:
    """warm_prefill=16: warm_up traces the pre-fill of prompts up to 16 tokens for every
    batch bucket; admitting 1 to 3 such prompts then traces nothing, and the first tokens
    are those of an engine that did not warm up; a longer prompt is traced when it comes."""
    model, tok = model_tok
    engine = batching.Engine(model, tok, max_batch=4, context=256, prefix="", warm_prefill=16)
    engine.warm_up()
    traces = model._step_prefill.trace_count
    cold = batching.Engine(model, tok, max_batch=4, context=256, prefix="")
    for n in (1, 2, 3):
        evs: list[list] = [[] for _ in range(n)]
        reqs = [batching.Request(tok.encode("Hi there " * (k + 1)).ids, 1, 0.0, 1.0, None,
                                 [], evs[k].append) for k in range(n)]
        assert all(len(r.prompt_ids) <= 16 for r in reqs)
        engine._admit([(r, slot) for slot, r in enumerate(reqs)])
        assert model._step_prefill.trace_count == traces
        for slot, (r, ev) in enumerate(zip(reqs, evs)):
            ev2: list = []
            cold._admit([(batching.Request(r.prompt_ids, 1, 0.0, 1.0, None, [], ev2.append),
                          slot)])
            assert ev[-1].kind == ev2[-1].kind == "done" and _text(ev) == _text(ev2)
    long = batching.Request(tok.encode("a cat and " * 8).ids, 1, 0.0, 1.0, None, [],
                            lambda e: None)
    assert len(long.prompt_ids) > 16
    engine._admit([(long, 0)])
    assert model._step_prefill.trace_count == traces + 1
    with pytest.raises(ValueError, match="warm_prefill"):
        batching.Engine(model, tok, warm_prefill=-1)


def test_packed_prefill_rows_equal_alone_and_warm_up_traces_them(model_tok) -> None:
    """16 prompts of 3 to 16 tokens (16 x 16 padded rows): their rows run packed
    (llama.packed_rows, filler rows to a multiple of 64); each prompt's logits and cached
    keys/values are the same bits pre-filled alone (padded, one prompt); an engine's
    warm-up traced every packed shape of its buckets, so admitting them traces nothing."""
    model, tok = model_tok
    prompts = [tok.encode("word " * (3 + k % 14)).ids[:3 + k % 14] for k in range(16)]
    assert max(map(len, prompts)) == 16 and llama.packed_rows(256, sum(map(len, prompts))) < 256
    cache = model.make_slot_cache(16, 64)
    packed = model._step_prefill_packed.trace_count
    together = model.prefill_batch(prompts, list(range(16)), cache)
    assert model._step_prefill_packed.trace_count == packed + 1
    keys, values = cache.keys.copy(), cache.values.copy()
    for j in (0, 5, 13, 15):
        cache.slot(j).offset = 0
        np.testing.assert_array_equal(model.prefill_batch([prompts[j]], [j], cache)[0],
                                      together[j])
        np.testing.assert_array_equal(cache.keys[j], keys[j])
        np.testing.assert_array_equal(cache.values[j], values[j])
    engine = batching.Engine(model, tok, max_batch=16, context=64, prefix="", warm_prefill=16)
    engine.warm_up()
    traces = (model._step_prefill.trace_count, model._step_prefill_packed.trace_count)
    evs: list[list] = [[] for _ in prompts]
    engine._admit([(batching.Request(p, 1, 0.0, 1.0, None, [], evs[k].append), k)
                   for k, p in enumerate(prompts[::-1])])
    assert all(ev[-1].kind == "done" for ev in evs)
    engine._admit([(batching.Request(p, 1, 0.0, 1.0, None, [], evs[k].append), k)
                   for k, p in enumerate(prompts[:9])])  # 9 prompts: 16 rows of sequences
    assert (model._step_prefill.trace_count, model._step_prefill_packed.trace_count) == traces


def test_engine_stop_strings_cancel_errors_and_queue_limit(model_tok) -> None:
    model, tok = model_tok
    engine = batching.Engine(model, tok, max_batch=2, context=256, queue_limit=1)
    # not started: submissions fill the free slots and the queue, then QueueFull
    reqs = [_request(tok, q) for q in QUESTIONS[:3]]
    for r, _ in reqs:
        engine.submit(r)
    with pytest.raises(batching.QueueFull, match="queue limit 1"):
        engine.submit(_request(tok, "one too many")[0])
    with pytest.raises(ValueError, match="context is 256 tokens"):
        engine.submit(batching.Request([1] * 300, 5, 0.0, 1.0, None, [], lambda e: None))
    engine.start()
    try:
        _run(engine, [], [ev for _, ev in reqs])
        # a stop string ends the answer before it (held back while it might be one)
        r, ev = _request(tok, QUESTIONS[0], stop=["Paris"])
        _run(engine, [r], [ev])
        assert _text(ev) == "The capital of France is " and ev[-1].finish_reason == "stop"
        # a bad request (a token id past the vocabulary) fails alone; the other finishes
        bad_events: list = []
        bad = batching.Request([model.cfg.vocab + 5], 5, 0.0, 1.0, None, [], bad_events.append)
        good, good_ev = _request(tok, QUESTIONS[2])
        _run(engine, [bad, good], [bad_events, good_ev])
        assert bad_events[-1].kind == "error" and "token ids" in bad_events[-1].message
        assert good_ev[-1].kind == "done" and "4" in _text(good_ev)
        # cancelled mid-answer: its slot is freed, the other request is not disturbed
        long, long_ev = _request(tok, QUESTIONS[1], max_tokens=200)
        other, other_ev = _request(tok, QUESTIONS[3])
        engine.submit(long)
        engine.submit(other)
        t0 = time.perf_counter()
        while len([e for e in long_ev if e.kind == "text"]) < 3:
            assert time.perf_counter() - t0 < 60
            time.sleep(0.002)
        long.cancel()
        _run(engine, [], [other_ev])
        t0 = time.perf_counter()
        while engine.stats()["running"]:
            assert time.perf_counter() - t0 < 30
            time.sleep(0.01)
        assert other_ev[-1].kind == "done" and not any(e.kind != "text" for e in long_ev)
        # a seeded sampled answer is reproducible
        texts = []
        for _ in range(2):
            r, ev = _request(tok, QUESTIONS[1], temperature=0.9, seed=11)
            _run(engine, [r], [ev])
            texts.append(_text(ev))
        assert texts[0] == texts[1]
    finally:
        engine.stop()


def test_chat_template_is_the_models_own(model_tok) -> None:
    """The GGUF's Jinja template (sandboxed) renders ChatML with SmolLM's default system
    turn, the same text as the chat example's prompt."""
    meta = bz.load(llama.default_model_path(), return_metadata=True)[1]
    render = batching.chat_template(meta["tokenizer.chat_template"])
    assert render([{"role": "user", "content": "Hi"}]) == llama.chat_prompt("Hi")
    assert render([{"role": "system", "content": "Be brief."},
                   {"role": "user", "content": "Hi"}]) == llama.chat_prompt("Hi", "Be brief.")
    evil = batching.chat_template("{{ ''.__class__.__mro__[1].__subclasses__() }}")
    with pytest.raises(Exception, match="unsafe|access"):
        evil([])


# ---------------------------------------------------------------- the server
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(*flags: str):
    """The server as a subprocess on a free port, up and healthy: (base URL, process)."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "..", "examples", "llm", "server.py"),
         "--port", str(port), "--log-level", "warning", *flags],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    t0 = time.perf_counter()
    while True:
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        try:
            if httpx.get(base + "/health", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert time.perf_counter() - t0 < 300, "the server did not come up"
        time.sleep(0.2)
    return base, proc


def _stop(proc) -> str:
    """SIGINT, then a clean exit: returns stderr."""
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:  # pragma: no cover
        proc.kill()
        raise
    assert proc.returncode == 0, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    return err


@pytest.fixture(scope="module")
def server():
    base, proc = _start("--max-batch", "8", "--context", "1024", "--queue-limit", "32")
    yield base, proc
    _stop(proc)


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server[0] + "/v1", api_key="unused", max_retries=0,
                         timeout=300)


def _chat(client, q: str, **kw):
    return client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": q}], temperature=0, **kw)


def _stream_text(client, q: str, **kw) -> tuple[str, list]:
    chunks = list(client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": q}], temperature=0, stream=True,
        **kw))
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices), chunks


def test_models_and_health(server, client) -> None:
    assert [m.id for m in client.models.list().data] == [MODEL]
    h = httpx.get(server[0] + "/health").json()
    assert h["status"] == "ok" and h["slots"] == 8


def test_chat_completion_and_usage(client, model_tok) -> None:
    tok = model_tok[1]
    r = _chat(client, QUESTIONS[0], max_tokens=32)
    c = r.choices[0]
    assert c.message.role == "assistant" and "Paris" in c.message.content
    assert c.finish_reason == "stop" and r.object == "chat.completion" and r.model == MODEL
    assert r.usage.prompt_tokens == len(tok.encode(llama.chat_prompt(QUESTIONS[0])).ids)
    n = len(tok.encode(c.message.content).ids)
    assert abs(r.usage.completion_tokens - n) <= 1  # (+ nothing for the stop token)
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    r = _chat(client, QUESTIONS[1], max_tokens=3)
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 3


def test_streaming_chat_equals_the_reply_and_ends_with_usage(client) -> None:
    want = _chat(client, QUESTIONS[0], max_tokens=32)
    text, chunks = _stream_text(client, QUESTIONS[0], max_tokens=32,
                                stream_options={"include_usage": True})
    assert text == want.choices[0].message.content
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.model_dump() == \
        want.usage.model_dump()
    assert all(c.usage is None for c in chunks[:-1])
    assert all(c.object == "chat.completion.chunk" and c.id == chunks[0].id for c in chunks)


def test_completions_streaming_and_not(client) -> None:
    prompt = llama.chat_prompt(QUESTIONS[2])
    r = client.completions.create(model=MODEL, prompt=prompt, max_tokens=16, temperature=0)
    assert r.object == "text_completion" and "4" in r.choices[0].text
    parts = list(client.completions.create(model=MODEL, prompt=prompt, max_tokens=16,
                                           temperature=0, stream=True))
    assert "".join(p.choices[0].text for p in parts) == r.choices[0].text
    assert parts[-1].choices[0].finish_reason == r.choices[0].finish_reason
    # the raw stream ends with OpenAI's sentinel
    with httpx.stream("POST", str(client.base_url) + "completions", json={
            "model": MODEL, "prompt": prompt, "max_tokens": 2, "stream": True}) as resp:
        lines = [x for x in resp.iter_lines() if x]
    assert lines[-1] == "data: [DONE]" and all(x.startswith("data: ") for x in lines)


def test_eight_concurrent_streams_match_their_answers_alone(client) -> None:
    alone = [_chat(client, q, max_tokens=40).choices[0].message.content for q in QUESTIONS]
    got: list = [None] * 8
    errors: list = []

    def one(i: int) -> None:
        try:
            got[i] = _stream_text(client, QUESTIONS[i], max_tokens=40)[0]
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors
    assert got == alone  # greedy: token-for-token the same batched as alone


def test_a_client_that_disconnects_mid_stream_frees_its_sequence(server, client) -> None:
    base = server[0]
    other: dict = {}

    def run_other() -> None:
        other["text"] = _stream_text(client, QUESTIONS[4], max_tokens=30)[0]

    with httpx.stream("POST", base + "/v1/chat/completions", timeout=120, json={
            "model": MODEL, "stream": True, "max_tokens": 400, "temperature": 0,
            "messages": [{"role": "user", "content": "Tell me a very long story."}]}) as resp:
        lines = resp.iter_lines()
        seen = 0
        for line in lines:
            if line.startswith("data: "):
                seen += 1
                if seen == 3:
                    t = threading.Thread(target=run_other)
                    t.start()
                if seen == 6:
                    break  # leaving the block closes the connection mid-answer
    t.join(120)
    assert other["text"] == _chat(client, QUESTIONS[4], max_tokens=30).choices[0].message.content
    t0 = time.perf_counter()
    while httpx.get(base + "/health").json()["running"]:
        assert time.perf_counter() - t0 < 30, "the disconnected sequence was not freed"
        time.sleep(0.05)


BAD = [  # (body or raw bytes, status, a piece of the message, param)
    (b"{not json", 400, "JSON", None),
    ({"messages": [{"role": "user", "content": "hi"}]}, 400, "model", "model"),
    ({"model": MODEL}, 400, "messages", "messages"),
    ({"model": MODEL, "messages": []}, 400, "at least 1", "messages"),
    ({"model": MODEL, "messages": [{"role": "wizard", "content": "hi"}]}, 400, "role", None),
    ({"model": MODEL, "messages": "hi"}, 400, "messages", "messages"),
    ({"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": "many"},
     400, "max_tokens", "max_tokens"),
    ({"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "temperature": "hot"},
     400, "temperature", "temperature"),
    ({"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": -3},
     400, "greater than or equal to 1", "max_tokens"),
    ({"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 10**9},
     400, "max_tokens is too large", "max_tokens"),
    ({"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "n": 3}, 400, "n", "n"),
    ({"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stop": [""]}, 400,
     "stop", "stop"),
    ({"model": MODEL, "messages": [{"role": "user", "content": "word " * 1500}]}, 400,
     "maximum context length is 1024 tokens", "messages"),
    ({"model": "gpt-9", "messages": [{"role": "user", "content": "hi"}]}, 404,
     "The model 'gpt-9' does not exist", "model"),
]


@pytest.mark.parametrize("body,status,text,param", BAD)
def test_bad_requests_get_openai_errors(server, body, status, text, param) -> None:
    kw = {"content": body, "headers": {"Content-Type": "application/json"}} \
        if isinstance(body, bytes) else {"json": body}
    r = httpx.post(server[0] + "/v1/chat/completions", timeout=60, **kw)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert text in err["message"], err
    assert err["type"] in ("invalid_request_error", "not_found_error")
    if param is not None:
        assert err["param"] == param, err


def test_the_openai_client_raises_its_own_errors(client) -> None:
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        client.chat.completions.create(model="nope", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.BadRequestError, match="maximum context length"):
        client.completions.create(model=MODEL, prompt="word " * 1500)
    with pytest.raises(openai.NotFoundError):
        client.get("/nowhere", cast_to=object)


def test_sampling_parameters(client) -> None:
    runs = [_chat(client, QUESTIONS[1], max_tokens=20, seed=5, top_p=0.9).choices[0]
            .message.content for _ in range(2)]
    sampled = [client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": QUESTIONS[1]}], temperature=1.2,
        seed=5, max_tokens=20).choices[0].message.content for _ in range(2)]
    assert runs[0] == runs[1] and sampled[0] == sampled[1]  # seeded: reproducible
    r = _chat(client, QUESTIONS[0], stop=["Paris", "Lyon"])
    assert r.choices[0].message.content == "The capital of France is "


# ---------------------------------------------------------------- the app in process
def test_503_while_loading_then_ready_and_429_when_full(model_tok) -> None:
    import server as server_mod
    from fastapi.testclient import TestClient

    model, tok = model_tok
    release = threading.Event()
    engine = batching.Engine(model, tok, max_batch=1, context=256, queue_limit=0)

    def loader(ready):  # the engine is not started: its one slot fills, then 429
        release.wait(60)
        ready(server_mod.Served(engine, MODEL, batching.chat_template(None)))

    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    with TestClient(server_mod.create_app(loader)) as c:
        r = c.get("/health")
        assert r.status_code == 503 and r.json()["status"] == "loading"
        r = c.post("/v1/chat/completions", json=body)
        assert r.status_code == 503 and r.json()["error"]["code"] == "model_loading"
        assert c.get("/v1/models").status_code == 503
        release.set()
        t0 = time.perf_counter()
        while c.get("/health").status_code != 200:
            assert time.perf_counter() - t0 < 30
            time.sleep(0.01)
        engine.submit(batching.Request([1, 2], 2, 0.0, 1.0, None, [], lambda e: None))
        r = c.post("/v1/chat/completions", json=body)
        assert r.status_code == 429 and r.json()["error"]["type"] == "rate_limit_exceeded"
    assert json.loads(json.dumps(engine.stats()))["waiting"] == 1


def test_batched_step_logits_equal_alone(model_tok) -> None:
    """The model's batched decode step itself: a sequence's logits are the same bits at
    B = 1 and inside a batch of 3 (bucket 4, one padding row)."""
    model, tok = model_tok
    cache = model.make_slot_cache(4, 128)
    for s, q in enumerate(QUESTIONS[:3]):
        model([tok.encode(llama.chat_prompt(q)).ids], cache.slot(s), last_only=True)
    offsets = [cache.slot(s).offset for s in range(3)]
    keys, values = cache.keys.copy(), cache.values.copy()
    together = model.decode_batch([11, 12, 13], [2, 0, 1], cache)
    for j, s in enumerate([2, 0, 1]):
        cache.keys[:], cache.values[:] = keys, values
        for i in range(3):
            cache.slot(i).offset = offsets[i]
        np.testing.assert_array_equal(model.decode_batch([11 + j], [s], cache)[0], together[j])
    with pytest.raises(ValueError, match="distinct slot"):
        model.decode_batch([1, 2], [0, 0], cache)


def test_batched_prefill_equals_alone_and_the_single_sequence_path(model_tok) -> None:
    """prefill_batch: each prompt's logits and cached keys/values are the same bits
    alone and pre-filled with prompts of other lengths (bucket 4, one padding row), and
    within float32 rounding of the single-sequence pre-fill (``model(ids, cache)``)."""
    model, tok = model_tok
    prompts = [tok.encode(llama.chat_prompt(q)).ids for q in QUESTIONS[:3]]
    prompts[1] = prompts[1][:5]  # lengths differ: padded to 8 tokens, others to 16
    cache = model.make_slot_cache(4, 128)
    cache.slot(3).offset = 7  # slots start at their own offsets
    together = model.prefill_batch(prompts, [2, 0, 3], cache)
    keys, values = cache.keys.copy(), cache.values.copy()
    for j, s in enumerate([2, 0, 3]):
        cache.keys[:] = cache.values[:] = 0
        cache.slot(s).offset = 7 if s == 3 else 0
        np.testing.assert_array_equal(model.prefill_batch([prompts[j]], [s], cache)[0],
                                      together[j])
        np.testing.assert_array_equal(cache.keys[s], keys[s])
        np.testing.assert_array_equal(cache.values[s], values[s])
        assert cache.slot(s).offset == (7 if s == 3 else 0) + len(prompts[j])
    single = np.asarray(model([prompts[0]], model.make_cache(128), last_only=True))[0, -1]
    np.testing.assert_allclose(together[0], single, rtol=0, atol=2e-3 * np.abs(single).max())
    assert int(np.argmax(together[0])) == int(np.argmax(single))
    with pytest.raises(ValueError, match="distinct slot"):
        model.prefill_batch([[1], [2]], [0, 0], cache)
    with pytest.raises(ValueError, match="at least one token"):
        model.prefill_batch([[]], [0], cache)
    with pytest.raises(ValueError, match="does not fit"):
        model.prefill_batch([[1] * 200], [0], cache)


def test_bad_engine_and_batch_arguments_are_refused_at_the_call(model_tok) -> None:
    model, tok = model_tok
    with pytest.raises(ValueError, match="at least one slot"):
        model.make_slot_cache(0, 16)
    with pytest.raises(ValueError, match="max_batch must be >= 1"):
        batching.Engine(model, tok, max_batch=0)
    cache = model.make_slot_cache(2, 16)
    with pytest.raises(ValueError, match=r"slots must be in \[0, 2\)"):
        model.decode_batch([1], [5], cache)
    with pytest.raises(ValueError, match="token ids must be in"):
        model.decode_batch([model.cfg.vocab], [0], cache)
    cache.slot(0).offset = 16
    with pytest.raises(ValueError, match="is full"):
        model.decode_batch([1], [0], cache)
    with pytest.raises(ValueError, match="holds 16 positions, not 17"):
        cache.copy_prefix(0, 1, 17)


# ---------------------------------------------------------------- untrusted clients
KEY = "sk-braze-test"
LIMITS = {"body": 4096, "prompt": 64, "tokens": 16, "connections": 6, "timeout": 2.0}


@pytest.fixture(scope="module")
def guarded():
    base, proc = _start("--max-batch", "2", "--context", "256", "--queue-limit", "4",
                        "--api-key", KEY, "--max-body-bytes", str(LIMITS["body"]),
                        "--max-prompt-tokens", str(LIMITS["prompt"]),
                        "--max-tokens", str(LIMITS["tokens"]),
                        "--max-connections", str(LIMITS["connections"]),
                        "--request-timeout", str(LIMITS["timeout"]), "--idle-timeout", "1")
    yield base
    err = _stop(proc)
    assert "dropped" in err  # the slow client's line in the log


AUTH = {"Authorization": f"Bearer {KEY}"}


def _post(base: str, body: object, headers=AUTH, **kw):
    return httpx.post(base + "/v1/chat/completions", json=body, headers=headers, timeout=60,
                      **kw)


def _body(text: str = "Hi", **kw) -> dict:
    return {"model": MODEL, "messages": [{"role": "user", "content": text}], **kw}


def test_the_api_key_is_required_on_all_but_health(guarded) -> None:
    wrong = openai.OpenAI(base_url=guarded + "/v1", api_key="sk-wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as e:
        wrong.models.list()
    assert e.value.status_code == 401 and "Incorrect API key" in str(e.value)
    r = httpx.get(guarded + "/v1/models", timeout=30)  # no header at all
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
    assert httpx.get(guarded + "/health", timeout=30).status_code == 200  # stays open
    assert httpx.get(guarded + "/docs", timeout=30).status_code == 401  # the schema too
    good = openai.OpenAI(base_url=guarded + "/v1", api_key=KEY, max_retries=0, timeout=120)
    assert [m.id for m in good.models.list().data] == [MODEL]
    reply = good.chat.completions.create(model=MODEL, messages=[{"role": "user",
                                                                 "content": "Hi"}],
                                         max_tokens=4, temperature=0)
    assert 1 <= reply.usage.completion_tokens <= 4


def test_each_request_limit_is_a_clear_4xx(guarded) -> None:
    big = _post(guarded, _body("x" * (LIMITS["body"] + 100)))
    assert big.status_code == 413 and f"at most {LIMITS['body']}" in big.json()["error"][
        "message"]

    def chunks():  # no Content-Length: counted as it arrives
        yield json.dumps(_body("y" * 3000))[:-2].encode()
        yield ("z" * 3000 + '"}]}').encode()

    streamed = httpx.post(guarded + "/v1/chat/completions", content=chunks(),
                          headers={**AUTH, "content-type": "application/json"}, timeout=60)
    assert streamed.status_code == 413, streamed.text
    long = _post(guarded, _body("word " * 200))  # 1 KB, but past 64 prompt tokens
    assert long.status_code == 400 and long.json()["error"]["code"] == "context_length_exceeded"
    assert f"at most {LIMITS['prompt']}" in long.json()["error"]["message"]
    many = _post(guarded, _body(max_tokens=LIMITS["tokens"] + 1))
    assert many.status_code == 400 and many.json()["error"]["param"] == "max_tokens"
    assert f"at most {LIMITS['tokens']} tokens" in many.json()["error"]["message"]
    # the model is a name compared with the served one: never a path that is opened
    path = _post(guarded, {**_body(), "model": "/etc/passwd"})
    assert path.status_code == 404 and path.json()["error"]["code"] == "model_not_found"
    ok = _post(guarded, _body(max_tokens=LIMITS["tokens"]))
    assert ok.status_code == 200 and ok.json()["usage"]["completion_tokens"] <= LIMITS["tokens"]


def _raw(base: str) -> socket.socket:
    host, port = base.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=10)


def test_a_slow_client_is_dropped_without_delaying_the_others(guarded) -> None:
    """A slow loris trickles a request a byte every 0.2 s: the server closes it once the
    request deadline passes, and an ordinary request meanwhile is answered at once."""
    slow = _raw(guarded)
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}"
            "\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n").encode()
    closed_after: list[float] = []

    def trickle() -> None:
        t0 = time.perf_counter()
        try:
            for i in range(100):
                slow.sendall(head[i % len(head):i % len(head) + 1])
                time.sleep(0.2)
        except OSError:  # reset by the server
            pass
        closed_after.append(time.perf_counter() - t0)

    thread = threading.Thread(target=trickle)
    thread.start()
    t0 = time.perf_counter()
    ok = _post(guarded, _body(max_tokens=2))
    assert ok.status_code == 200 and time.perf_counter() - t0 < LIMITS["timeout"] * 5
    slow.settimeout(LIMITS["timeout"] * 5)
    try:
        assert slow.recv(1024) == b""  # closed by the server, with nothing sent
    except ConnectionResetError:
        pass
    thread.join(30)
    slow.close()
    assert closed_after and closed_after[0] < 15  # not the 20 s it would trickle for


def test_connections_past_the_limit_are_refused_with_429(guarded) -> None:
    held = [_raw(guarded) for _ in range(LIMITS["connections"])]
    try:
        time.sleep(0.2)
        extra = _raw(guarded)
        extra.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        reply = extra.recv(4096).decode()
        extra.close()
        assert reply.startswith("HTTP/1.1 429") and "too_many_connections" in reply
    finally:
        for s in held:
            s.close()
    t0 = time.perf_counter()  # once they are gone, new connections are served again
    while httpx.get(guarded + "/health", timeout=30).status_code != 200:
        assert time.perf_counter() - t0 < 10
        time.sleep(0.1)


def test_listening_beyond_this_machine_warns() -> None:
    import server as server_mod

    assert server_mod.host_warning("127.0.0.1") is None
    assert server_mod.host_warning("::1") is None
    for host in ("0.0.0.0", "192.168.1.5", "example.org"):
        assert "--api-key" in server_mod.host_warning(host)
