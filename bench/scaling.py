#!/usr/bin/python3
"""Scaling table: graphrun training throughput at 1, 2, 4, 8 devices.

For each device count N, trains N towers with the same global batch
(`graphrun train --gpus N`, adding `--emulate` where asked) and prints
images/s (median over the measured steps, after warm-up), the speed-up over
one device, the efficiency, and where a tower device's step goes (kernels,
collectives, copies, waits, host, launch gaps: graphrun's step breakdown),
plus the host's wait for input. A step whose input wait exceeds a
tenth of it is flagged: the input pipeline is the bottleneck there.

    bench/scaling.py --model inception_v3 --batch 16 --devices 1,2,4,8 --emulate

On real GPUs the efficiency is speed-up / N. With --emulate on a machine
without GPUs the N devices share the same CPU cores, so the ideal is the same
throughput at every N and the efficiency printed is speed-up / 1. Machines are
noisy: this prints figures, it asserts nothing.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


PARTS = ("kernels", "collectives", "copies", "waits", "host", "gaps")


def breakdown(text):
    """graphrun's step breakdown table: device -> ms per step in kernels, collectives, copies (h2d,
    d2d and d2h together), waits, host and gaps (launch gaps and other)."""
    lines = text.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith("step breakdown")), None)
    if start is None:
        return {}
    columns = lines[start + 1].split()[1:]  # "part", then "step" and the devices
    rows = {c: dict.fromkeys(PARTS, 0.0) for c in columns}
    merged = {"copies h2d": "copies", "copies d2d": "copies", "copies d2h": "copies",
              "launch gaps": "gaps", "other": "gaps"}
    for line in lines[start + 2:]:
        m = re.match(r"^  (\w[\w ]*?)((?: +[\d.]+ +[\d.]+%)+)$", line)
        if not m or m.group(1) == "total":
            break
        part = merged.get(m.group(1), m.group(1))
        figures = [float(v) for v in re.findall(r"([\d.]+) +[\d.]+%", m.group(2))]
        if part in PARTS:
            for c, v in zip(columns, figures):
                rows[c][part] += v
    rows.pop("step", None)
    return rows


def run(args, devices, tmp):
    metrics = os.path.join(tmp, "m%d.jsonl" % devices)
    profile = os.path.join(tmp, "p%d.txt" % devices)
    cmd = [args.graphrun, "train", "--model", args.model, "--batch", str(args.batch),
           "--steps", str(args.warmup + args.steps), "--threads", str(args.threads),
           "--no-progress", "--no-eval", "--metrics", metrics, "--profile", profile,
           "--gpus", str(devices), "--params", args.params]
    if args.emulate:
        cmd.append("--emulate")
    cmd += args.extra
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("scaling: %s failed:\n%s%s" % (" ".join(cmd), p.stdout, p.stderr))
    steps = [json.loads(l) for l in open(metrics) if '"kind":"step"' in l]
    measured = steps[args.warmup:]
    seconds = statistics.median(s["seconds"] for s in measured)
    input_wait = statistics.median(s.get("input_wait", 0) for s in measured)
    rows = breakdown(p.stdout)
    towers = [r for d, r in rows.items() if d != "cpu:0" or len(rows) == 1]
    mean = {k: statistics.mean(r[k] for r in towers) for k in PARTS} if towers else {}
    return dict(devices=devices, seconds=seconds, ips=args.batch / seconds, input_wait=input_wait, towers=mean)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="inception_v3")
    ap.add_argument("--batch", type=int, default=16, help="global batch, the same at every device count")
    ap.add_argument("--devices", default="1,2,4,8")
    ap.add_argument("--params", default="mirrored", help="cpu | gpu:K | spread | mirrored")
    ap.add_argument("--emulate", action="store_true", help="run the devices as CPU devices (or on fewer GPUs)")
    ap.add_argument("--steps", type=int, default=4, help="measured steps per device count")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--graphrun", default=os.path.join(HERE, "..", "build", "bin", "graphrun"))
    ap.add_argument("extra", nargs="*", help="more graphrun train options, after --")
    args = ap.parse_args()
    counts = [int(c) for c in args.devices.split(",")]

    with tempfile.TemporaryDirectory(prefix="graphc-scaling-") as tmp:
        results = [run(args, n, tmp) for n in counts]
    base = next(r for r in results if r["devices"] == counts[0])
    print("%s, global batch %d, --params %s%s, %d threads; median of %d steps after %d warm-up"
          % (args.model, args.batch, args.params, ", emulated" if args.emulate else "", args.threads,
             args.steps, args.warmup))
    print("per tower device, ms per step (graphrun's step breakdown): kernels, collectives, copies, waits for "
          "other devices, the host's own work, launch gaps")
    print("%8s %9s %8s %10s %9s %8s %8s %8s %8s %8s  %s"
          % ("devices", "images/s", "speed-up", "efficiency", *PARTS, "host input wait"))
    for r in results:
        speedup = r["ips"] / base["ips"]
        ideal = 1 if args.emulate else r["devices"] / base["devices"]
        t = r["towers"]
        flag = "  input-bound" if r["input_wait"] > 0.1 * r["seconds"] else ""
        print("%8d %9.2f %8.2f %9.0f%% %9.1f %8.1f %8.1f %8.1f %8.1f %8.1f  %.1f ms%s"
              % (r["devices"], r["ips"], speedup, 100 * speedup / ideal, *(t.get(k, 0) for k in PARTS),
                 1e3 * r["input_wait"], flag))
    if args.emulate:
        print("(emulated devices share this machine's cores: the ideal is the same images/s at every count)")


if __name__ == "__main__":
    main()
