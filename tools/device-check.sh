#!/usr/bin/env bash
# Builds bucketsim with the cuda backend on a machine with an NVIDIA GPU, runs the GPU tests and
# the GPU benchmark, and prints a short table. NOT YET RUN ON A GPU: the task that wrote it had
# no device; treat its first run as the test of the script itself.
#
# Two steps, because the device machine has nvcc and NCCL (inside its PyTorch environment) but
# none of bucketsim's Debian packages, and cannot reach a package registry:
#
#   1. On the repo machine (Debian, tools/setup.sh done):
#        tools/device-check.sh stage
#      copies the header-only and small dependencies into device-deps/ (git-ignored):
#      nlohmann_json and CLI11 (headers + CMake configs), fmt, GoogleTest and Google Benchmark
#      (headers, libraries, CMake configs). Carry device-deps/ with the working tree.
#   2. On the device machine:
#        tools/device-check.sh            # BUILD_DIR (default build-device) may be set
#
# What the device machine must have, and how the script copes:
#   - nvcc (CUDA toolkit >= 12.0) on PATH or in /usr/local/cuda/bin: required.
#   - NCCL: found in this order: $NCCL_HOME; nccl.h beside the toolkit; the PyTorch
#     environment's `nvidia.nccl` wheel (python -c 'import nvidia.nccl'), whose lib/ holds
#     libnccl.so.2 and include/ nccl.h; torch's own lib/ (libnccl.so.2 only; then nccl.h must
#     come from the wheel). A libnccl.so.2 without a libnccl.so link gets one in the build dir.
#   - cmake >= 3.25 and ninja: from PATH, else the PyTorch environment's pip-installed `cmake`
#     and `ninja` modules (their bin/ is added to PATH). Required.
#   - A C++20 compiler (g++ >= 11 or clang >= 14). Required.
#   - MPI (OpenMPI or MPICH, with mpicxx): required by the build (the host backend, and the cuda
#     backend's MpiWorld). Without it the script stops and says so; the GPU tests run in one
#     process (an MPI singleton, no mpirun), so any MPI library with its headers suffices.
#   - The libraries staged in device-deps/ are Debian bookworm builds (glibc 2.36, libstdc++
#     of GCC 12); on an older distribution the link fails with GLIBC_/GLIBCXX_ version errors,
#     and the script says which library. When device-deps/ is there it is used
#     in place of the system's packages (-D<package>_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
deps="$root/device-deps"

# The staged tree mirrors Debian's layout (include/, lib/x86_64-linux-gnu/, share/cmake/) so that
# the packages' CMake configs, which locate their files relative to themselves, work unchanged.
stage() {
  local arch=x86_64-linux-gnu
  rm -rf "$deps"
  mkdir -p "$deps/include" "$deps/lib/$arch/cmake" "$deps/share/cmake"
  cp -r /usr/include/nlohmann /usr/include/CLI /usr/include/fmt /usr/include/gtest \
    /usr/include/gmock /usr/include/benchmark "$deps/include/"
  cp -r /usr/share/cmake/nlohmann_json /usr/share/cmake/CLI11 "$deps/share/cmake/"
  cp -r /usr/lib/$arch/cmake/fmt /usr/lib/$arch/cmake/GTest /usr/lib/$arch/cmake/benchmark \
    "$deps/lib/$arch/cmake/"
  cp -P /usr/lib/$arch/libfmt.so* /usr/lib/$arch/libgtest*.a /usr/lib/$arch/libgmock*.a \
    /usr/lib/$arch/libbenchmark* "$deps/lib/$arch/"
  du -sh "$deps"
  say "staged $deps; carry it with the working tree to the device machine"
}

# -D<package>_DIR for each staged package the system lacks.
staged_packages() {
  local arch=x86_64-linux-gnu
  [[ -d "$deps" ]] || return 0
  echo "-Dnlohmann_json_DIR=$deps/share/cmake/nlohmann_json"
  echo "-DCLI11_DIR=$deps/share/cmake/CLI11"
  echo "-Dfmt_DIR=$deps/lib/$arch/cmake/fmt"
  echo "-DGTest_DIR=$deps/lib/$arch/cmake/GTest"
  echo "-Dbenchmark_DIR=$deps/lib/$arch/cmake/benchmark"
}

say() { echo "device-check: $*"; }
fail() {
  echo "device-check: FAILED: $*" >&2
  exit 1
}

find_nccl() {
  local python=${PYTHON:-python3}
  if [[ -n "${NCCL_HOME:-}" && -f "$NCCL_HOME/include/nccl.h" ]]; then
    echo "$NCCL_HOME"
    return
  fi
  local cuda_home
  cuda_home=$(dirname "$(dirname "$(command -v nvcc)")")
  if [[ -f "$cuda_home/include/nccl.h" ]]; then
    echo "$cuda_home"
    return
  fi
  local wheel
  wheel=$("$python" -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__) if nvidia.nccl.__file__ else list(nvidia.nccl.__path__)[0])' 2>/dev/null || true)
  if [[ -n "$wheel" && -f "$wheel/include/nccl.h" ]]; then
    echo "$wheel"
    return
  fi
  return 1
}

check() {
  command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
  command -v nvcc >/dev/null || fail "no nvcc on PATH or in /usr/local/cuda/bin"
  nvidia-smi -L || fail "nvidia-smi sees no GPU"
  local python=${PYTHON:-python3}
  for tool in cmake ninja; do
    if ! command -v "$tool" >/dev/null; then
      local bin
      bin=$("$python" -c "import $tool, os; print(os.path.join(os.path.dirname($tool.__file__), 'data', 'bin'))" 2>/dev/null || true)
      [[ -n "$bin" && -x "$bin/$tool" ]] && export PATH="$bin:$PATH"
    fi
    command -v "$tool" >/dev/null || fail "no $tool (PATH, or the python module '$tool')"
  done
  command -v mpicxx >/dev/null || fail "no MPI (mpicxx not found): bucketsim's build needs an \
MPI library with headers (OpenMPI or MPICH); the GPU tests run as a single MPI process"
  local nccl
  nccl=$(find_nccl) || fail "no NCCL: set NCCL_HOME, or install the nvidia-nccl wheel in this python"
  say "nvcc $(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'), NCCL from $nccl"
  export NCCL_HOME="$nccl"
  local build=${BUILD_DIR:-build-device}
  mkdir -p "$build/nccl-link"
  # The wheel ships libnccl.so.2 only; find_library wants libnccl.so.
  if [[ ! -e "$nccl/lib/libnccl.so" ]]; then
    ln -sf "$nccl/lib/libnccl.so.2" "$build/nccl-link/libnccl.so"
  fi
  local prefix=()
  mapfile -t prefix < <(staged_packages)
  export LD_LIBRARY_PATH="$nccl/lib:$deps/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
  cmake -S . -B "$build" -G Ninja -DBUCKETSIM_DEV=ON -DCMAKE_BUILD_TYPE=Release "${prefix[@]}" \
    -DCMAKE_CUDA_ARCHITECTURES=native -DNCCL_LIBRARY="$(
      [[ -e "$nccl/lib/libnccl.so" ]] && echo "$nccl/lib/libnccl.so" || echo "$root/$build/nccl-link/libnccl.so"
    )" -DNCCL_INCLUDE_DIR="$nccl/include" || fail "configure (see above)"
  grep -q "cuda_kernels" "$build/build.ninja" || fail "the cuda backend was not configured"
  cmake --build "$build" -j "$(nproc)" --target bucketsim cuda_backend_test cuda_collective_bench ||
    fail "build (a GLIBC_/GLIBCXX_ error means device-deps/ is too new for this machine)"
  "$build/bucketsim" version
  local log="$build/device-check-tests.log"
  ctest --test-dir "$build" -R 'CudaBackend|SpinCalibration|StreamPlan|CommunicatorPlan|ReduceType|DeviceBufferTable' \
    --output-on-failure >"$log" 2>&1 || {
    cat "$log"
    fail "GPU tests"
  }
  local bench="$build/device-check-bench.txt"
  "$build/bench/cuda_collective_bench" | tee "$bench"
  echo
  echo "== device-check summary"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  grep -E "tests passed|tests failed" "$log"
  echo "skipped tests: $(grep -c "Skipped" "$log" || true)"
  awk '$1 ~ /^[0-9]+$/ && ($1 == 1048576 || $1 == 16777216 || $1 == 268435456) {
         printf "  %10d B  bucketsim %8.2f GB/s  nccl %8.2f GB/s  ratio %.3f\n", $1, $4, $5, $6 }' "$bench"
  recorder_check "$build"
}

# The recorder on CUDA (tools/record_program.py --device cuda): each example model's step is
# measured with torch.cuda.memory_allocated at the marks and torch.cuda.max_memory_allocated per
# phase, its program replayed by bucketsim at world size 1 (exact model) and the two printed
# side by side. Needs a torch with CUDA in $PYTHON; skipped with a line otherwise. Prints, never
# fails the check: the figures are findings (cuBLAS workspaces, for one, are allocated through
# the caching allocator and are in the measured figures, not in a program).
recorder_check() {
  local build=$1 python=${PYTHON:-python3}
  if ! "$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    say "recorder: $python has no torch with CUDA: skipped"
    return 0
  fi
  local out="$build/recorder" examples="$root/tools/examples"
  mkdir -p "$out"
  echo
  echo "== recorder on cuda: predicted (bucketsim, exact, world size 1) against measured"
  local name model wrap
  while read -r name model wrap; do
    # shellcheck disable=SC2086 # $wrap is a list of flags
    if "$python" tools/record_program.py "$examples/$model" --batch "$examples/${model%%:*}:make_batch" \
        $wrap --no-flatten --device cuda --optimizer sgd-momentum -o "$out/$name.json" &&
      "$build/bucketsim" gen program "$out/$name.json" --world-size 1 --iterations 1 --param-dtype fp32 \
        --optimizer sgd-momentum -o "$out/$name.trace.json"; then
      echo "-- $name"
      "$python" tools/predicted_vs_measured.py "$out/$name.trace.json" --measured "$out/$name.json" \
        --bucketsim "$build/bucketsim" || say "recorder: $name: comparison failed"
    else
      say "recorder: $name: recording or gen program failed (see above)"
    fi
  done <<'CASES'
mlp mlp.py:build_model --wrap Layer
mlp-ckpt mlp.py:build_model_checkpointed --wrap Layer
convnet convnet.py:build_model --wrap Sequential --wrap BatchNorm2d --wrap Linear
convnet-ckpt convnet.py:build_model_checkpointed --wrap Sequential --wrap BatchNorm2d --wrap Linear
gpt tiny_gpt.py:build_model --wrap Block
gpt-ckpt tiny_gpt.py:build_model_checkpointed --wrap Block
CASES
}

case "${1:-check}" in
  stage) stage ;;
  check) check ;;
  *) fail "usage: tools/device-check.sh [stage|check]" ;;
esac
