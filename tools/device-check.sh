#!/usr/bin/env bash
# Builds bucketsim with the cuda backend on a machine with an NVIDIA GPU, runs the GPU tests,
# checks a Llama recorded on meta against the same model recorded on the GPU (event for event)
# and against real FSDP2 steps (max_memory_allocated / max_memory_reserved, expandable segments
# on and off, CPUOffloadPolicy), runs the GPU benchmark and the recorder's small models, and
# prints a summary. NOT YET RUN ON A GPU: the tasks that wrote it had no device; treat its first
# run as the test of the script itself. Budget: under 8 minutes on a 16-core H100 machine (the
# build about 3 of them); DEVICE_CHECK_SKIP="bench recorder" leaves those parts out.
#
# Rehearsed on a CPU machine (no GPU): DEVICE_CHECK_REHEARSE=1 PYTHON="tools/torch2.sh python"
# tools/device-check.sh llama   runs the Llama part with torch on CPU (no memory figures).
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
#   - MPI: optional. With mpicxx the build is the usual one; without it (the lent machines have
#     none) it is configured -DBUCKETSIM_MPI=OFF: one process, the cuda backend on one GPU, the
#     host backend "not compiled" (src/backend/host/single_process.cc). The GPU tests and the
#     benchmark run in one process either way.
#   - Python with torch and CUDA ($PYTHON, default python3): for the recorder and FSDP2 checks
#     (skipped with a line without it). torch 2.6 or later (FSDP2's fully_shard).
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
  local mpi=ON
  if ! command -v mpicxx >/dev/null; then
    mpi=OFF
    say "no MPI (mpicxx): building with -DBUCKETSIM_MPI=OFF (one process, no host backend)"
  fi
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
  # RelWithDebInfo (-O2), as tools/build.sh: GCC 12's -O3 warns falsely (-Wrestrict) in
  # report/console_table.cc, and BUCKETSIM_DEV makes warnings errors.
  cmake -S . -B "$build" -G Ninja -DBUCKETSIM_DEV=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DBUCKETSIM_MPI="$mpi" "${prefix[@]}" \
    -DCMAKE_CUDA_ARCHITECTURES=native -DNCCL_LIBRARY="$(
      [[ -e "$nccl/lib/libnccl.so" ]] && echo "$nccl/lib/libnccl.so" || echo "$root/$build/nccl-link/libnccl.so"
    )" -DNCCL_INCLUDE_DIR="$nccl/include" || fail "configure (see above)"
  grep -q "cuda_kernels" "$build/build.ninja" || fail "the cuda backend was not configured"
  cmake --build "$build" -j "$(nproc)" --target bucketsim cuda_backend_test cuda_collective_bench ||
    fail "build (a GLIBC_/GLIBCXX_ error means device-deps/ is too new for this machine)"
  "$build/bucketsim" version
  local log="$build/device-check-tests.log"
  ctest --test-dir "$build" -L gpu --output-on-failure >"$log" 2>&1 || {
    cat "$log"
    fail "GPU tests"
  }
  grep -E "tests passed|tests failed" "$log"
  echo "skipped tests: $(grep -c "Skipped" "$log" || true)"
  llama_check "$build"
  local bench="$build/device-check-bench.txt"
  if skipped bench; then
    say "bench: skipped (DEVICE_CHECK_SKIP)"
  else
    "$build/bench/cuda_collective_bench" | tee "$bench"
  fi
  echo
  echo "== device-check summary"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  grep -E "tests passed|tests failed" "$log"
  [[ -f "$bench" ]] && awk '$1 ~ /^[0-9]+$/ && ($1 == 1048576 || $1 == 16777216 || $1 == 268435456) {
         printf "  %10d B  bucketsim %8.2f GB/s  nccl %8.2f GB/s  ratio %.3f\n", $1, $4, $5, $6 }' "$bench"
  [[ -f "$build/llama/fsdp2-check.txt" ]] && cat "$build/llama/fsdp2-check.txt"
  if skipped recorder; then
    say "recorder: skipped (DEVICE_CHECK_SKIP)"
  else
    recorder_check "$build"
  fi
}

skipped() { [[ " ${DEVICE_CHECK_SKIP:-} " == *" $1 "* ]]; }

# The Llama of tools/examples/llama.py at a shape one GPU trains at world size 1 (LLAMA_ENV,
# about 0.3e9 parameters): recorded on meta for this GPU (--target cuda --gpu smXY) and on the
# GPU itself (torch's real kernels), the two programs compared event for event
# (tools/device/program_diff.py); then real FSDP2 steps (tools/device/fsdp2_step.py: none and
# full checkpointing with expandable segments off and on, the last unit kept, CPUOffloadPolicy)
# beside bucketsim's prediction from the meta recording (tools/device/fsdp2_check.py). Prints,
# never fails the check: the figures are findings. Without CUDA (DEVICE_CHECK_REHEARSE=1, torch
# on CPU) the same steps run on CPU, without memory figures.
llama_check() {
  local build=$1 python
  read -ra python <<<"${PYTHON:-python3}"
  local out="$build/llama" examples="$root/tools/examples"
  mkdir -p "$out"
  local device
  device=$("${python[@]}" -c 'import torch; print("cuda" if torch.cuda.is_available() else "cpu")' \
    2>/dev/null) || { say "llama: ${python[*]} has no torch: skipped"; return 0; }
  if [[ "$device" == cpu && -z "${DEVICE_CHECK_REHEARSE:-}" ]]; then
    say "llama: ${python[*]} has no torch with CUDA: skipped"
    return 0
  fi
  local gpu=sm90
  [[ "$device" == cuda ]] && gpu=$("${python[@]}" -c \
    'import torch; print("sm%d%d" % torch.cuda.get_device_capability())')
  export LLAMA_ENV=${LLAMA_ENV:-'{"dim": 2048, "n_layers": 4, "n_heads": 16, "n_kv_heads": 4, "vocab": 32000, "multiple_of": 256, "batch": 2, "seq": 2048}'}
  echo
  echo "== llama ($LLAMA_ENV) on $device, recorded for cuda $gpu"
  local record=(tools/record_program.py "$examples/llama.py:build_model"
    --batch "$examples/llama.py:make_batch" --wrap TransformerBlock --no-flatten --dtype bf16
    --optimizer adamw --optimizer-impl foreach --gpu "$gpu")
  "${python[@]}" "${record[@]}" --device meta -o "$out/meta.json" ||
    { say "llama: recording on meta failed"; return 0; }
  if "${python[@]}" "${record[@]}" --device "$device" -o "$out/$device.json"; then
    "${python[@]}" tools/device/program_diff.py "$out/meta.json" "$out/$device.json" \
      --json "$out/program-diff.json" | tee "$out/program-diff.txt" || true
  else
    say "llama: recording on $device failed"
  fi
  local step=(tools/device/fsdp2_step.py "$examples/llama.py:build_model"
    --batch "$examples/llama.py:make_batch" --wrap TransformerBlock --device "$device")
  local measured=() name conf flags
  while read -r name conf flags; do
    [[ "$device" == cpu && "$flags" == *--offload* ]] && continue  # pins memory for a device
    [[ "$conf" == default ]] && conf=""
    # shellcheck disable=SC2086 # $flags is a list of flags
    if PYTORCH_CUDA_ALLOC_CONF="$conf" "${python[@]}" "${step[@]}" $flags \
      --json "$out/step-$name.json" >"$out/step-$name.log" 2>&1; then
      measured+=("$out/step-$name.json")
    else
      tail -5 "$out/step-$name.log"
      say "llama: FSDP2 step $name failed ($out/step-$name.log)"
    fi
  done <<'CASES'
none default --checkpoint none
none-expandable expandable_segments:True --checkpoint none
full default --checkpoint full
full-expandable expandable_segments:True --checkpoint full
full-last-kept default --checkpoint full --last-reshard false
full-offload default --checkpoint full --offload
CASES
  ((${#measured[@]})) || return 0
  "${python[@]}" tools/device/fsdp2_check.py "$out/meta.json" "${measured[@]}" \
    --bucketsim "$build/bucketsim" --json "$out/fsdp2-check.json" | tee "$out/fsdp2-check.txt" ||
    say "llama: fsdp2_check failed"
  "${python[@]}" -c 'import json, sys; m = json.load(open(sys.argv[1]))
print("torch", m["torch"], m.get("gpu", ""), "total_memory", m.get("total_memory_bytes"))' \
    "${measured[0]}" | tee -a "$out/fsdp2-check.txt"
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
  # The Llama part alone, with an existing build (BUILD_DIR, default build-device; or build).
  llama) llama_check "${BUILD_DIR:-build-device}" ;;
  *) fail "usage: tools/device-check.sh [stage|check|llama]" ;;
esac
