#!/usr/bin/env bash
# A minimal Ray for a GPU host that has no Ray and no package index: .raypkg/ray.tar.xz (git-ignored).
#
#   bench/ray_carry.sh                 # for the GPU host's Python (3.12): Ray's wheel, stripped, xz-compressed
#   bench/ray_carry.sh --check         # for this machine's Python, then start a local cluster with actors from
#                                      # the stripped tree alone, in a fresh virtual environment
#
# Ray's wheel is 79 MB; without its Java jars, RLlib, Data, Serve, Train, Tune, LLM and the dashboard's web
# client it keeps what a local cluster with actors needs (the GCS server, the raylet, the core worker, the
# runtime-env agent's own vendored aiohttp) and compresses to about 28 MB. What Ray imports that the GPU image
# lacks (jsonschema, which Ray imports at start, and what jsonschema needs beyond attrs and typing-extensions) goes
# in too; the rest (click, filelock, msgpack, packaging, protobuf, pyyaml, requests) is in that image. On the GPU host, with .raypkg carried:
#
#   mkdir -p /tmp/raysite && tar -xJf .raypkg/ray.tar.xz -C /tmp/raysite && export PYTHONPATH=/tmp/raysite:$PYTHONPATH
set -euo pipefail
cd "$(dirname "$0")/.."
RAY_VERSION=2.60.0
PY=${PYTHON:-python3}
check=0
pyver=3.12
if [ "${1:-}" = "--check" ]; then
    check=1
    pyver=$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
fi
out=.raypkg
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
download() {  # NAME==VERSION...: binary wheels for $pyver on x86-64 Linux, into $work/wheels
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version "$pyver" --implementation cp \
        --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
        -d "$work/wheels" "$@"
}
download "ray==$RAY_VERSION" jsonschema==4.25.1 jsonschema-specifications==2025.9.1 referencing==0.36.2 \
    rpds-py==0.27.1
mkdir -p "$work/site"
for w in "$work"/wheels/*.whl; do "$PY" -m zipfile -e "$w" "$work/site"; done
( cd "$work/site/ray" && rm -rf jars rllib data serve train tune llm dashboard/client )
find "$work/site" -name '__pycache__' -prune -exec rm -rf {} +
chmod +x "$work"/site/ray/core/src/ray/gcs/gcs_server "$work"/site/ray/core/src/ray/raylet/raylet
tar -C "$work/site" -cJf "$out/ray.tar.xz" .
echo "$out/ray.tar.xz: $(du -m "$out/ray.tar.xz" | cut -f1) MB (Ray $RAY_VERSION for Python $pyver, stripped)"
echo "unpack on the GPU host: mkdir -p /tmp/raysite && tar -xJf $out/ray.tar.xz -C /tmp/raysite && export PYTHONPATH=/tmp/raysite:\$PYTHONPATH"
[ "$check" = 1 ] || exit 0

# The check: a fresh virtual environment with only the packages the GPU image has that Ray needs, the stripped
# tree on PYTHONPATH, a local cluster with two fake GPUs and an actor on each.
"$PY" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q click filelock msgpack packaging protobuf pyyaml requests attrs typing-extensions
mkdir -p "$work/unpacked" && tar -xJf "$out/ray.tar.xz" -C "$work/unpacked"
cd "$work"
PYTHONPATH="$work/unpacked" "$work/venv/bin/python" - <<'PYEOF'
import os
import ray

assert ray.__file__.startswith(os.environ["PYTHONPATH"]), ray.__file__
ray.init(num_cpus=1, num_gpus=2, include_dashboard=False, log_to_driver=False)


@ray.remote(num_gpus=1, num_cpus=0)
class Probe:
    def where(self):
        return os.getpid(), ray.get_gpu_ids(), ray.__file__


actors = [Probe.remote() for _ in range(2)]
found = ray.get([a.where.remote() for a in actors], timeout=300)
assert sorted(g for _, gpus, _ in found for g in gpus) == [0, 1], found
assert all(path.startswith(os.environ["PYTHONPATH"]) for _, _, path in found), found
ray.shutdown()
print(f"check: a local cluster with 2 actors ran from the stripped tree (Ray {ray.__version__}): {found}")
PYEOF
