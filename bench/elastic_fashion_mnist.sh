#!/usr/bin/env bash
# Issue 33's elastic figure: small_cnn on Fashion-MNIST, one epoch of a global batch of 256, on
# scripts/two-hosts' 2 hosts x 2 workers under `graphrun launch --elastic 2:4`; once the chief
# has written the checkpoint of a random step (20 to 120, every 20), node1 dies: every process
# in its namespace killed and its link set down, so it does not answer the next probe. The job
# goes on on node0's 2 workers; its test accuracy is compared with the same epoch run
# uninterrupted on 2 hosts x 2 workers and in one process (docs/multi-worker.md, "Elastic runs").
#
#   bench/elastic_fashion_mnist.sh [OUT-DIR]      (as root; build/ built; needs the data set)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$(mktemp -d /tmp/graphc-elastic.XXXXXX)}
graphrun=$root/build/bin/graphrun
train=(--model small_cnn --data fashion-mnist --batch 256 --epochs 1 --seed 7 --threads 1 --no-progress)
mkdir -p "$out"
rm -rf "$out/ckpt"
kill_at=$(((RANDOM % 6 + 1) * 20))
echo "node1 dies once the checkpoint of step $kill_at is written; output in $out"

start=$(date +%s)
"$root/scripts/two-hosts" --run sh -c \
  'exec "$0" launch --mpirun "$GRAPHC_TWO_HOSTS_MPIRUN" --hostfile "$GRAPHC_TWO_HOSTS_HOSTFILE" "$@"' \
  "$graphrun" --elastic 2:4 --probe-timeout 5 -- "${train[@]}" --checkpoint "$out/ckpt" \
  --checkpoint-every 20 --metrics "$out/elastic.jsonl" >"$out/elastic.out" 2>&1 &
launch=$!
while kill -0 "$launch" 2>/dev/null; do
  step=$(sed -n 's/^step-0*\([0-9][0-9]*\)\.gck$/\1/p' "$out/ckpt/latest" 2>/dev/null || true)
  if [ -n "$step" ] && [ "$step" -ge "$kill_at" ]; then
    ns=$(sed -n 's/^two-hosts: node1 is namespace \([^,]*\), link \(.*\)$/\1/p' "$out/elastic.out")
    link=$(sed -n 's/^two-hosts: node1 is namespace \([^,]*\), link \(.*\)$/\2/p' "$out/elastic.out")
    echo "node1 dies after the checkpoint of step $step, $(($(date +%s) - start)) s in"
    ip -n "$ns" link set "$link" down
    kill -9 $(ip netns pids "$ns") 2>/dev/null || true
    break
  fi
  sleep 0.2
done
wait "$launch"
echo "elastic run: $(($(date +%s) - start)) s"
grep -E '^graphrun launch:|test accuracy' "$out/elastic.out"

start=$(date +%s)
"$root/scripts/two-hosts" -np 4 "$graphrun" train "${train[@]}" >"$out/four.out" 2>&1
echo "2 hosts x 2 workers, uninterrupted: $(($(date +%s) - start)) s; $(grep 'test accuracy' "$out/four.out")"
start=$(date +%s)
"$graphrun" train "${train[@]}" >"$out/one.out" 2>&1
echo "one process: $(($(date +%s) - start)) s; $(grep 'test accuracy' "$out/one.out")"
