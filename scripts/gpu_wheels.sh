#!/usr/bin/env bash
# Wheels for the GPU machine (Python 3.12, no network), for what its image lacks: run here, then
# name .whl in the device call's carry. scripts/gpu_check.sh installs them into /tmp/site.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo /.whl/ >> .git/info/exclude
rm -rf .whl && mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux_2_24_x86_64 --platform any -d .whl \
  datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 nltk==3.10.4 pydantic==2.14.4 \
  pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 \
  liger-kernel==0.8.5  # the gpu extra: model.liger_kernel (triton comes with the image's torch)
# rouge-score publishes no wheel (PyPI's "rouge_score 0.0.4" wheel is another, older package):
# build the pure-Python one from its source release.
python3 -m pip wheel -q --no-deps --no-build-isolation -w .whl rouge-score==0.1.2
ls .whl
