"""Continuous batching for the LLM example: many sequences decoded together.

An :class:`Engine` owns the model, the tokenizer and a :class:`llama.SlotCache` and runs
one thread. Requests join the running batch between decode steps (the requests admitted
at a step boundary are pre-filled together into free cache slots by one
:meth:`llama.Llama.prefill_batch`, up to ``PREFILL_ROWS`` padded rows a call; each one's
first token is sampled from its pre-fill) and leave it
when they finish or are cancelled; every decode step is one compiled
:meth:`llama.Llama.decode_batch` over all running sequences at their own positions (the
4-bit matvecs become small GEMMs over the batch). The step is batch invariant: a
sequence gets the same logits whatever runs with it, so greedy output is
token-for-token the same alone or batched.

* **Shared prefix**: the default system prompt is pre-filled once into a slot of its
  own; a prompt that starts with its tokens copies those cache rows and pre-fills only
  the rest.
* **Back-pressure**: at most ``queue_limit`` requests wait for a slot; past that
  :meth:`Engine.submit` raises :class:`QueueFull`.
* **Isolation**: a request whose pre-fill fails gets an error event, the others go on;
  if a batched step fails, each sequence is retried alone (the step is batch invariant,
  so the others' results do not change) and only the failing ones end with an error.
* **Streaming text**: tokens are detokenized incrementally (only the last few ids are
  decoded per token, holding back an incomplete UTF-8 sequence) and text that could be
  the start of a stop string is held back until it is known not to be one.

>>> import llama
>>> model, tok = llama.load()
>>> engine = Engine(model, tok, max_batch=2)
>>> engine.start()
>>> events = []
>>> done = threading.Event()
>>> def sink(ev):
...     events.append(ev)
...     if ev.kind != "text":
...         done.set()
>>> _ = engine.submit(Request(tok.encode(llama.chat_prompt("Hi")).ids, 5, 0.0, 1.0, None, [],
...                           sink))
>>> _ = done.wait(60)
>>> events[-1].kind, events[-1].usage["completion_tokens"] <= 5
('done', True)
>>> engine.stop()
"""

from __future__ import annotations

import collections
import itertools
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import llama
import numpy as np

log = logging.getLogger("braze.serve")


# padded prompt rows pre-filled in one call at most (more admitted requests: more calls)
PREFILL_ROWS = 512


class QueueFull(RuntimeError):
    """The engine's queue of waiting requests is at its limit."""


@dataclass
class Event:
    """What a request hears from the engine: ``text`` (a delta of the answer), then one
    ``done`` (``finish_reason`` "stop" or "length", ``usage``) or ``error`` (``message``)."""

    kind: str
    text: str = ""
    finish_reason: str | None = None
    usage: dict[str, int] | None = None
    message: str = ""


@dataclass
class Request:
    """One generation: prompt token ids, sampling parameters, and ``emit`` (called on the
    engine's thread with each :class:`Event`; it must not block)."""

    prompt_ids: list[int]
    max_tokens: int
    temperature: float
    top_p: float
    seed: int | None
    stop: list[str]
    emit: Callable[[Event], None]
    cancelled: threading.Event = field(default_factory=threading.Event)
    id: int = field(default_factory=itertools.count().__next__)

    def cancel(self) -> None:
        """Free this request's sequence at the next step boundary (a client that left)."""
        self.cancelled.set()


class _Sequence:
    """A running request: its cache slot, sampler and detokenizer state."""

    def __init__(self, req: Request, slot: int) -> None:
        self.req, self.slot = req, slot
        self.rng = np.random.default_rng(req.seed)
        self.ids: list[int] = []  # generated tokens
        self.next_token = -1  # sampled, not yet fed to the model
        self.prefix_offset = 0  # incremental detokenization (ids[prefix_offset:] decoded)
        self.read_offset = 0
        self.text = ""  # the whole answer so far
        self.sent = 0  # characters of text already emitted

    def usage(self) -> dict[str, int]:
        p, c = len(self.req.prompt_ids), len(self.ids)
        return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}


class Engine:
    """The batching loop over one model (see the module docstring).

    ``max_batch``: sequences decoded together (cache slots); ``context``: positions per
    sequence; ``queue_limit``: waiting requests before :class:`QueueFull`;
    ``prefix``: text pre-filled once and shared (default: the ChatML system turn of the
    default system prompt; "" for none); ``warm_prefill``: :meth:`warm_up` also traces the
    batched pre-fill of prompts of up to this many tokens (after the prefix) for every
    batch bucket (0: none).
    """

    def __init__(self, model: llama.Llama, tokenizer: Any, *, max_batch: int = 16,
                 context: int = 2048, queue_limit: int = 64, prefix: str | None = None,
                 warm_prefill: int = 0) -> None:
        if max_batch < 1 or queue_limit < 0 or warm_prefill < 0:
            raise ValueError(f"Engine: max_batch must be >= 1, queue_limit and warm_prefill "
                             f">= 0, got {max_batch}, {queue_limit} and {warm_prefill}")
        self.model, self.tok = model, tokenizer
        self.max_batch, self.queue_limit = max_batch, queue_limit
        self.context = min(context, model.cfg.context_length)
        self.warm_prefill = min(warm_prefill, self.context - 1)
        self.cache = model.make_slot_cache(max_batch + 1, self.context)
        self._prefix_slot = max_batch  # the last slot holds the shared prefix
        if prefix is None:
            prefix = f"<|im_start|>system\n{llama.CHATML_SYSTEM}<|im_end|>\n"
        self.prefix_ids: list[int] = tokenizer.encode(prefix).ids if prefix else []
        self._free = list(range(max_batch))[::-1]
        self._waiting: collections.deque[Request] = collections.deque()
        self._running: list[_Sequence] = []
        self._cv = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self.steps = 0  # decode steps run (stats)
        self.batch_rows = 0  # sequences summed over those steps
        self.prefill_seconds = 0.0  # time in pre-fills and in decode steps (stats)
        self.decode_seconds = 0.0

    # ------------------------------------------------------------ the public side
    def start(self) -> None:
        """:meth:`run` on a thread of its own."""
        self._thread = threading.Thread(target=self.run, name="braze-engine", daemon=True)
        self._thread.start()

    def run(self) -> None:
        """Pre-fill the shared prefix, then run the loop on this thread until :meth:`stop`.

        Every model call of a process is best made on one thread: OpenMP keeps a pool of
        workers per thread that starts parallel regions, and kernels launched from a
        second thread ran ~2x slower on 2 cores (two pools' workers contending). The
        server loads the model on the thread that then calls this."""
        if self.prefix_ids:
            self.model([self.prefix_ids], self.cache.slot(self._prefix_slot), last_only=True)
        self.warm_up()
        self._loop()

    def warm_up(self) -> None:
        """Trace the decode step of every batch bucket now, and the pre-fill of every batch
        bucket for each padded length up to ``warm_prefill`` tokens, so that no request
        waits for a compilation when the batch first grows to a new size (a new pre-fill
        shape costs ~0.1-0.3 s of tracing: arrivals split into new groups met them mid-run)."""
        buckets = sorted({llama.batch_bucket(n) for n in range(1, self.max_batch + 1)})
        lengths = sorted({llama.prefill_bucket(t) for t in range(1, self.warm_prefill + 1)})
        for b in buckets:
            slots = list(range(min(b, self.max_batch)))
            self.model.decode_batch([0] * len(slots), slots, self.cache)
            n = len(slots)
            for t in lengths:
                t = min(t, self.context - 1)
                # every row count a pre-fill of n prompts of at most t tokens runs (padded,
                # or packed: llama.packed_rows), each from prompts of one token total
                bt = math.prod(llama.prefill_shape(n, t))
                totals: dict[int, int] = {}
                for total in range(n * t, t + n - 2, -1):
                    totals.setdefault(llama.packed_rows(bt, total), total)
                for total in totals.values():
                    rest = total - t
                    lens = [t] + [rest // (n - 1) + (j < rest % (n - 1)) for j in range(n - 1)]
                    for s in slots:
                        self.cache.slot(s).offset = 0
                    self.model.prefill_batch([[0] * k for k in lens], slots, self.cache)
            for s in slots:  # (the rows written are overwritten by pre-fills)
                self.cache.slot(s).offset = 0

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the loop: waiting and running requests end with an error event."""
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)

    def submit(self, req: Request) -> Request:
        """Queue ``req``; raises :class:`QueueFull` at the queue limit, ValueError when
        its prompt and ``max_tokens`` cannot fit the context."""
        n = len(req.prompt_ids)
        if n == 0:
            raise ValueError("the prompt is empty")
        if n >= self.context:
            raise ValueError(f"the prompt has {n} tokens; this server's context is "
                             f"{self.context} tokens")
        with self._cv:
            if self._stopping:
                raise RuntimeError("the engine is stopping")
            if len(self._waiting) >= len(self._free) + self.queue_limit:
                raise QueueFull(f"{len(self._waiting)} requests are waiting for a slot "
                                f"(queue limit {self.queue_limit})")
            self._waiting.append(req)
            self._cv.notify_all()
        return req

    def stats(self) -> dict[str, Any]:
        """Running and waiting requests; decode steps, the sequences they served, and
        the seconds spent in pre-fills and in decode steps."""
        with self._cv:
            return {"running": len(self._running), "waiting": len(self._waiting),
                    "slots": self.max_batch, "steps": self.steps,
                    "batch_rows": self.batch_rows,
                    "prefill_seconds": round(self.prefill_seconds, 3),
                    "decode_seconds": round(self.decode_seconds, 3)}

    # ------------------------------------------------------------ the loop
    def _loop(self) -> None:
        while True:
            with self._cv:
                while not self._stopping and not self._waiting and not self._running:
                    self._cv.wait()
                if self._stopping:
                    break
                admit = []
                while self._waiting and self._free:
                    admit.append((self._waiting.popleft(), self._free.pop()))
            t0 = time.perf_counter()
            if admit:
                self._admit(admit)
            t1 = time.perf_counter()
            self._drop_cancelled()
            if self._running:
                self._step()
            self.prefill_seconds += t1 - t0
            self.decode_seconds += time.perf_counter() - t1
        for seq in self._running:
            seq.req.emit(Event("error", message="the server is shutting down"))
        for req in self._waiting:
            req.emit(Event("error", message="the server is shutting down"))

    def _release(self, seq: _Sequence) -> None:
        self._running.remove(seq)
        self.cache.slot(seq.slot).offset = 0
        with self._cv:
            self._free.append(seq.slot)

    def _drop_cancelled(self) -> None:
        for seq in [s for s in self._running if s.req.cancelled.is_set()]:
            log.info("request %d cancelled after %d tokens", seq.req.id, len(seq.ids))
            self._release(seq)

    def _admit(self, admit: list[tuple[Request, int]]) -> None:
        """Pre-fill the admitted requests into their slots (after the shared prefix's
        rows when a prompt starts with them), together in calls of up to
        ``PREFILL_ROWS`` padded rows, and handle each one's first token."""
        todo: list[tuple[_Sequence, list[int]]] = []
        p = len(self.prefix_ids)
        for req, slot in admit:
            if req.cancelled.is_set():
                with self._cv:
                    self._free.append(slot)
                continue
            self.cache.slot(slot).offset = 0
            ids = req.prompt_ids
            if p and len(ids) > p and ids[:p] == self.prefix_ids:
                self.cache.copy_prefix(self._prefix_slot, slot, p)
                ids = ids[p:]
            todo.append((_Sequence(req, slot), ids))
        group: list[tuple[_Sequence, list[int]]] = []
        # shortest first: similar lengths together, and each new item is its group's longest
        for item in sorted(todo, key=lambda it: len(it[1])):
            padded = llama.prefill_bucket(len(item[1]))
            if group and llama.batch_bucket(len(group) + 1) * padded > PREFILL_ROWS:
                self._prefill_groups(group)
                group = []
            group.append(item)
        if group:
            self._prefill_groups(group)

    def _prefill_groups(self, group: list[tuple[_Sequence, list[int]]]) -> None:
        """Pre-fill ``group`` (shortest prompt first) in one call, or in calls of a power
        of two of prompts each, largest first, whichever runs fewer rows: a call of n
        prompts pads them to :func:`llama.batch_bucket` (n) sequences of the longest's
        length, so 10 short prompts run as 8 + 2 instead of 16; but packed rows
        (:func:`llama.packed_rows`) skip the padding, so 15 prompts of ~20 tokens run
        as one call (320 rows) rather than 8 + 4 + 2 + 1 (368 rows, 4 passes over the
        weights)."""
        def rows(g: list[tuple[_Sequence, list[int]]]) -> int:
            shape = llama.prefill_shape(len(g), max(len(ids) for _, ids in g))
            return llama.packed_rows(math.prod(shape), sum(len(ids) for _, ids in g))

        chunks, rest = [], group
        while rest:
            n = 1 << (len(rest).bit_length() - 1)
            chunks.append(rest[:n])
            rest = rest[n:]
        if len(chunks) > 1 and rows(group) <= sum(map(rows, chunks)):
            chunks = [group]
        for chunk in chunks:
            self._prefill(chunk)

    def _prefill(self, group: list[tuple[_Sequence, list[int]]]) -> None:
        """One batched pre-fill (each request alone if it fails: only a failing one
        ends with an error)."""
        try:
            logits = self.model.prefill_batch([ids for _, ids in group],
                                              [seq.slot for seq, _ in group], self.cache)
            rows = list(zip((seq for seq, _ in group), logits))
        except Exception as e:
            if len(group) > 1:  # (nothing was written: the cache is written last)
                log.exception("a batched pre-fill of %d requests failed; each alone",
                              len(group))
                for item in group:
                    self._prefill([item])
                return
            seq = group[0][0]
            log.exception("pre-fill of request %d failed", seq.req.id)
            with self._cv:
                self._free.append(seq.slot)
            seq.req.emit(Event("error", message=f"pre-fill failed: {e}"))
            return
        for seq, row in rows:
            self._running.append(seq)
            self._accept(seq, row)

    def _step(self) -> None:
        """One decode step for every running sequence (each alone if the batch fails)."""
        seqs = list(self._running)
        try:
            logits = self.model.decode_batch([s.next_token for s in seqs],
                                             [s.slot for s in seqs], self.cache)
            # the greedy rows' tokens in one argmax over the step's logits (one pass of
            # numpy's over the rows, not a call per sequence)
            greedy = np.argmax(logits, axis=1).tolist() if any(
                s.req.temperature <= 0 for s in seqs) else [None] * len(seqs)
            rows = [(s, row, g if s.req.temperature <= 0 else None)
                    for s, row, g in zip(seqs, logits, greedy)]
        except Exception:
            log.exception("a batched step of %d sequences failed; retrying each alone",
                          len(seqs))
            rows = []
            for s in seqs:
                try:
                    rows.append((s, self.model.decode_batch([s.next_token], [s.slot],
                                                            self.cache)[0], None))
                except Exception as e:
                    self._release(s)
                    s.req.emit(Event("error", message=f"decoding failed: {e}"))
        self.steps += 1
        self.batch_rows += len(seqs)
        for s, row, token in rows:
            self._accept(s, row, token)

    def _accept(self, seq: _Sequence, logits: np.ndarray, token: int | None = None) -> None:
        """Sample the next token from ``logits`` (``token``: already chosen, greedy);
        emit text; finish or go on."""
        req = seq.req
        if token is None:
            token = llama.sample(logits, req.temperature, req.top_p, seq.rng)
        if token in self.model.stop_ids:  # type: ignore[attr-defined]
            return self._finish(seq, "stop")
        seq.ids.append(token)
        self._detokenize(seq)
        for stop in req.stop:
            at = seq.text.find(stop, max(0, seq.sent - len(stop)))
            if at >= 0:
                seq.text = seq.text[:at]
                return self._finish(seq, "stop")
        hold = max((len(s) - 1 for s in req.stop), default=0)
        end = len(seq.text)
        for k in range(min(hold, end), 0, -1):  # a tail that may start a stop string
            if any(s.startswith(seq.text[end - k:]) for s in req.stop):
                end -= k
                break
        if end > seq.sent:
            req.emit(Event("text", seq.text[seq.sent:end]))
            seq.sent = end
        if len(seq.ids) >= req.max_tokens or \
                self.cache.slot(seq.slot).offset + 1 >= self.context:
            return self._finish(seq, "length")
        seq.next_token = token

    def _detokenize(self, seq: _Sequence) -> None:
        """Append the new token's text (incremental: the last ids decoded, not all)."""
        ids = seq.ids
        prefix = self.tok.decode(ids[seq.prefix_offset:seq.read_offset])
        new = self.tok.decode(ids[seq.prefix_offset:])
        if new.endswith("\ufffd"):  # an incomplete UTF-8 sequence: wait for more bytes
            return
        seq.text += new[len(prefix):]
        seq.prefix_offset, seq.read_offset = seq.read_offset, len(ids)

    def _finish(self, seq: _Sequence, reason: str) -> None:
        if len(seq.text) > seq.sent:
            seq.req.emit(Event("text", seq.text[seq.sent:]))
            seq.sent = len(seq.text)
        self._release(seq)
        seq.req.emit(Event("done", finish_reason=reason, usage=seq.usage()))


def chat_template(meta_template: str | None) -> Callable[[list[dict[str, str]]], str]:
    """The model's chat template (the GGUF's ``tokenizer.chat_template``, Jinja rendered
    in a sandbox as Hugging Face does: a model file is untrusted input), else ChatML.

    >>> render = chat_template(None)
    >>> render([{"role": "user", "content": "Hi"}]).endswith("<|im_start|>assistant\\n")
    True
    """
    if meta_template:
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        tmpl = env.from_string(meta_template)

        def render(messages: list[dict[str, str]]) -> str:
            return tmpl.render(messages=messages, add_generation_prompt=True)

        return render

    def chatml(messages: list[dict[str, str]]) -> str:
        head = "" if messages and messages[0]["role"] == "system" else \
            f"<|im_start|>system\n{llama.CHATML_SYSTEM}<|im_end|>\n"
        body = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        return head + body + "<|im_start|>assistant\n"

    return chatml

