#!/usr/bin/env bash
# What the test suite needs beside the venv, installed when missing (run by `make test`; idempotent):
set -euo pipefail
cd "$(dirname "$0")/.."

# Headless Chromium for the report test (tests/report/test_report_chromium.py fails without it).
if ! command -v chromium >/dev/null 2>&1; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi

# The pinned engine sources, unpacked, for the tests that read them (tests/capability/test_citations.py fails without
# them; tests/kernels/test_moe_engine_lookup.py): vllm 0.34.0, sglang 0.5.23 and vllm 0.23.0 wheels, and
# the vllm-ascend 0.23.0.post1 sdist (its source; pip cannot download an sdist without building it). Once, ~600 MB.
MI_TUNE_ENGINE_SRC="${MI_TUNE_ENGINE_SRC:-/tmp/wheels/src}"  # the tests read the same default
for spec in vllm==0.34.0:vllm sglang==0.5.23:sglang vllm==0.23.0:vllm-0.23.0; do
    pin="${spec%%:*}"; folder="${spec##*:}"; name="${pin%%==*}"
    if [ ! -d "$MI_TUNE_ENGINE_SRC/$folder/$name" ]; then
        wheels="$(mktemp -d)"
        python3 -m pip download -q --no-deps --only-binary=:all: "$pin" -d "$wheels"
        mkdir -p "$MI_TUNE_ENGINE_SRC/$folder"
        python3 -m zipfile -e "$wheels"/*.whl "$MI_TUNE_ENGINE_SRC/$folder"
        rm -rf "$wheels"
    fi
done
if [ ! -d "$MI_TUNE_ENGINE_SRC/vllm-ascend/vllm_ascend" ]; then
    python3 .ci/fetch_sdist.py vllm-ascend 0.23.0.post1 "$MI_TUNE_ENGINE_SRC/vllm-ascend"
fi
