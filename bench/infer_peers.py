#!/usr/bin/env python3
"""graphrun infer against ONNX Runtime on the same ONNX files, threads and inputs, in one run.

    bench/setup-peers                      # once: ONNX Runtime (and the training peers) from PyPI
    bench/infer_peers.py                   # inception_v3 and resnet18, batch 1 and 16, 2 threads
    bench/infer_peers.py --models resnet18 --batches 1 --runs 50
    ONEDNN_MAX_CPU_ISA=AVX2 bench/infer_peers.py

The models are torchvision's inception_v3 (aux_logits=False) and resnet18 with random weights
in eval mode, exported to ONNX (opset 17, dynamic batch) by Debian's PyTorch (/usr/bin/python3,
the project's numerics reference) or, without it, by the current interpreter's. Both sides read
the same file and the same random input:

  graphrun     build/bin/graphrun infer MODEL --input x.npy --threads T --repeat N
  onnxruntime  InferenceSession, CPU provider, every graph optimization, T intra-op threads,
               1 inter-op thread, sequential execution

Each side runs once untimed (oneDNN and ONNX Runtime set up their kernels there), then N timed
runs; the figure is the median. Latency at batch 1, throughput at batch 16. The ratio is ONNX
Runtime's median time over graphrun's: above 1, graphrun is faster. The two sides' outputs are
compared (largest difference relative to the largest logit) so the rows are known to compute
the same thing. Machines are noisy: this prints figures and asserts nothing.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import peers

MODELS = {"inception_v3": 299, "resnet18": 224}

EXPORT = r"""
import sys, torch, torchvision
name, size, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
torch.manual_seed(0)
kwargs = {"aux_logits": False, "init_weights": True} if name == "inception_v3" else {}
model = getattr(torchvision.models, name)(weights=None, **kwargs).eval()
extra = {"dynamo": False} if int(torch.__version__.split(".")[0]) >= 2 else {}
torch.onnx.export(model, torch.randn(1, 3, size, size), path, opset_version=17,
                  input_names=["input"], output_names=["logits"],
                  dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}}, **extra)
"""


def export(name, path):
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    for exe in dict.fromkeys([python, sys.executable]):
        p = subprocess.run([exe, "-c", EXPORT, name, str(MODELS[name]), path], capture_output=True, text=True)
        if p.returncode == 0:
            return None
        error = (p.stderr.strip().splitlines() or ["no output"])[-1]
    return "export failed: " + error


def run_graphrun(args, model, x_path, out_path):
    cmd = [args.graphrun, "infer", model, "--input", x_path, "-o", out_path, "--threads",
           str(args.threads), "--repeat", str(args.runs)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS=str(args.threads)))
    m = re.search(r"median ([\d.]+) ms, min ([\d.]+) ms", p.stdout)
    if p.returncode != 0 or not m:
        return {"error": (p.stderr.strip().splitlines() or ["no output"])[-1]}
    return {"median_ms": float(m.group(1)), "min_ms": float(m.group(2))}


def run_onnxruntime(args, model, x):
    try:
        import onnxruntime as ort
    except ImportError as e:
        return {"error": "onnxruntime is not installed (bench/setup-peers): %s" % e}, None
    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    feeds = {session.get_inputs()[0].name: x}
    out = session.run(None, feeds)[0]
    times = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        out = session.run(None, feeds)[0]
        times.append((time.perf_counter() - t0) * 1000)
    return {"median_ms": statistics.median(times), "min_ms": min(times), "version": ort.__version__}, out


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="inception_v3,resnet18")
    p.add_argument("--batches", default="1,16")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--runs", type=int, default=20, help="timed runs per side after one warm-up")
    p.add_argument("--graphrun", default=os.path.normpath(os.path.join(peers.HERE, "..", "build", "bin", "graphrun")))
    args = p.parse_args()
    args.models = [m for m in args.models.split(",") if m]
    bad = [m for m in args.models if m not in MODELS]
    if bad:
        p.error("unknown model %s; the models are %s" % (",".join(bad), ",".join(MODELS)))
    try:
        args.batches = [int(b) for b in args.batches.split(",") if b]
    except ValueError:
        p.error("--batches takes comma-separated integers")
    if args.threads < 1 or args.runs < 1 or not args.batches or min(args.batches) < 1:
        p.error("--threads, --runs and every batch must be at least 1")
    return args


def main():
    args = parse_args()
    peers.reexec_into_venv(os.path.abspath(__file__))
    import numpy as np
    isa, onednn = peers.isa_summary()
    print("inference, median of %d runs after one warm-up, %d threads" % (args.runs, args.threads))
    print("cpu: %s (%d logical CPUs); ISA: %s; %s" % (peers.cpuinfo_field("model name") or "unknown CPU",
                                                     os.cpu_count() or 0, isa, onednn))
    print("  %-13s %5s %12s %12s %12s %12s %9s %10s" % ("model", "batch", "graphrun ms", "ort ms",
                                                      "graphrun i/s", "ort i/s", "ort/ours", "max diff"))
    version = None
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            model = os.path.join(tmp, name + ".onnx")
            error = export(name, model)
            if error:
                print("  %-13s error: %s" % (name, error))
                continue
            for batch in args.batches:
                rng = np.random.default_rng(batch)
                x = rng.standard_normal((batch, 3, MODELS[name], MODELS[name]), dtype=np.float32)
                x_path, out_path = os.path.join(tmp, "x.npy"), os.path.join(tmp, "y.npy")
                np.save(x_path, x)
                ours = run_graphrun(args, model, x_path, out_path)
                theirs, ort_out = run_onnxruntime(args, model, x)
                version = theirs.get("version", version)
                if "error" in ours or "error" in theirs:
                    print("  %-13s %5d error: %s" % (name, batch, ours.get("error") or theirs.get("error")))
                    continue
                got = np.load(out_path)
                diff = float(np.abs(got - ort_out).max() / max(np.abs(ort_out).max(), 1e-30))
                print("  %-13s %5d %12.2f %12.2f %12.1f %12.1f %9.2f %10.1e" % (
                    name, batch, ours["median_ms"], theirs["median_ms"], 1000 * batch / ours["median_ms"],
                    1000 * batch / theirs["median_ms"], theirs["median_ms"] / ours["median_ms"], diff))
    print("onnxruntime %s; graphrun %s" % (version or "n/a", args.graphrun))


if __name__ == "__main__":
    main()
