#!/usr/bin/env bash
# The one prepared GPU-machine check of issue 34 (docs/gpu.md). On the GPU machine (no network),
# from the repository root, with the wheels of scripts/gpu_wheels.sh carried in .whl/:
#
#   benchmarks/gpu_check.sh                 # installs .whl, GPU tests, then bench_gpu.py
#   benchmarks/gpu_check.sh --cpu-only      # smoke run here: tiny data, CPU parts only
#
# Writes $OUT/gpu_table.md (the Markdown table), $OUT/gpu_results.json and $OUT/gpu_tests.log
# ($OUT defaults to ./gpu-out). Sized to finish within ~8 minutes on 16 cores; each part that
# cannot run (a package missing) is reported in the table rather than stopping the rest.
# The 64 MiB that travel hold either the image wheels or the video wheels (PyAV and
# PyNvVideoCodec are ~62 MB together): run it once per set, naming the parts that set serves:
#   scripts/gpu_wheels.sh images  ->  benchmarks/gpu_check.sh --parts images,scaling
#   scripts/gpu_wheels.sh video   ->  benchmarks/gpu_check.sh --parts video
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
if [ "${1:-}" = "--cpu-only" ]; then
  shift
  PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} exec "$PY" benchmarks/bench_gpu.py --out "$OUT" \
    --data-dir "${DATA_DIR:-$OUT/data}" --quick --cpu-only "$@"
fi
export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || echo "gpu_check: installing .whl failed"
  export PYTHONPATH=/tmp/site
  # The image's own nvidia-* packages may make `nvidia` a regular package that hides the
  # carried nvidia/nvimgcodec: then merge the two folders into one package.
  if [ -d /tmp/site/nvidia ] && ! "$PY" -c "import nvidia.nvimgcodec" 2>/dev/null; then
    printf 'from pkgutil import extend_path\n__path__ = extend_path(__path__, __name__)\n' \
      > /tmp/site/nvidia/__init__.py
  fi
fi
export PYTHONPATH=$PWD/src:$PWD${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu_machine.txt"
"$PY" -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available())"
for m in nvidia.nvimgcodec PyNvVideoCodec av simplejpeg nvidia.dali; do
  "$PY" -c "import $m; print('$m', getattr($m, '__version__', 'ok'))" 2>/dev/null || echo "$m: not importable"
done
# The GPU tests (each skips with its reason where its package is missing). --noconftest: the
# suite's conftest starts an S3 server through boto3, which this machine lacks; these tests
# need none of its fixtures.
timeout 150 "$PY" -m pytest -q -p no:cacheprovider --noconftest -rs tests/unit/test_gpu_decode.py \
  2>&1 | tee "$OUT/gpu_tests.log" | tail -25
timeout "${BENCH_SECONDS:-330}" "$PY" benchmarks/bench_gpu.py --out "$OUT" --data-dir /tmp/bench-data "$@"
cat "$OUT/gpu_table.md" 2>/dev/null
