#!/usr/bin/env bash
# Download the wheels that benchmarks/gpu_check.sh installs on the GPU machine (which has no
# network) into ./.whl (git-ignored; never commit them).
#
# The machine's image has Python 3.12, torch with CUDA 13 and driver 580, so the CUDA 13 build of
# nvImageCodec is taken (CUDA=12 picks the cu12 build, as `pip install 'stoker[gpu]'` does).
# Wheels travel with the working tree (64 MiB in all), so only what the check needs is fetched
# (nvImageCodec with nvJPEG only: its JPEG 2000 and TIFF codecs are left out), one set a call.
# DALI (~500 MB) does not fit: the check measures it only where it is importable.
#
#   scripts/gpu_wheels.sh [images|video]   # (default images) then: du -sh .whl
#
# images: nvImageCodec + nvJPEG + simplejpeg + braceexpand (~30 MB); video: PyNvVideoCodec + PyAV
# + braceexpand (~62 MB: only just inside the 64 MiB that travel with a ~4 MB tree). The folder is
# emptied first, so that one set travels at a time.
set -euo pipefail
cd "$(dirname "$0")/.."
CUDA=${CUDA:-13}
PY=${PYTHON:-python3}
# .whl/ is in .gitignore.
SET=${1:-images}
rm -rf .whl && mkdir -p .whl
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 \
         manylinux1_x86_64 manylinux_2_31_x86_64 manylinux_2_34_x86_64 manylinux_2_35_x86_64; do
  platforms+=(--platform "$p")
done
wanted=(braceexpand)
if [ "$SET" = video ]; then
  wanted+=(PyNvVideoCodec av)
elif [ "$CUDA" = 13 ]; then
  wanted+=(nvidia-nvimgcodec-cu13 nvidia-nvjpeg simplejpeg)
else
  wanted+=(nvidia-nvimgcodec-cu12 nvidia-nvjpeg-cu12 simplejpeg)
fi
for name in "${wanted[@]}"; do
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp "${platforms[@]}" --platform any -d .whl "$name" \
    || echo "gpu_wheels: no wheel of $name for this platform (the check skips what needs it)"
done
ls -la .whl
du -sh .whl
