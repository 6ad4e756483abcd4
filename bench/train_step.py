#!/usr/bin/python3
"""One training step of a model, graphrun against PyTorch in the same run.

Runs each side in its own process (so peak RSS is that side's alone) on the
same synthetic data shape, optimizer (SGD with momentum) and thread count, and
prints images/s (median over the measured steps, after warm-up), the ratio, and
peak RSS. Machines are noisy: this prints figures, it asserts nothing.

    bench/train_step.py --model inception_v3 --batch 16 --threads 2 --steps 6

Needs PyTorch and torchvision (Debian: python3-torch python3-torchvision) and a
built graphrun (build/bin/graphrun, or --graphrun PATH).
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

TORCH_STEP = r"""
import json, sys, time, torch, torchvision, resource
model, batch, threads, steps, warmup, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
torch.set_num_threads(threads)
torch.manual_seed(0)
if model == "inception_v3":
    net = torchvision.models.inception_v3(weights=None, aux_logits=False, init_weights=True)
elif model in ("resnet18", "resnet50"):
    net = getattr(torchvision.models, model)(weights=None)
else:
    raise SystemExit("bench: no PyTorch twin for " + model)
net.train()
opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
x = torch.randn(batch, 3, size, size)
y = torch.randint(0, 1000, (batch,))
loss_fn = torch.nn.CrossEntropyLoss()
times = []
for i in range(warmup + steps):
    t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    loss = loss_fn(net(x), y)
    loss.backward()
    opt.step()
    times.append(time.perf_counter() - t0)
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"times": times[warmup:], "rss": rss, "loss": float(loss)}))
"""


def child_rss():
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024


def run_torch(args):
    out = subprocess.run(
        [sys.executable, "-c", TORCH_STEP, args.model, str(args.batch), str(args.threads),
         str(args.steps), str(args.warmup), str(args.image_size)],
        check=True, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS=str(args.threads)))
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_graphrun(args):
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        cmd = [args.graphrun, "train", "--model", args.model, "--batch", str(args.batch),
               "--steps", str(args.warmup + args.steps), "--threads", str(args.threads),
               "--optimizer", "momentum", "--lr", "0.01", "--no-progress",
               "--image-size", str(args.image_size), "--metrics", metrics]
        before = child_rss()
        proc = subprocess.run(cmd, capture_output=True, text=True,
                              env=dict(os.environ, OMP_NUM_THREADS=str(args.threads)))
        if proc.returncode != 0:
            raise SystemExit("graphrun failed:\n" + proc.stdout + proc.stderr)
        rss = child_rss()
        steps = [json.loads(line) for line in open(metrics) if '"step"' in line]
        times = [s["seconds"] for s in steps][args.warmup:]
        return {"times": times, "rss": rss if rss > before else None, "loss": steps[-1]["loss"]}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="inception_v3")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=6, help="measured steps per side")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--image-size", type=int, default=299)
    p.add_argument("--graphrun", default=os.path.join(HERE, "..", "build", "bin", "graphrun"))
    args = p.parse_args()

    # graphrun first: the children's peak RSS is a running maximum.
    ours = run_graphrun(args)
    peer = run_torch(args)
    ips = lambda r: args.batch / statistics.median(r["times"])
    mb = lambda b: "%.0f MB" % (b / 1e6) if b else "n/a"
    print("%s training step, batch %d, %dx%d, %d threads, SGD momentum; median of %d steps after %d warm-up"
          % (args.model, args.batch, args.image_size, args.image_size, args.threads, args.steps, args.warmup))
    print("  %-10s %12s %12s %10s" % ("", "images/s", "s/step", "peak RSS"))
    for name, r in (("graphrun", ours), ("pytorch", peer)):
        print("  %-10s %12.2f %12.3f %10s" % (name, ips(r), statistics.median(r["times"]), mb(r["rss"])))
    print("  ratio graphrun/pytorch (images/s): %.2f" % (ips(ours) / ips(peer)))


if __name__ == "__main__":
    main()
