#!/bin/bash
# The GPU bundle's runner (scripts/gpu-bundle copies it to the bundle as run.sh; the
# self-extracting run-gpu.sh unpacks the bundle and starts it). On the GPU machine it
#   1. points /tmp/graphc-gpu/{src,build} at the bundle: the test binaries were built with
#      those paths baked in (GRAPHC_SOURCE_DIR, GRAPHC_BINARY_DIR);
#   2. sets LD_LIBRARY_PATH to the bundle's libraries (plus its libstdc++ when the machine's
#      is older than the one the binaries need) and the lib directories of the CUDA pip
#      wheels (nvidia/*/lib: cuDNN, cuBLAS, NCCL), which also go to GRAPHC_CUDA_LIBRARY_PATH;
#   3. runs what the mode asks for, writing under the results folder ($OUT when set, else
#      ./gpu-results): summary.txt, env.txt, sanitizer.txt, bench.txt, bench.json, mpi.txt
#      and logs.tar.gz (every log and gtest XML), so that seven files carry everything.
#
# Usage: run-gpu.sh [MODE...] (default: all), each MODE one of
#   env               the machine, the libraries found, what is missing
#   tests             every test binary, 4 at a time (tests=SUBSTRING: those whose name
#                     contains SUBSTRING, e.g. tests=cuda), after regenerating the references
#                     the bundle leaves out (fixtures.tsv; once per unpacked bundle); the
#                     summary ends with the twins' closest margins (the f16 and bf16 layers
#                     against the CPU kernels, kernels_cuda_tests)
#   sanitizer         compute-sanitizer memcheck on a short inception_v3 training run (1
#                     tower, and 2 logical towers for the own all-reduce), racecheck on our
#                     own kernels, after memcheck of the fp16 and bf16 twin tests and an
#                     fp16 and a bf16 step (sanitizer=fp16: those only); skipped without
#                     compute-sanitizer
#   bench             bench/gpu_bench.py (graphc 1 and 4 towers, CUDA graph, PyTorch eager
#                     and torch.compile); GRAPHC_BENCH_ARGS passes options on
#   train             fp16 and bf16 end to end through graphrun (train.txt): small_cnn_nobn
#                     (fp16 from a loss scale that overflows f16; bf16 unscaled) on GPU 0 and
#                     on an emulated GPU (a CPU device: the GPU hidden, since --emulate on a
#                     GPU machine folds onto the GPU) with the same data and seed, step by
#                     step side by side; then inception_v3 on GPU 0 in fp32, fp16 and bf16
#   profile           graphrun train --profile of inception_v3 (batch 128, --params gpu:0, 5
#                     steps) in fp32, fp16 and bf16: deterministic cuDNN algorithms from the
#                     heuristics (GRAPHC_CUDNN_BENCHMARK=0), measured into a fresh choice file,
#                     read back from it (same metrics expected), and any algorithm measured
#                     (GRAPHC_CUDNN_DETERMINISTIC=0): per-op tables and step breakdowns in
#                     profile.txt, each run's breakdown with its kernels per op type as
#                     breakdown-PRECISION-CHOICE.txt, the choice file as cudnn-algorithms.txt
#   mpi               tests/mpi/mpi_test.py under the machine's mpirun, else the bundle's copy
#                     of Open MPI (scripts/bundle-openmpi): Broadcast and GpuAcrossWorkers
#                     (worker processes of 1 GPU each summing with NCCL against one process
#                     with as many GPUs; needs 2 GPUs, 3 for unlike workers, and a stalled
#                     rank), then GpuRanksSharingOneGpu twice, once per NCCL route for two
#                     ranks on one GPU (NCCL_HOSTID per rank over loopback sockets, and
#                     NCCL_MULTI_RANK_GPU_ENABLE=1): against one process folding 2 logical
#                     GPUs onto it, against CPU devices, and a stalled rank (mpi.txt, with
#                     NCCL's version and transport)
#   graphs            the whole step as one CUDA graph (graphs.txt): inception_v3 through
#                     graphrun on GPU 0 (batch 64, --params gpu:0, 12 steps), and on 4 logical
#                     GPUs folded onto it (mirrored, batch 128), each with --cuda-graphs off
#                     and on (cuDNN's choices shared through one choice file): the run plan
#                     must show no host device (the batch split on the GPU) and say the step
#                     was captured, and the two runs must end in the same checkpoint bit for
#                     bit (the dropout masks of every replayed step are that step's); the
#                     steady step time of each (metrics); then gpu_train_bench (batch 128,
#                     20 steps after 5) with the batch split on the host as before, on the
#                     GPU, and on the GPU as a CUDA graph: images/s and the notes
#   layouts           channels-last activations (layouts.txt): the NHWC-against-NCHW tests
#                     (kernels_cuda_tests ChannelsLastTwin.*: convolutions and their gradients,
#                     pools, concat and split, casts, 16-bit batch norms; cuda_device_tests
#                     ChannelsLastStep.*: three training steps of small_cnn_nobn and
#                     inception_v3), then inception_v3 at batch 128 (--params gpu:0, 4 steps,
#                     --profile) in fp16, bf16 and fp32, each with --gpu-layout nchw and nhwc:
#                     s/step, images/s and the convolutions' ms per step (about 6 minutes)
#   batchnorm         the batch norms (batchnorm.txt, under a minute): their twins against the
#                     CPU kernels (kernels_cuda_tests BatchNormTwin.* and the NHWC-against-NCHW
#                     ChannelsLastTwin.BatchNorms*), then bench/bn_bench at inception_v3's
#                     batch-128 shapes: ms and achieved GB/s against the device's peak memory
#                     bandwidth, ours in f16 NHWC, f16 NCHW and f32 NCHW, and cuDNN's f16 NHWC
#                     BN + ReLU (spatial persistent) where cuDNN 9 is found
#   cpu               the machine's CPU, the GPU hidden (cpu.txt): inception_v3 and resnet18
#                     training at batch 16 on 2 threads (GRAPHC_CPU_THREADS), fp32 against
#                     bf16 (channels-last on AMX, --cpu-layout auto; blocked, as before; kept
#                     off AMX) in alternating rounds, the bf16 reorders per step and GFLOP/s
#                     in each layout (--profile), the vector units'
#                     peak, oneDNN's convolutions by activation format (blocked against
#                     channels-last: does AMX need it?), and where a bf16 and an fp32 step go
#                     per oneDNN implementation (about 10 minutes on 2 threads)
#   calibrate         the GPU calibrated without --emulate (issue 29 point 8, calibrate.txt):
#                     bench/sim_check.py --real on one GPU, inception_v3 299x299, 128 per GPU,
#                     calibrated on inception_v3's own ops at batch 32; the calibrated cluster
#                     file (1-GPU-data-parallel.json, also copied as clusters/<model>.json, the
#                     file to commit: `graphc place --gpus N` then takes that GPU's figures) and
#                     graphc simulate's step against the measured one (within 20% is the bar)
#   all               env tests sanitizer train profile graphs layouts batchnorm calibrate
#                     bench mpi
# Where one command may run only so long (10 minutes, say), run `tests` and
# `sanitizer bench mpi` in separate calls.
set -u
here=$(cd "$(dirname "$0")" && pwd)
results=${OUT:-$PWD/gpu-results}
# One test binary: its log, its XML, one summary line.
run_one() {
  bin=$1 workdir=$2 envs=$3 args=$4
  [ "$envs" = - ] && envs=""
  name=$(basename "$bin")
  start=$(date +%s)
  (
    cd "$workdir" || exit 97
    # A gtest binary writes its XML; another program (a fuzz replay) takes its arguments.
    if [ "$args" = - ]; then
      set -- --gtest_output="xml:$logs/$name.xml"
    else
      # shellcheck disable=SC2086
      set -- $args
    fi
    # shellcheck disable=SC2086
    env $envs timeout "$per_test_timeout" "$bin" "$@" >"$logs/$name.log" 2>&1
  )
  rc=$?
  secs=$(($(date +%s) - start))
  passed=$(grep -a -o '\[  PASSED  \] [0-9]*' "$logs/$name.log" | tail -1 | grep -o '[0-9]*$')
  failed=$(grep -a -o '\[  FAILED  \] [0-9]* test' "$logs/$name.log" | tail -1 | grep -o '[0-9]*' | head -1)
  skipped=$(grep -a -o '\[  SKIPPED \] [0-9]* test' "$logs/$name.log" | tail -1 | grep -o '[0-9]*' | head -1)
  status=ok
  [ "$rc" -ne 0 ] && status="FAILED (exit $rc)"
  [ "$rc" -eq 124 ] && status="TIMED OUT after ${per_test_timeout}s"
  printf '%-34s %-22s passed %4s  failed %4s  skipped %4s  %5ss\n' "$name" "$status" \
    "${passed:-0}" "${failed:-0}" "${skipped:-0}" "$secs"
}

if [ "${1:-}" = __one ]; then
  shift
  run_one "$@"
  exit 0
fi

mkdir -p "$results"
# Logs stay outside the results folder (so that it holds a few files to bring back);
# logs.tar.gz carries them.
logs=${GRAPHC_LOG_DIR:-/tmp/graphc-gpu-logs}
# Kept across calls (each mode overwrites its own logs), so that logs.tar.gz of a later call
# still holds the test logs of an earlier one.
mkdir -p "$logs"
py=${GRAPHC_PYTHON:-python3}
jobs=${GRAPHC_TEST_JOBS:-4}
per_test_timeout=${GRAPHC_TEST_TIMEOUT:-900}
sanitizer_timeout=${GRAPHC_SANITIZER_TIMEOUT:-900}

mkdir -p /tmp/graphc-gpu
ln -sfn "$here/src" /tmp/graphc-gpu/src
ln -sfn "$here/build" /tmp/graphc-gpu/build

# CUDA libraries from pip wheels: every nvidia/*/lib under the Python that has them.
wheel_libs=$("$py" - <<'EOF' 2>/dev/null
import glob, os
try:
    import nvidia
    roots = list(nvidia.__path__)
except Exception:
    roots = []
dirs = []
for r in roots:
    for d in sorted(glob.glob(os.path.join(r, "*", "lib"))):
        if d not in dirs:
            dirs.append(d)
print(":".join(dirs))
EOF
)
libs=$here/lib
need=$(cat "$here/needs-glibcxx" 2>/dev/null || echo "")
system_cxx=$( (ldconfig -p 2>/dev/null | grep -m1 'libstdc++.so.6 ' | sed 's/.*=> //') || true)
cxx_note="the machine's libstdc++ ($system_cxx) has $need"
if [ -n "$need" ] && { [ -z "$system_cxx" ] || ! grep -q -a "$need" "$system_cxx"; }; then
  libs=$libs:$here/lib/fallback
  cxx_note="the machine's libstdc++ lacks $need: using the bundle's"
fi
export LD_LIBRARY_PATH=$libs${wheel_libs:+:$wheel_libs}
# The Python the tests start (the ONNX checker test): this machine's, with its onnx package.
GRAPHC_PYTHON=$(command -v "$py" || echo "$py")
export GRAPHC_PYTHON
export GRAPHC_CUDA_LIBRARY_PATH=$wheel_libs
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
# Open MPI's launcher: the machine's, else the bundle's copy (scripts/bundle-openmpi).
mpi_note="the machine's mpirun"
if ! command -v mpirun >/dev/null && [ -f "$here/ompi/env.sh" ]; then
  # shellcheck disable=SC1091
  . "$here/ompi/env.sh"
  mpi_note="the bundle's mpirun"
fi

run_env() {
  {
    echo "bundle: $here ($(cat "$here/VERSION" 2>/dev/null))"
    echo "date: $(date -u)"
    echo "host: $(uname -a)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) threads;$(grep -m1 -o -w -E 'avx512f|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' ' | sed 's/^/ /')"
    echo "glibc: $(ldd --version 2>&1 | head -1)"
    echo "libstdc++: $cxx_note"
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    echo "python: $(command -v "$py") $("$py" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tail -1)"
    echo "compute-sanitizer: ${sanitizer:-not found}"
    echo "--- nvidia-smi"
    nvidia-smi 2>&1 | head -20
    echo "--- libraries each binary resolves outside the bundle (glibc and the driver are expected)"
    for b in "$here"/build/bin/*; do
      ldd "$b" 2>&1 | grep -v -e "$here" -e linux-vdso -e ld-linux -e 'libc\.so' -e 'libm\.so' \
        -e libpthread -e 'libdl\.so' -e 'librt\.so' -e 'libstdc++' -e 'libgcc_s' |
        sed "s|^|$(basename "$b"): |"
    done
    echo "--- CUDA libraries the search will find"
    for l in libcudnn.so.9 libcublas.so.13 libnccl.so.2; do
      found=""
      for d in $(echo "$wheel_libs" | tr ':' ' '); do
        [ -e "$d/$l" ] && found="$d/$l" && break
      done
      echo "$l: ${found:-not in the wheels (the loader path may still have it)}"
    done
  } >"$results/env.txt" 2>&1
  cat "$results/env.txt"
}

# The references the bundle leaves out (fixtures.tsv: name, working directory, command), made
# here with this machine's Python once per unpacked bundle; a failure is a summary line.
regenerate_references() {
  [ -f "$here/fixtures.tsv" ] || return 0
  while IFS="$(printf '\t')" read -r -a f; do
    name=${f[0]} workdir=${f[1]}
    cmd=("${f[@]:2}")
    [ "${cmd[0]}" = /usr/bin/python3 ] && cmd[0]=$py
    target=${cmd[${#cmd[@]} - 1]}
    if [ -n "$(ls -A "$target" 2>/dev/null)" ]; then
      continue
    fi
    mkdir -p "$workdir"
    start=$(date +%s)
    if (cd "$workdir" && "${cmd[@]}") >"$logs/fixture-$name.log" 2>&1; then
      status=ok
    else
      status="FAILED (see fixture-$name.log)"
    fi
    printf '%-34s %-22s reference data, %5ss\n' "$name" "$status" "$(($(date +%s) - start))" \
      >>"$logs/summary.lines"
  done <"$here/fixtures.tsv"
}

run_tests() {
  filter=${1:-}
  : >"$logs/summary.lines"
  regenerate_references
  # tests.tsv: binary <TAB> working directory <TAB> environment (space-separated K=V)
  # <TAB> arguments of a program that is not a gtest binary; "-" for an empty field
  while IFS="$(printf '\t')" read -r bin workdir envs args; do
    case "$(basename "$bin")" in *"$filter"*) ;; *) continue ;; esac
    printf '%s\t%s\t%s\t%s\n' "$bin" "$workdir" "$envs" "$args"
  done <"$here/tests.tsv" >"$logs/selected.tsv"
  export logs per_test_timeout
  # Each job re-enters this script (xargs cannot call a function).
  while IFS="$(printf '\t')" read -r bin workdir envs args; do
    printf '%s\0%s\0%s\0%s\0' "$bin" "$workdir" "$envs" "$args"
  done <"$logs/selected.tsv" |
    xargs -0 -n 4 -P "$jobs" bash "$here/run.sh" __one >>"$logs/summary.lines"
  {
    echo "graphc GPU bundle: test binaries ($(date -u))"
    sort "$logs/summary.lines"
    awk '{for (i = 1; i <= NF; ++i) { if ($i == "passed") p += $(i + 1);
          if ($i == "failed") f += $(i + 1); if ($i == "skipped") s += $(i + 1) } }
         /FAILED|TIMED/ { bad += 1 }
         END { printf "total: %d passed, %d failed, %d skipped; %d binaries not ok\n", p, f, s, bad }' \
      "$logs/summary.lines"
    echo "failing tests:"
    grep -a -h '^\[  FAILED  \] [A-Za-z_0-9/.]*\.[A-Za-z_0-9/]*' "$logs"/*.log 2>/dev/null |
      grep -v 'listed below' | sort -u | sed 's/^/  /'
    # The twins' margins (tests/common/SumBound.h): the f16 and bf16 layers' worst error as a
    # share of its bound, closest first (a "model" line is the CPU's model of the GPU).
    echo "twin margins, the eight closest to their bounds (kernels_cuda_tests):"
    grep -a -h '^\[ bound    \]' "$logs/kernels_cuda_tests.log" 2>/dev/null |
      sed -n 's/^\[ bound    \] \(.*\): worst \(.*\) = \(.*\) of the bound \(.*\)$/\3\t\1 (worst \2, bound \4)/p' |
      sort -g -r | head -8 | sed 's/^/  /'
  } >"$results/summary.txt"
  cat "$results/summary.txt"
}

run_sanitizer() {
  if [ -z "$sanitizer" ]; then
    echo "compute-sanitizer not found: skipped" | tee "$results/sanitizer.txt"
    return 0
  fi
  bench="$here/build/bin/gpu_train_bench"
  short="--model inception_v3 --batch 4 --image-size 299 --steps 1 --warmup 1"
  : >"$results/sanitizer.txt"
  memcheck() { # name, command...
    log=$logs/memcheck-$1.log
    shift
    timeout "$sanitizer_timeout" "$sanitizer" --tool memcheck --leak-check no \
      --error-exitcode 3 "$@" >"$log" 2>&1
    echo "memcheck, $(basename "$log" .log): exit $? $(grep -a 'ERROR SUMMARY' "$log" | tail -1)" \
      >>"$results/sanitizer.txt"
  }
  # The 16-bit pieces first: the twin tests of the f16 and bf16 layers, checks and gated
  # updates, and an fp16 and a bf16 training step.
  memcheck fp16-kernels "$here/build/bin/kernels_cuda_tests" \
    --gtest_filter='CudaF16.*:CudaBf16.*:CudaLossScale.*:CudaTraining.UpdatesRead*'
  for precision in fp16 bf16; do
    # shellcheck disable=SC2086
    memcheck "$precision-1-tower" "$bench" $short --towers 1 --physical-gpus 1 --precision "$precision"
  done
  [ "$1" = fp16 ] && { cat "$results/sanitizer.txt"; return 0; }
  for towers in 1 2; do
    # shellcheck disable=SC2086
    memcheck "fp32-$towers-towers" "$bench" $short --towers "$towers" --physical-gpus 1
  done
  log=$logs/racecheck.log
  # Our own kernels only (their names carry the graphc namespace); cuDNN and cuBLAS are
  # NVIDIA's to check. The filter option's name changed across releases.
  filter=""
  help=$("$sanitizer" --help 2>&1)
  if echo "$help" | grep -q -- '--kernel-name '; then
    filter="--kernel-name kns=graphc"
  elif echo "$help" | grep -q -- '--kernel-regex'; then
    filter="--kernel-regex kns=graphc"
  elif echo "$help" | grep -q -- '--filter'; then
    filter="--filter kns=graphc"
  fi
  echo "racecheck kernel filter: ${filter:-none found, every kernel checked}" >>"$results/sanitizer.txt"
  # shellcheck disable=SC2086
  timeout "$sanitizer_timeout" "$sanitizer" --tool racecheck --racecheck-report all $filter \
    --error-exitcode 3 "$bench" $short --towers 2 --physical-gpus 1 >"$log" 2>&1
  echo "racecheck (graphc kernels), 2 towers: exit $? $(grep -a -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$log" | tail -1)" \
    >>"$results/sanitizer.txt"
  cat "$results/sanitizer.txt"
}

run_bench() {
  "$py" "$here/src/bench/gpu_bench.py" --bench "$here/build/bin/gpu_train_bench" \
    --out "$results/bench.json" "$@" 2>&1 | tee "$results/bench.txt"
}

run_train() {
  graphrun=$here/build/bin/graphrun
  small="--model small_cnn_nobn --steps 40 --batch 32 --no-eval --gpus 1"
  {
    # fp16 from a loss scale that overflows f16 (steps skipped); bf16 has f32's range and
    # no loss scaling. Each on the GPU and on an emulated GPU, the same data and seed.
    for precision in fp16 bf16; do
      scale=""
      [ "$precision" = fp16 ] && scale="--loss-scale 16777216"
      for where in gpu emulated; do
        # --emulate alone would fold the plan onto this machine's GPU: with no GPU visible
        # it runs the plan's GPU as a CPU device (f16 layers through f32 kernels, bf16
        # through oneDNN's).
        visible=${CUDA_VISIBLE_DEVICES-0} flag=""
        [ "$where" = emulated ] && visible="" flag=--emulate
        echo "--- small_cnn_nobn, $precision${scale:+ from 2^24}, on the $where GPU"
        # shellcheck disable=SC2086
        CUDA_VISIBLE_DEVICES=$visible timeout 300 "$graphrun" train --no-progress $small \
          --precision "$precision" $scale $flag --metrics "$logs/$precision-$where.csv" 2>&1
        echo "exit $?"
      done
      echo "--- $precision step by step: loss and scale on the GPU, then on the emulated GPU (a CPU device)"
      "$py" - "$logs/$precision-gpu.csv" "$logs/$precision-emulated.csv" <<'PY'
import csv, sys
rows = [[r for r in csv.DictReader(open(f)) if r["kind"] == "step"] for f in sys.argv[1:]]
worst = 0.0
for g, e in zip(*rows):
    gl, el = float(g["loss"]), float(e["loss"])
    worst = max(worst, abs(gl - el) / max(abs(el), 1e-12))
    print("step %3s  loss %.6f %.6f  scale %10s %10s  skipped %s %s" % (
        g["step"], gl, el, g.get("loss_scale") or "-", e.get("loss_scale") or "-",
        g.get("skipped_steps") or "-", e.get("skipped_steps") or "-"))
same = all(g.get("skipped_steps") == e.get("skipped_steps") for g, e in zip(*rows))
print("steps %d and %d; largest relative loss difference %.3g; skipped steps %s" % (
    len(rows[0]), len(rows[1]), worst, "the same" if same else "DIFFER"))
PY
    done
    # One model, three precisions, for speed (images/s on the "trained" line).
    for precision in fp32 fp16 bf16; do
      echo "--- inception_v3 on GPU 0, $precision"
      timeout 300 "$graphrun" train --no-progress --model inception_v3 --gpus 1 --batch 64 \
        --steps 20 --no-eval --precision "$precision" --metrics "$logs/inception-$precision.csv" 2>&1
      echo "exit $?"
    done
  } >"$results/train.txt"
  cat "$results/train.txt"
}

run_profile() {
  : >"$results/profile.txt"
  # heur: deterministic algorithms from cuDNN's heuristics (the default before 2026-11-29);
  # find: measured by cudnnFind into a fresh choice file (the default now: f16 and bf16
  # asked under tensor-op math, the workspace budget from free memory); file: the same
  # again, every choice read back from that file (the bind time saved, the same losses bit
  # for bit); any: non-deterministic algorithms allowed, measured. GRAPHC_PROFILE_CHOICES
  # and GRAPHC_PROFILE_PRECISIONS narrow the runs (5 steps of batch 128 each).
  precisions=${GRAPHC_PROFILE_PRECISIONS:-fp32 fp16 bf16}
  for choice in ${GRAPHC_PROFILE_CHOICES:-heur find file any}; do
    det=1 find=1 cache=$logs/cudnn-algorithms.txt
    [ "$choice" = heur ] && find=0
    [ "$choice" = find ] && rm -f "$cache"
    [ "$choice" = any ] && det=0 cache=$logs/cudnn-algorithms-any.txt
    for precision in $precisions; do
      table=$logs/profile-$precision-$choice.txt
      start=$(date +%s%N)
      GRAPHC_CUDNN_DETERMINISTIC=$det GRAPHC_CUDNN_BENCHMARK=$find GRAPHC_CUDNN_CACHE=$cache \
        timeout 300 "$here/build/bin/graphrun" train --no-progress --model inception_v3 \
        --gpus 1 --params gpu:0 --batch 128 --steps 5 --no-eval --precision "$precision" \
        --metrics "$logs/profile-$precision-$choice.csv" \
        --profile "$table" >"$logs/profile-run-$precision-$choice.txt" 2>&1
      rc=$?
      {
        echo "--- $precision, $choice (GRAPHC_CUDNN_DETERMINISTIC=$det GRAPHC_CUDNN_BENCHMARK=$find):" \
          "exit $rc, $((($(date +%s%N) - start) / 1000000)) ms in all," \
          "$(grep -c . "$cache" 2>/dev/null || echo 0) lines in the choice file"
        grep -a -E '^trained|^loss scale|^note' "$logs/profile-run-$precision-$choice.txt"
        sed -n '1,20p' "$table" 2>/dev/null
        # Where all of the step went (docs/cuda.md, "The step breakdown"): the parts here,
        # the kernels per op type too in the kept copy.
        sed -n '/^step breakdown/,/^  total/p' "$logs/profile-run-$precision-$choice.txt"
      } >>"$results/profile.txt"
      sed -n '/^step breakdown/,$p' "$table" >"$results/breakdown-$precision-$choice.txt" 2>/dev/null
    done
  done
  for precision in $precisions; do
    # Steps and losses (columns 2 and 4); the rest are times.
    cut -d, -f2,4 "$logs/profile-$precision-find.csv" >"$logs/losses-$precision-find.txt"
    cut -d, -f2,4 "$logs/profile-$precision-file.csv" >"$logs/losses-$precision-file.txt"
    if [ -s "$logs/losses-$precision-find.txt" ] &&
      cmp -s "$logs/losses-$precision-find.txt" "$logs/losses-$precision-file.txt"; then
      echo "--- $precision: the run from the choice file repeats the measured run's losses exactly"
    else
      echo "--- $precision: the run from the choice file DIFFERS from the measured run (or none ran)"
      diff "$logs/losses-$precision-find.txt" "$logs/losses-$precision-file.txt" | head -5
    fi
  done >>"$results/profile.txt"
  cp "$logs/cudnn-algorithms.txt" "$results/" 2>/dev/null
  cat "$results/profile.txt"
}

# The step as one CUDA graph: captured against issued, the same checkpoints, the step times.
run_graphs() {
  graphrun=$here/build/bin/graphrun
  cache=$logs/cudnn-algorithms-graphs.txt
  rm -f "$cache"
  {
    for shape in "1 gpu:0 64" "4 mirrored 128"; do
      read -r gpus params batch <<<"$shape"
      fold=""
      [ "$gpus" -gt 1 ] && fold=--emulate # logical GPUs folded onto GPU 0
      for mode in off on; do
        tag=$gpus-$mode
        rm -rf "$logs/graphs-ckpt-$tag"
        echo "--- inception_v3, $gpus GPU(s) $fold, --params $params, batch $batch, 12 steps, --cuda-graphs $mode"
        # shellcheck disable=SC2086
        GRAPHC_CUDNN_CACHE=$cache timeout 300 "$graphrun" train --no-progress --no-eval \
          --model inception_v3 --gpus "$gpus" $fold --params "$params" --batch "$batch" \
          --steps 12 --seed 3 --cuda-graphs "$mode" --metrics "$logs/graphs-$tag.csv" \
          --checkpoint "$logs/graphs-ckpt-$tag" >"$logs/graphs-run-$tag.txt" 2>&1
        echo "exit $?"
        grep -a -E '^  devices|^  cuda graph|^trained|^cuda graph|^step time|^note|rror' \
          "$logs/graphs-run-$tag.txt"
      done
      run=$logs/graphs-run-$gpus-on.txt
      if grep -a -q "^cuda graph: this run's second step was captured" "$run"; then
        echo "--- $gpus GPU(s): the step was captured as one CUDA graph"
      else
        echo "--- $gpus GPU(s): the step was NOT captured"
      fi
      if grep -a '^  devices' "$run" | grep -q 'cpu:'; then
        echo "--- $gpus GPU(s): a host device still takes part in the step"
      else
        echo "--- $gpus GPU(s): no host device in the step (the batch split on the GPU)"
      fi
      off=("$logs/graphs-ckpt-$gpus-off"/*.gck) on=("$logs/graphs-ckpt-$gpus-on"/*.gck)
      a=${off[-1]} b=${on[-1]}
      if [ -f "$a" ] && [ -f "$b" ] && cmp -s "$a" "$b"; then
        echo "--- $gpus GPU(s): the captured run ends in the issued run's checkpoint, bit for bit"
      else
        echo "--- $gpus GPU(s): the checkpoints DIFFER (or one is missing): $a $b"
      fi
      "$py" - "$logs/graphs-$gpus-off.csv" "$logs/graphs-$gpus-on.csv" <<'PY'
import csv, sys
runs = [[r for r in csv.DictReader(open(f)) if r["kind"] == "step"] for f in sys.argv[1:]]
for off, on in zip(*runs):
    print("step %3s  loss %-10s %-10s  s %.4f %.4f" % (off["step"], off["loss"], on["loss"],
          float(off["seconds"]), float(on["seconds"])))
def steady(rows):  # steps 3.. (the first is eager, the second is captured)
    s = sorted(float(r["seconds"]) for r in rows[2:])
    return s[len(s) // 2] if s else float("nan")
a, b = steady(runs[0]), steady(runs[1])
print("median step after the second: issued %.4f s, CUDA graph %.4f s (%.2fx)" % (a, b, a / b))
print("losses %s" % ("the same at every step" if all(x["loss"] == y["loss"] for x, y in zip(*runs))
                     else "DIFFER"))
PY
    done
    bench=$here/build/bin/gpu_train_bench
    for variant in "--batch-on-host --cuda-graphs off" "--cuda-graphs off" "--cuda-graphs on"; do
      echo "--- gpu_train_bench inception_v3, batch 128, 20 steps after 5: $variant"
      # shellcheck disable=SC2086
      GRAPHC_CUDNN_CACHE=$cache timeout 300 "$bench" --model inception_v3 --batch 128 \
        --towers 1 --physical-gpus 1 --steps 20 --warmup 5 $variant 2>&1 | tail -1 |
        "$py" -c 'import json, sys
r = json.loads(sys.stdin.read())
print("images/s %.1f, median step %.4f s, devices %s, loss %s; %s" % (r["images_per_s"],
      r["step_median_s"], r["devices"], r["loss"], r["cuda_graph_note"] or "(no note)"))' 2>&1
    done
  } >"$results/graphs.txt"
  cat "$results/graphs.txt"
}

# One test binary of the bundle (as tests.tsv runs it) with a gtest filter.
run_filtered() { # binary-name filter [log-prefix, default layouts]
  line=$(grep -a -m1 "/$1	" "$here/tests.tsv")
  if [ -z "$line" ]; then
    echo "$1: not in the bundle"
    return 0
  fi
  IFS="$(printf '\t')" read -r bin workdir envs _ <<<"$line"
  [ "$envs" = - ] && envs=""
  log=$logs/${3:-layouts}-$1.log
  # shellcheck disable=SC2086
  (cd "$workdir" && env $envs timeout 300 "$bin" --gtest_filter="$2" >"$log" 2>&1)
  echo "$1 $2: exit $? $(grep -a -E '^\[  PASSED  \]|^\[  FAILED  \] [0-9]|^\[  SKIPPED \] [0-9]' "$log" | tr '\n' ' ')"
  grep -a -E '^\[  FAILED  \] [A-Za-z]' "$log" | sort -u | sed 's/^/  /'
}

# Channels-last activations: the equivalence tests, then NCHW against NHWC for speed.
run_layouts() {
  graphrun=$here/build/bin/graphrun
  cache=$logs/cudnn-algorithms-layouts.txt
  {
    run_filtered kernels_cuda_tests 'ChannelsLastTwin.*'
    run_filtered cuda_device_tests '*ChannelsLastStep*'
    for precision in ${GRAPHC_LAYOUT_PRECISIONS:-fp16 bf16 fp32}; do
      for layout in nchw nhwc; do
        tag=$precision-$layout
        start=$(date +%s)
        GRAPHC_CUDNN_CACHE=$cache timeout 240 "$graphrun" train --no-progress --no-eval \
          --model inception_v3 --gpus 1 --params gpu:0 --batch 128 \
          --steps "${GRAPHC_LAYOUT_STEPS:-4}" --precision "$precision" --gpu-layout "$layout" \
          --profile "$logs/layouts-profile-$tag.txt" >"$logs/layouts-run-$tag.txt" 2>&1
        echo "--- inception_v3 batch 128, $precision, --gpu-layout $layout: exit $?," \
          "$(($(date +%s) - start)) s in all"
        grep -a -E '^  gpu layout|^trained|^note|rror' "$logs/layouts-run-$tag.txt"
        grep -a -E '^per-op|^  (Conv|ConvGradData|ConvGradFilter|BatchNormTrain|BatchNormTrainGrad|Cast) ' \
          "$logs/layouts-profile-$tag.txt"
      done
    done
  } >"$results/layouts.txt" 2>&1
  cat "$results/layouts.txt"
}

# The batch norms: their twins, then their speed against the memory's and cuDNN's.
run_batchnorm() {
  {
    run_filtered kernels_cuda_tests 'BatchNormTwin.*:ChannelsLastTwin.BatchNorms*' batchnorm
    echo "--- bn_bench (inception_v3 batch 128)"
    timeout 120 "$here/build/bin/bn_bench"
    echo "exit $?"
  } >"$results/batchnorm.txt" 2>&1
  cat "$results/batchnorm.txt"
}

# The machine's own CPU (the GPU hidden): inception_v3 and resnet18 training at batch 16 on
# 2 threads (GRAPHC_CPU_THREADS), fp32 against bf16 in alternating pairs, bf16 again with
# oneDNN kept off AMX (ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16), then where a bf16 and an fp32
# inception_v3 step go per oneDNN implementation (ONEDNN_VERBOSE: milliseconds and calls).
run_cpu() {
  graphrun=$here/build/bin/graphrun threads=${GRAPHC_CPU_THREADS:-2}
  layout=auto
  train() { # model precision steps [env...]; --cpu-layout $layout
    local model=$1 precision=$2 steps=$3
    shift 3
    env CUDA_VISIBLE_DEVICES="" "$@" timeout 240 "$graphrun" train --no-progress --model "$model" \
      --batch 16 --steps "$steps" --threads "$threads" --no-eval --precision "$precision" \
      --cpu-layout "$layout"
  }
  {
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) threads; flags:$(grep -m1 -o -w -E 'avx2|avx512f|avx512_bf16|amx_bf16|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' ' | sed 's/^/ /')"
    for model in inception_v3 resnet18; do
      for round in 1 2; do
        # bf16: channels-last on AMX (--cpu-layout auto); bf16-blocked: the blocked layout
        # (what ran before); bf16-noamx: oneDNN kept off AMX.
        for precision in fp32 bf16 bf16-blocked bf16-noamx; do
          p=${precision%%-*} cap="" layout=auto
          [ "$precision" = bf16-noamx ] && cap=ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16
          [ "$precision" = bf16-blocked ] && layout=blocked
          echo "--- $model, $precision, round $round: batch 16, $threads threads, 6 steps"
          train "$model" "$p" 6 $cap 2>&1 | grep -a -E '^trained|^step time|cpu layout|refus|error'
        done
        layout=auto
      done
    done
    echo "--- the vector units' peak (bench/cpu_peak), $threads threads"
    timeout 60 "$here/build/bin/cpu_peak" --threads "$threads" --seconds 0.5 2>&1
    echo "--- oneDNN's convolutions by activation format (bench/conv_formats): blocked, channels-last, its choice"
    env CUDA_VISIBLE_DEVICES="" timeout 400 "$here/build/bin/conv_formats" --threads "$threads" \
      --min-seconds 0.1 --dtype both 2>&1
    for layout in auto blocked; do
      echo "--- inception_v3 bf16, --cpu-layout $layout, 4 steps: --profile (reorders per step)"
      env CUDA_VISIBLE_DEVICES="" timeout 240 "$graphrun" train --no-progress --model inception_v3 \
        --batch 16 --steps 4 --threads "$threads" --no-eval --precision bf16 --cpu-layout "$layout" \
        --profile "$results/cpu-profile-bf16-$layout.txt" 2>&1 | grep -a -E '^trained|cpu layout'
      grep -a -E 'layout copies inside kernels|contractions' "$results/cpu-profile-bf16-$layout.txt"
    done
    layout=auto
    for precision in bf16 fp32; do
      echo "--- inception_v3 $precision, 3 steps under ONEDNN_VERBOSE=1: ms per step by primitive, implementation and kind"
      train inception_v3 "$precision" 3 ONEDNN_VERBOSE=1 2>/dev/null | awk -F, '
        $1 == "onednn_verbose" && $2 == "exec" { key = $4 " " $5 " " $6; ms[key] += $NF; n[key]++ }
        END { for (k in ms) printf "%10.1f ms %5d calls  %s\n", ms[k] / 3, n[k] / 3, k }' |
        sort -rn | head -25
    done
  } >"$results/cpu.txt" 2>&1
  cat "$results/cpu.txt"
}

# graphc simulate's 1-GPU inception_v3 step against the measured one, on a calibrated file.
run_calibrate() {
  timeout 900 "$py" "$here/src/bench/sim_check.py" --real --bin "$here/build/bin" --gpus 1 \
    --no-model-parallel --model inception_v3 --image-size 299 --per-gpu 128 --steps 8 \
    --calibrate-with inception_v3:299:32 --memory-gib 130 --keep "$results" 2>&1 |
    tee "$results/calibrate.txt"
  # Named as --gpu-model looks it up (ir/Cluster.h, calibratedClusterFileName).
  "$py" - "$results/1-GPU-data-parallel.json" "$results/clusters" <<'PY' 2>&1 | tee -a "$results/calibrate.txt"
import json, os, re, shutil, sys
model = json.load(open(sys.argv[1]))["calibration"]["gpu"].get("model", "")
slug = re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-")
os.makedirs(sys.argv[2], exist_ok=True)
shutil.copy(sys.argv[1], os.path.join(sys.argv[2], slug + ".json"))
print("calibrated cluster of %s: clusters/%s.json" % (model, slug))
PY
}

# Worker processes under mpirun with NCCL across them: the machine's mpirun, since the bundle
# carries Open MPI's library (the binaries link it) but not its launcher and plug-ins.
run_mpi() {
  mpirun_bin=$(command -v mpirun || true)
  if [ -z "$mpirun_bin" ]; then
    echo "mpi: skipped: no mpirun on this machine and none in the bundle" | tee "$results/mpi.txt"
    return 0
  fi
  : >"$results/mpi.txt"
  # Workers of their own GPUs (2 or more), then two ranks sharing GPU 0 by each NCCL route.
  for route in - hostid multi-rank; do
    classes="GpuRanksSharingOneGpu" log=$logs/mpi-$route.log label=" (route $route)"
    [ "$route" = - ] && classes="Broadcast GpuAcrossWorkers" label=""
    start=$(date +%s)
    # shellcheck disable=SC2086
    (cd "$here/src" && GRAPHC_BIN="$here/build/bin" GRAPHC_MPIRUN="$mpirun_bin" \
      GRAPHC_NCCL_SHARED_ROUTE=${route#-} OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
      timeout "$per_test_timeout" "$py" tests/mpi/mpi_test.py -v $classes) >"$log" 2>&1
    rc=$?
    {
      echo "mpi: tests/mpi/mpi_test.py $classes$label: exit $rc," \
        "$(($(date +%s) - start)) s ($mpi_note: $("$mpirun_bin" --version 2>&1 | head -1))"
      grep -a -E '\.\.\. (ok|FAIL|ERROR|skipped)|^(FAIL|ERROR):|^Ran |^OK|^FAILED|^\[ (nccl|bound)' "$log"
    } >>"$results/mpi.txt"
  done
  cat "$results/mpi.txt"
}

pack_logs() {
  (cd "$logs" && tar -czf "$results/logs.tar.gz" --exclude=selected.tsv --exclude=summary.lines . 2>/dev/null)
}

[ $# -eq 0 ] && set -- all
for mode in "$@"; do
  # shellcheck disable=SC2086
  case "$mode" in
  env) run_env ;;
  tests) run_env >/dev/null; run_tests "" ;;
  tests=*) run_env >/dev/null; run_tests "${mode#tests=}" ;;
  sanitizer) run_sanitizer all ;;
  sanitizer=fp16) run_sanitizer fp16 ;;
  bench) run_bench ${GRAPHC_BENCH_ARGS:-} ;;
  train) run_train ;;
  profile) run_profile ;;
  graphs) run_graphs ;;
  mpi) run_mpi ;;
  cpu) run_cpu ;;
  layouts) run_layouts ;;
  batchnorm) run_batchnorm ;;
  calibrate) run_calibrate ;;
  all) run_env; run_tests ""; run_sanitizer all; run_train; run_profile; run_graphs; run_layouts; run_batchnorm; run_calibrate; run_bench ${GRAPHC_BENCH_ARGS:-}; run_mpi ;;
  *) echo "usage: run-gpu.sh [env|tests|tests=SUBSTRING|sanitizer|sanitizer=fp16|train|profile|graphs|layouts|batchnorm|bench|mpi|cpu|all]..." >&2; exit 2 ;;
  esac
done
pack_logs
