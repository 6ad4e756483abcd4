#!/usr/bin/env python3
"""Training throughput on one GPU: graphc against PyTorch eager and torch.compile.

Runs, each in its own process so that memory figures are its own:
  - graphc (bench/gpu_train_bench): the model on 1 tower, on 4 logical towers
    folded onto the one GPU (mirrored variables, the own all-reduce), and the
    1-tower step captured as a CUDA graph (when the step allows it);
  - PyTorch eager and torch.compile: torchvision's model, the same batch,
    SGD with momentum 0.9, cross-entropy, NCHW float32;
  - mixed precision: graphc --precision fp16 (1 tower) against PyTorch eager
    under autocast(float16) with a GradScaler, both scaling from 65536; and
    graphc --precision bf16 against autocast(bfloat16), neither scaling.
Both sides copy the batch from pinned host memory every step (graphc through
Executor::prefetch, PyTorch with non_blocking copies) and allow TF32 in
convolutions and matrix products (graphc's default; GRAPHC_CUDA_TF32=0 and
--no-tf32 turn it off on both sides). PyTorch runs with cudnn.benchmark on,
as its users do.

Prints a table (images/s of the median step, ratios to PyTorch, GPU memory)
and writes every measurement as JSON to --out (default: $OUT/bench.json or
./bench.json). Machines are noisy: it prints figures, it asserts nothing.

    bench/gpu_bench.py --bench build/bin/gpu_train_bench --batch 128 --steps 20
"""
import argparse
import json
import os
import subprocess
import sys

TORCH_STEP = r"""
import json, sys, time, torch, torchvision
model, batch, size, steps, warmup, mode, tf32 = (sys.argv[1], int(sys.argv[2]), int(sys.argv[3]),
    int(sys.argv[4]), int(sys.argv[5]), sys.argv[6], sys.argv[7] == "1")
amp = mode in ("amp", "ampbf16")
amp_dtype = torch.bfloat16 if mode == "ampbf16" else torch.float16
scaler = torch.cuda.amp.GradScaler(init_scale=65536.0, enabled=mode == "amp")
torch.backends.cudnn.benchmark = True
torch.backends.cudnn.allow_tf32 = tf32
torch.backends.cuda.matmul.allow_tf32 = tf32
torch.manual_seed(0)
dev = torch.device("cuda")
free0, total = torch.cuda.mem_get_info()
if model == "inception_v3":
    net = torchvision.models.inception_v3(weights=None, aux_logits=False, init_weights=True)
else:
    net = getattr(torchvision.models, model)(weights=None)
net = net.to(dev).train()
opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
loss_fn = torch.nn.CrossEntropyLoss()
step_net = torch.compile(net) if mode == "compile" else net
x_host = torch.rand(batch, 3, size, size).mul_(2).sub_(1).pin_memory()
y_host = (torch.arange(batch) * 7919 % 1000).pin_memory()
times = []
t_compile = None
for i in range(warmup + steps):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    x = x_host.to(dev, non_blocking=True)
    y = y_host.to(dev, non_blocking=True)
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=amp_dtype, enabled=amp):
        loss = loss_fn(step_net(x), y)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    if i == 0:
        t_compile = dt
    if i >= warmup:
        times.append(dt)
free1, _ = torch.cuda.mem_get_info()
print(json.dumps({"times": times, "loss": float(loss), "first_step_s": t_compile,
                  "max_allocated": torch.cuda.max_memory_allocated(),
                  "max_reserved": torch.cuda.max_memory_reserved(),
                  "in_use": free0 - free1, "torch": torch.__version__,
                  "gpu": torch.cuda.get_device_name(0)}))
"""


def median(xs):
    s = sorted(xs)
    return s[len(s) // 2]


def run_graphc(args, towers, graphs, env, precision="fp32"):
    cmd = [args.bench, "--model", args.model, "--batch", str(args.batch), "--image-size",
           str(args.image_size), "--towers", str(towers), "--physical-gpus", "1",
           "--steps", str(args.steps), "--warmup", str(args.warmup), "--precision", precision]
    cmd += ["--cuda-graphs", "on" if graphs else "off"]
    label = "graphc, %d tower%s%s%s" % (towers, "" if towers == 1 else "s on 1 GPU",
                                        ", CUDA graph" if graphs else "",
                                        "" if precision == "fp32" else ", " + precision)
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, env=env,
                             timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"runner": label, "error": "timed out after %d s" % args.timeout}
    if out.returncode != 0:
        return {"runner": label, "error": (out.stderr or out.stdout).strip()[-2000:]}
    r = json.loads(out.stdout.strip().splitlines()[-1])
    r["runner"] = label
    r["memory"] = r["gpu_bytes_in_use"]
    r["amp"] = precision if precision != "fp32" else "fp16"
    return r


def run_torch(args, mode):
    label = {"eager": "PyTorch eager", "compile": "torch.compile",
             "amp": "PyTorch eager, AMP fp16", "ampbf16": "PyTorch eager, AMP bf16"}[mode]
    cmd = [args.python, "-c", TORCH_STEP, args.model, str(args.batch), str(args.image_size),
           str(args.steps), str(args.warmup), mode, "0" if args.no_tf32 else "1"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"runner": label, "error": "timed out after %d s" % args.timeout}
    if out.returncode != 0:
        return {"runner": label, "error": (out.stderr or out.stdout).strip()[-2000:]}
    r = json.loads(out.stdout.strip().splitlines()[-1])
    m = median(r["times"])
    r.update({"runner": label, "images_per_s": args.batch / m, "step_median_s": m,
              "memory": r["max_reserved"], "amp": "bf16" if mode == "ampbf16" else "fp16"})
    return r


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    p.add_argument("--bench", default=os.path.join(here, "..", "build", "bin", "gpu_train_bench"))
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--model", default="inception_v3")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--image-size", type=int, default=299)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--timeout", type=int, default=900)
    p.add_argument("--no-tf32", action="store_true")
    p.add_argument("--only", default="all",
                   help="comma list of: graphc1, graphc4, graphs, eager, compile, fp16, amp, "
                        "bf16, ampbf16 (default all)")
    p.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "bench.json"))
    args = p.parse_args()
    want = set(args.only.split(",")) if args.only != "all" else {
        "graphc1", "graphc4", "graphs", "eager", "compile", "fp16", "amp", "bf16", "ampbf16"}

    env = dict(os.environ)
    if args.no_tf32:
        env["GRAPHC_CUDA_TF32"] = "0"
    results = []
    for key, fn in [("graphc1", lambda: run_graphc(args, 1, False, env)),
                    ("graphc4", lambda: run_graphc(args, 4, False, env)),
                    ("graphs", lambda: run_graphc(args, 1, True, env)),
                    ("eager", lambda: run_torch(args, "eager")),
                    ("compile", lambda: run_torch(args, "compile")),
                    ("fp16", lambda: run_graphc(args, 1, False, env, "fp16")),
                    ("amp", lambda: run_torch(args, "amp")),
                    ("bf16", lambda: run_graphc(args, 1, False, env, "bf16")),
                    ("ampbf16", lambda: run_torch(args, "ampbf16"))]:
        if key in want:
            print("running %s ..." % key, flush=True)
            results.append(fn())

    eager = next((r for r in results if r["runner"] == "PyTorch eager" and "error" not in r), None)
    comp = next((r for r in results if r["runner"] == "torch.compile" and "error" not in r), None)
    # "vs AMP": against PyTorch's autocast in the row's own 16-bit type (fp16 for f32 rows).
    amps = {t: next((r for r in results if r["runner"] == "PyTorch eager, AMP " + t and
                     "error" not in r), None) for t in ("fp16", "bf16")}
    print("\n%s, batch %d, %dx%d, %d measured steps after %d warm-up, TF32 %s" %
          (args.model, args.batch, args.image_size, args.image_size, args.steps, args.warmup,
           "off" if args.no_tf32 else "on"))
    print("%-34s %10s %9s %11s %9s %10s" % ("runner", "images/s", "vs eager", "vs compile",
                                             "vs AMP", "GPU GiB"))
    for r in results:
        if "error" in r:
            print("%-34s failed: %s" % (r["runner"], r["error"].splitlines()[-1][:200]))
            continue
        ips = r["images_per_s"]
        ve = "%.2fx" % (ips / eager["images_per_s"]) if eager else "-"
        vc = "%.2fx" % (ips / comp["images_per_s"]) if comp else "-"
        amp = amps.get(r.get("amp", "fp16"))
        va = "%.2fx" % (ips / amp["images_per_s"]) if amp else "-"
        print("%-34s %10.1f %9s %11s %9s %10.2f" % (r["runner"], ips, ve, vc, va,
                                                     r["memory"] / 2**30))
        if "skipped_steps" in r:
            print("    loss scale %g after the run, %d steps skipped" %
                  (r["loss_scale"], r["skipped_steps"]))
        if r.get("cuda_graph_note"):
            print("    " + r["cuda_graph_note"])
    print("GPU memory: graphc = driver view of everything it holds (arenas, variables, "
          "staging, library workspaces); PyTorch = its allocator's peak reserved bytes.")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"args": vars(args), "results": results}, f, indent=1)
    print("wrote " + args.out)


if __name__ == "__main__":
    main()
