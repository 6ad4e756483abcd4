#!/usr/bin/env python3
"""graphrun across worker processes against TensorFlow's MultiWorkerMirroredStrategy, in one run.

    bench/setup-peers                  # once: TensorFlow (and the other peers) from PyPI
    bench/multi_worker.py              # inception_v3 149x149, global batch 16, 1, 2 and 4 workers
    bench/multi_worker.py --workers 1,2 --steps 10 --json mw.json

Both sides train the same model (inception_v3 without its auxiliary head, as bench/peers.py
builds it: graphrun's own and Keras' InceptionV3, cross-entropy on the logits, SGD momentum 0.9
lr 0.01) on random input, with the same global batch split evenly over W worker processes on
this machine, each worker one device:

  graphrun    mpirun -np W graphrun train --workers W --gpus 1 --emulate (one emulated device
              per worker, mirrored variables, gradients summed across workers with MPI);
              step times and their split (compute, communication inside a worker and between
              workers, input staging) from the chief's --metrics file
  tensorflow  W Python processes with TF_CONFIG naming W workers on localhost ports, each
              creating MultiWorkerMirroredStrategy (ring all-reduce over gRPC) and running a
              tf.function step under strategy.run on its part of every global batch (the
              loss averaged over the global batch, Keras' optimizer summing the gradients
              across replicas); step times on the chief (worker 0), each step ending when its
              loss is read

Every worker gets --threads-total / W compute threads (at least 1) on both sides, so W workers
share the machine's cores as W machines would not: on one machine more workers cannot be
faster, and the table says what the work across processes costs. The ratio is graphrun's
images/s over TensorFlow's with the same workers: above 1, graphrun is faster. s/step is the
median over --steps after --warmup steps. Machines are noisy: this prints figures and asserts
nothing.

The script runs under bench/.venv's Python, re-executing itself there when started with
another one.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import peers

THIS = os.path.abspath(__file__)
LR, MOMENTUM = peers.LR, peers.MOMENTUM
SPLIT = ("compute", "intra_worker", "inter_worker", "input_staging")


def mpi_env(threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    if os.geteuid() == 0:  # Open MPI refuses root unless told both of these
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return env


def run_graphrun(args, workers):
    if not os.access(args.graphrun, os.X_OK):
        return peers.failure("not built: %s (scripts/build builds it)" % args.graphrun)
    threads = max(1, args.threads_total // workers)
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "metrics.jsonl")
        cmd = [args.mpirun, "--oversubscribe", "-np", str(workers), args.graphrun, "train",
               "--model", "inception_v3", "--image-size", str(args.image_size),
               "--batch", str(args.batch), "--workers", str(workers), "--gpus", "1", "--emulate",
               "--steps", str(args.warmup + args.steps), "--threads", str(threads),
               "--optimizer", "momentum", "--lr", str(LR), "--no-progress", "--no-eval",
               "--metrics", metrics]
        code, out, err, _ = peers.run_process(cmd, mpi_env(threads))
        if code != 0 or not os.path.exists(metrics):
            return peers.process_error(code, out, err)
        with open(metrics) as f:
            steps = [r for r in map(json.loads, f) if r.get("kind") == "step"]
    measured = steps[args.warmup:]
    result = {"times": [s["seconds"] for s in steps], "loss": steps[-1]["loss"] if steps else None}
    if measured:
        result["split"] = {k: statistics.median(s.get(k, 0.0) for s in measured) for k in SPLIT}
    return result


# ---------------------------------------------------------------------------------------------
# TensorFlow: one child process per worker.


def tf_worker(args):
    ports = [int(p) for p in args.ports.split(",")]
    os.environ["TF_CONFIG"] = json.dumps({
        "cluster": {"worker": ["localhost:%d" % p for p in ports]},
        "task": {"type": "worker", "index": args.worker}})
    import tensorflow as tf

    threads = max(1, args.threads_total // len(ports))
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.keras.utils.set_random_seed(0)
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    size = args.image_size
    with strategy.scope():
        model = peers.keras_model("inception_v3", size)
        opt = tf.keras.optimizers.SGD(learning_rate=LR, momentum=MOMENTUM)
        opt.build(model.trainable_variables)  # its slots exist before the traced step needs them
    per_sample = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")

    def dataset(context):
        batch = context.get_per_replica_batch_size(args.batch)
        x = tf.random.normal((batch, size, size, 3), seed=context.input_pipeline_id)
        y = tf.random.uniform((batch,), 0, 1000, dtype=tf.int32, seed=context.input_pipeline_id)
        return tf.data.Dataset.from_tensors((x, y)).repeat()

    def replica_step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(per_sample(y, model(x, training=True)),
                                              global_batch_size=args.batch)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))  # sums across replicas
        return loss

    @tf.function
    def train_step(batch):
        losses = strategy.run(replica_step, args=batch)
        return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

    batches = iter(strategy.distribute_datasets_from_function(dataset))
    times, loss = peers.timed_steps(lambda: float(train_step(next(batches))),
                                    args.warmup + args.steps)
    if args.worker == 0:
        print(peers.RESULT_MARK + json.dumps({"times": times, "loss": loss,
                                              "info": peers.tf_info()}), flush=True)


def free_ports(count):
    """Ports free now on localhost (the workers bind them a moment later)."""
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def run_tf(args, workers):
    ports = ",".join(map(str, free_ports(workers)))
    env = dict(os.environ, OMP_NUM_THREADS=str(max(1, args.threads_total // workers)))
    env.pop("TF_CONFIG", None)
    procs = []
    with tempfile.TemporaryDirectory() as tmp:
        for w in range(workers):
            out, err = (open(os.path.join(tmp, "%d.%s" % (w, s)), "w+") for s in ("out", "err"))
            cmd = [sys.executable, THIS, "--child-worker", str(w), "--ports", ports,
                   "--image-size", str(args.image_size), "--batch", str(args.batch),
                   "--threads-total", str(args.threads_total), "--steps", str(args.steps),
                   "--warmup", str(args.warmup)]
            procs.append((subprocess.Popen(cmd, stdout=out, stderr=err, env=env, text=True), out, err))
        deadline = time.monotonic() + args.timeout
        codes = []
        for proc, _, _ in procs:
            try:
                codes.append(proc.wait(timeout=max(1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                for p, _, _ in procs:
                    p.kill()
                return peers.failure("workers did not finish within %d s" % args.timeout)
        texts = []
        for _, out, err in procs:
            out.seek(0)
            err.seek(0)
            texts.append((out.read(), err.read()))
            out.close()
            err.close()
    bad = [w for w, code in enumerate(codes) if code != 0]
    if bad:
        return peers.process_error(codes[bad[0]], *texts[bad[0]])
    marked = [l for l in texts[0][0].splitlines() if l.startswith(peers.RESULT_MARK)]
    if not marked:
        return peers.failure("the chief printed no result")
    return json.loads(marked[-1][len(peers.RESULT_MARK):])


# ---------------------------------------------------------------------------------------------


def summarize(result, args):
    if "error" in result:
        return result
    measured = result["times"][args.warmup:]
    if not measured:
        return peers.failure("no measured steps")
    median = statistics.median(measured)
    return dict(result, median_s=median, images_per_s=args.batch / median)


def row_text(side, workers, row, ours=None):
    if "error" in row:
        return "  %-11s %7d  error: %s" % (side, workers, row["error"][:150])
    ratio = "%.2f" % (ours["images_per_s"] / row["images_per_s"]) if ours and "error" not in ours else "-"
    text = "  %-11s %7d %8.3f %9.2f %9s" % (side, workers, row["median_s"], row["images_per_s"],
                                            ratio if side != "graphrun" else "")
    split = row.get("split")
    if split:
        text += "   " + " / ".join("%.0f" % (split[k] * 1000) for k in SPLIT)
    return text


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workers", default="1,2,4", help="worker counts, comma-separated")
    p.add_argument("--image-size", type=int, default=149)
    p.add_argument("--batch", type=int, default=16, help="global batch")
    p.add_argument("--threads-total", type=int, default=os.cpu_count() or 1,
                   help="compute threads over all workers (default: every core)")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--only", help="graphrun or tf")
    p.add_argument("--timeout", type=int, default=1800, help="seconds for one side's run")
    p.add_argument("--graphrun", default=os.path.normpath(os.path.join(peers.HERE, "..", "build", "bin", "graphrun")))
    p.add_argument("--mpirun", default=os.environ.get("GRAPHC_MPIRUN", "mpirun"))
    p.add_argument("--json", metavar="FILE")
    p.add_argument("--child-worker", type=int, dest="worker", help=argparse.SUPPRESS)
    p.add_argument("--ports", help=argparse.SUPPRESS)
    args = p.parse_args()
    args.worker_counts = [int(w) for w in args.workers.split(",") if w.strip()]
    if args.warmup < 1 or args.steps < 1 or min(args.worker_counts, default=0) < 1:
        p.error("--warmup, --steps and every worker count must be at least 1")
    if any(args.batch % w for w in args.worker_counts):
        p.error("the global batch must divide evenly over the workers (MultiWorkerMirroredStrategy's rule)")
    return args


def main():
    args = parse_args()
    if args.worker is not None:
        return tf_worker(args)
    peers.reexec_into_venv(THIS)
    isa, onednn = peers.isa_summary()
    print("inception_v3 training step, %dx%d, global batch %d over W workers x 1 device on this "
          "machine, %d threads in all; median of %d steps after %d warm-up"
          % (args.image_size, args.image_size, args.batch, args.threads_total, args.steps, args.warmup))
    print("cpu: %s (%d logical CPUs); ISA: %s; %s" % (peers.cpuinfo_field("model name"),
                                                      os.cpu_count() or 0, isa, onednn))
    print("  %-11s %7s %8s %9s %9s   %s" % ("side", "workers", "s/step", "images/s", "ours/tf",
                                            "graphrun ms: compute / intra / inter / input"))
    rows = []
    for workers in args.worker_counts:
        ours = summarize(run_graphrun(args, workers), args) if args.only in (None, "graphrun") else None
        theirs = summarize(run_tf(args, workers), args) if args.only in (None, "tf") else None
        if ours:
            print(row_text("graphrun", workers, ours), flush=True)
        if theirs:
            print(row_text("tensorflow", workers, theirs, ours), flush=True)
        rows.append({"workers": workers, "graphrun": ours, "tensorflow": theirs})
    versions = {r["tensorflow"]["info"]["framework"] for r in rows
                if r["tensorflow"] and "info" in r["tensorflow"]}
    if versions:
        print("versions: " + "; ".join(sorted(versions)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cpu": peers.cpuinfo_field("model name"), "isa": isa, "batch": args.batch,
                       "image_size": args.image_size, "threads_total": args.threads_total,
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
