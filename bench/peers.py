#!/usr/bin/env python3
"""graphrun's training step against the strongest current CPU peers, in one table.

    bench/setup-peers                          # once: current PyTorch, torchvision, TensorFlow
                                               # and ONNX Runtime from PyPI into bench/.venv
    bench/peers.py                             # inception_v3, 299x299, batch 16, 2 threads
    bench/peers.py --model resnet18                            # 224x224, batch 16
    bench/peers.py --model small_cnn --batch 64 --steps 20
    bench/peers.py --only graphrun,torch-compile --json peers.json
    bench/peers.py --precision bf16            # bf16 compute with f32 master weights, every side
    bench/peers.py --model resnet18 --precision bf16 --json peers-bf16.json
    ONEDNN_MAX_CPU_ISA=AVX2 bench/peers.py     # caps oneDNN in graphrun, PyTorch and TensorFlow

Sides, in table order (--only takes these names):
  graphrun       build/bin/graphrun train (--graphrun PATH); step times from its --metrics file
  torch          PyTorch eager, NCHW
  torch-cl       PyTorch eager, channels-last (model and input)
  torch-compile  torch.compile(model), default mode
  tf             TensorFlow 2 / Keras, NHWC, a tf.function train step (GradientTape)
  tf-xla         the same step with jit_compile=True (XLA)

Every side trains the same model in training mode on random input and labels, with the same
batch, image size and thread count, SGD with momentum 0.9 at lr 0.01, and cross-entropy on
the logits: inception_v3 is torchvision's inception_v3(weights=None, aux_logits=False,
init_weights=True) and Keras' InceptionV3(weights=None, classifier_activation=None), the same
topology (Keras' BatchNorm has no scale and there is no dropout before its classifier);
resnet18 is torchvision's resnet18(weights=None) and a Keras twin written here (Keras has no
ResNet-18); small_cnn is an exact twin of graphrun's (frontend/models/SmallModels.cpp) in both.

--precision (fp32, the default, or bf16) is every side's: the header and the JSON name it, so
fp32 and bf16 figures cannot be mixed up. With bf16 the weights and SGD's momentum stay f32
(master weights) on every side. graphrun runs `graphrun train --precision bf16`: its
convolutions, batch norms, pools and the ops between them in bf16 (on a CPU with AMX it keeps
the bf16 activations channels-last). PyTorch runs the forward pass and the loss under
torch.autocast("cpu", dtype=torch.bfloat16), and the backward pass and the optimizer step
outside it, as PyTorch documents for AMP on the CPU (torch.compile compiles the model as in
fp32 and is called under autocast). Keras builds the model under the global mixed_bfloat16
policy (bf16 compute, f32 variables), XLA too, and the train step casts the logits to f32
before the loss. A side that cannot run bf16 on this CPU fails in its row like any other.

Each side runs in its own process with this environment (so its peak RSS is its own, and
ONEDNN_MAX_CPU_ISA, ATEN_CPU_CAPABILITY and TF_ENABLE_ONEDNN_OPTS reach it), with
OMP_NUM_THREADS, torch.set_num_threads and TensorFlow's intra-op threads set to --threads and
inter-op threads to 1. s/step is the median over --steps after --warmup steps; "1st step" is
the first warm-up step, which holds torch.compile's and XLA's compilation (torch.compile reuses
Inductor's on-disk cache, so a rerun compiles faster); graphrun builds and plans its graph
before its first step. The ratio is graphrun's images/s over the side's: above 1, graphrun is
faster.

A side that fails (a package missing, graphrun not built) prints its error in its row and the
other sides still run. Machines are noisy: this prints figures and asserts nothing.

The script runs under bench/.venv's Python, re-executing itself there when started with
another one.
"""
import argparse
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
THIS = os.path.abspath(__file__)
VENV = os.path.join(HERE, ".venv")
RESULT_MARK = "PEERS_RESULT "

# name: the label in the table; table order.
SIDES = {
    "graphrun": "graphrun",
    "torch": "pytorch eager NCHW",
    "torch-cl": "pytorch eager channels-last",
    "torch-compile": "torch.compile",
    "tf": "tensorflow tf.function",
    "tf-xla": "tensorflow XLA",
}

# The models every side can build, with their input channels, classes and default image size.
MODELS = {"inception_v3": (3, 1000, 299), "resnet18": (3, 1000, 224), "small_cnn": (1, 10, 28)}

LR, MOMENTUM = 0.01, 0.9

# --precision: the header's words for each.
PRECISIONS = {"fp32": "fp32", "bf16": "bf16 (f32 master weights)"}

# Sides whose first step compiles (or traces) the step: compile_s is that step less a median one.
COMPILED = ("torch-compile", "tf", "tf-xla")


# ---------------------------------------------------------------------------------------------
# Child processes: one side each, printing its step times as JSON on a marked line.


def timed_steps(step, count):
    """Runs `step` `count` times; returns the seconds of each and the last loss."""
    times, loss = [], None
    for _ in range(count):
        start = time.perf_counter()
        loss = step()  # each step returns a Python float, so its work is finished here
        times.append(time.perf_counter() - start)
    return times, loss


def torch_small_cnn(size):
    """graphrun's small_cnn with the same module names, layers and BatchNorm settings."""
    from collections import OrderedDict
    from torch import nn

    side = size // 2 // 2  # two 2x2 max pools without padding
    return nn.Sequential(OrderedDict([
        ("conv1", nn.Conv2d(1, 32, 3, padding=1, bias=False)),
        ("bn1", nn.BatchNorm2d(32, eps=1e-5, momentum=0.1)),  # graphrun's 0.9, ONNX convention
        ("relu1", nn.ReLU()),
        ("pool1", nn.MaxPool2d(2, 2)),
        ("conv2", nn.Conv2d(32, 64, 3, padding=1, bias=False)),
        ("bn2", nn.BatchNorm2d(64, eps=1e-5, momentum=0.1)),
        ("relu2", nn.ReLU()),
        ("pool2", nn.MaxPool2d(2, 2)),
        ("flatten", nn.Flatten()),
        ("fc1", nn.Linear(64 * side * side, 128)),
        ("relu3", nn.ReLU()),
        ("dropout", nn.Dropout(0.5)),
        ("fc2", nn.Linear(128, 10)),
    ]))


def torch_model(name, size):
    import torchvision

    if name == "inception_v3":
        return torchvision.models.inception_v3(weights=None, aux_logits=False, init_weights=True)
    if name == "resnet18":
        return torchvision.models.resnet18(weights=None)
    return torch_small_cnn(size)


def torch_info():
    import torch

    onednn = re.search(r"MKL-DNN (v[\d.]+)", torch.__config__.show())
    cpu = getattr(torch.backends, "cpu", None)  # get_cpu_capability is recent: info only
    return {"framework": "torch " + torch.__version__,
            "detail": "oneDNN %s, ATen %s" % (onednn.group(1) if onednn else "?",
                                              cpu.get_cpu_capability() if cpu else "?")}


def torch_side(args, channels_last, compiled):
    import torch

    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(0)
    channels, classes, _ = MODELS[args.model]
    net = torch_model(args.model, args.image_size).train()
    x = torch.randn(args.batch, channels, args.image_size, args.image_size)
    y = torch.randint(0, classes, (args.batch,))
    if channels_last:
        net = net.to(memory_format=torch.channels_last)
        x = x.to(memory_format=torch.channels_last)
    params = sum(p.numel() for p in net.parameters() if p.requires_grad)
    opt = torch.optim.SGD(net.parameters(), lr=LR, momentum=MOMENTUM)
    forward = torch.compile(net) if compiled else net
    loss_fn = torch.nn.CrossEntropyLoss()

    def precision():
        # AMP on the CPU: the forward pass and the loss under autocast (which runs the convolutions
        # and matrix products in bf16 and the cross-entropy in f32), the backward pass and the
        # optimizer step outside it; the weights stay f32.
        if args.precision == "bf16":
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def step():
        opt.zero_grad(set_to_none=True)
        with precision():
            loss = loss_fn(forward(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    times, loss = timed_steps(step, args.warmup + args.steps)
    return {"times": times, "loss": loss, "params": params, "info": torch_info()}


def keras_small_cnn(size):
    """graphrun's small_cnn in Keras, NHWC; BatchNorm momentum 0.9 is Keras' (and ONNX's)
    convention for PyTorch's 0.1."""
    import tensorflow as tf

    layers = tf.keras.layers

    def block(channels, i):
        return [layers.Conv2D(channels, 3, padding="same", use_bias=False, name="conv%d" % i),
                layers.BatchNormalization(momentum=0.9, epsilon=1e-5, name="bn%d" % i),
                layers.ReLU(name="relu%d" % i),
                layers.MaxPooling2D(2, 2, name="pool%d" % i)]

    return tf.keras.Sequential(
        [tf.keras.Input((size, size, 1)), *block(32, 1), *block(64, 2),
         layers.Flatten(name="flatten"), layers.Dense(128, name="fc1"), layers.ReLU(name="relu3"),
         layers.Dropout(0.5, name="dropout"), layers.Dense(10, name="fc2")], name="small_cnn")


def keras_resnet18(size):
    """torchvision's resnet18 in Keras (which has no ResNet-18), NHWC: the same layers, with
    explicit zero padding so every convolution and pool sees torchvision's windows."""
    import tensorflow as tf

    layers = tf.keras.layers

    def conv_bn(x, channels, kernel, stride, name, relu=True):
        if kernel > 1:
            x = layers.ZeroPadding2D(kernel // 2, name=name + "_pad")(x)
        x = layers.Conv2D(channels, kernel, stride, use_bias=False, name=name)(x)
        x = layers.BatchNormalization(momentum=0.9, epsilon=1e-5, name=name + "_bn")(x)
        return layers.ReLU(name=name + "_relu")(x) if relu else x

    def block(x, channels, stride, name):
        shortcut = x
        if stride != 1 or x.shape[-1] != channels:
            shortcut = conv_bn(x, channels, 1, stride, name + "_down", relu=False)
        y = conv_bn(x, channels, 3, stride, name + "_conv1")
        y = conv_bn(y, channels, 3, 1, name + "_conv2", relu=False)
        return layers.ReLU(name=name + "_out")(layers.Add(name=name + "_add")([y, shortcut]))

    inputs = tf.keras.Input((size, size, 3))
    x = conv_bn(inputs, 64, 7, 2, "conv1")
    x = layers.MaxPooling2D(3, 2, name="maxpool")(layers.ZeroPadding2D(1, name="maxpool_pad")(x))
    for stage, channels in enumerate((64, 128, 256, 512), start=1):
        for b in range(2):
            x = block(x, channels, 2 if stage > 1 and b == 0 else 1, "layer%d_%d" % (stage, b))
    x = layers.GlobalAveragePooling2D(name="avgpool")(x)
    return tf.keras.Model(inputs, layers.Dense(1000, name="fc")(x), name="resnet18")


def keras_model(name, size):
    import tensorflow as tf

    if name == "inception_v3":
        # Logits out, so the loss is the same cross-entropy on logits as on the other sides.
        return tf.keras.applications.InceptionV3(weights=None, input_shape=(size, size, 3),
                                                 classes=1000, classifier_activation=None)
    if name == "resnet18":
        return keras_resnet18(size)
    return keras_small_cnn(size)


def tf_info():
    import tensorflow as tf

    try:  # whether this TensorFlow runs its oneDNN kernels (TF_ENABLE_ONEDNN_OPTS, its default)
        from tensorflow.python.util import _pywrap_util_port
        onednn = "on" if _pywrap_util_port.IsMklEnabled() else "off"
    except Exception:  # a private module: absent in some release, which must not fail the side
        onednn = "?"
    return {"framework": "tensorflow %s, keras %s" % (tf.__version__, tf.keras.__version__),
            "detail": "oneDNN " + onednn}


def tf_side(args, xla):
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.keras.utils.set_random_seed(0)
    if args.precision == "bf16":
        # Before the model is built: its layers take the policy then (bf16 compute, f32 variables).
        tf.keras.mixed_precision.set_global_policy("mixed_bfloat16")
    channels, classes, _ = MODELS[args.model]
    model = keras_model(args.model, args.image_size)
    x = tf.random.normal((args.batch, args.image_size, args.image_size, channels))
    y = tf.random.uniform((args.batch,), 0, classes, dtype=tf.int32)
    params = sum(int(v.shape.num_elements()) for v in model.trainable_variables)
    opt = tf.keras.optimizers.SGD(learning_rate=LR, momentum=MOMENTUM)
    opt.build(model.trainable_variables)  # its slots exist before the traced step needs them
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function(jit_compile=xla)
    def train_step(x, y):
        with tf.GradientTape() as tape:
            # Under mixed_bfloat16 the final Dense computes in bf16 too: the logits are cast to
            # f32 here, so the loss is f32 on every side (a no-op in fp32).
            logits = tf.cast(model(x, training=True), tf.float32)
            loss = loss_fn(y, logits)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    times, loss = timed_steps(lambda: float(train_step(x, y)), args.warmup + args.steps)
    return {"times": times, "loss": loss, "params": params, "info": tf_info()}


def child_main(args):
    runners = {
        "torch": lambda: torch_side(args, channels_last=False, compiled=False),
        "torch-cl": lambda: torch_side(args, channels_last=True, compiled=False),
        "torch-compile": lambda: torch_side(args, channels_last=False, compiled=True),
        "tf": lambda: tf_side(args, xla=False),
        "tf-xla": lambda: tf_side(args, xla=True),
    }
    result = runners[args.child]()
    print(RESULT_MARK + json.dumps(result), flush=True)


# ---------------------------------------------------------------------------------------------
# The parent: runs each side, measures its peak RSS, prints the table.


def run_process(cmd, env):
    """Runs cmd to its end; returns exit code, stdout, stderr and its peak RSS in bytes.

    os.wait4 gives this child's own resource usage (and its waited-for children's), where
    RUSAGE_CHILDREN would be the maximum over every side run so far."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)  # already reaped: Popen must not wait
        out.seek(0)
        err.seek(0)
        return proc.returncode, out.read(), err.read(), usage.ru_maxrss * 1024


def failure(message):
    return {"error": message.strip()}


def process_error(code, out, err):
    """What went wrong, in one line: the last line of stderr (a Python traceback ends with the
    exception), and the signal when one ended the process."""
    lines = [line.strip() for line in (err or out).splitlines() if line.strip()]
    last = lines[-1] if lines else "no output"
    return failure("killed by signal %d: %s" % (-code, last) if code < 0 else last)


def side_env(args):
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    # Capping oneDNN at AVX2 stands for an AVX2-only CPU: PyTorch's own vectorized kernels
    # (which do not read oneDNN's cap) take that ISA too, unless the caller chose one.
    if env.get("ONEDNN_MAX_CPU_ISA", "").upper() == "AVX2":
        env.setdefault("ATEN_CPU_CAPABILITY", "avx2")
    return env


def run_graphrun(args):
    if not os.access(args.graphrun, os.X_OK):
        return failure("not built: %s (scripts/build builds it)" % args.graphrun)
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "metrics.jsonl")
        cmd = [args.graphrun, "train", "--model", args.model, "--batch", str(args.batch),
               "--steps", str(args.warmup + args.steps), "--threads", str(args.threads),
               "--optimizer", "momentum", "--lr", str(LR), "--no-progress",
               "--image-size", str(args.image_size), "--precision", args.precision,
               "--metrics", metrics]
        code, out, err, rss = run_process(cmd, side_env(args))
        if code != 0 or not os.path.exists(metrics):
            return process_error(code, out, err)
        with open(metrics) as f:
            steps = [r for r in map(json.loads, f) if r.get("kind") == "step"]
    params = re.search(r"parameters\s+([\d,]+) trainable", out)
    return {"times": [s["seconds"] for s in steps], "loss": steps[-1]["loss"] if steps else None,
            "params": int(params.group(1).replace(",", "")) if params else None, "rss": rss,
            "info": {"framework": "graphrun", "detail": args.graphrun}}


def run_peer(side, args):
    cmd = [sys.executable, THIS, "--child", side, "--model", args.model, "--batch", str(args.batch),
           "--image-size", str(args.image_size), "--threads", str(args.threads),
           "--steps", str(args.steps), "--warmup", str(args.warmup), "--precision", args.precision]
    code, out, err, rss = run_process(cmd, side_env(args))
    marked = [line for line in out.splitlines() if line.startswith(RESULT_MARK)]
    if code != 0 or not marked:
        return process_error(code, out, err) if code != 0 else failure("no result printed")
    result = json.loads(marked[-1][len(RESULT_MARK):])
    result["rss"] = rss
    return result


def summarize(side, result, args):
    """Adds the figures the table prints; the first --warmup steps are left out of them."""
    row = {"side": side, "label": SIDES[side], **result}
    times = result.get("times")
    if "error" in row:
        return row
    measured = times[args.warmup:]
    if not measured:
        row["error"] = "no measured steps (%d step times)" % len(times)
        return row
    median = statistics.median(measured)
    row.update(median_s=median, min_s=min(measured), max_s=max(measured), first_step_s=times[0],
               images_per_s=args.batch / median)
    if side in COMPILED:
        row["compile_s"] = times[0] - median
    return row


# ---------------------------------------------------------------------------------------------
# The header: the CPU, its ISA and what caps it.


def cpuinfo_field(name):
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == name:
                    return value.strip()
    except OSError:
        pass
    return ""


# oneDNN's ISA names from weakest to strongest, with the /proc/cpuinfo flag each adds, and the
# AVX10 names oneDNN 3 also takes for three of them.
ONEDNN_ISAS = [("AVX2", "avx2"), ("AVX512_CORE", "avx512f"), ("AVX512_CORE_VNNI", "avx512_vnni"),
               ("AVX512_CORE_BF16", "avx512_bf16"), ("AVX512_CORE_FP16", "avx512_fp16"),
               ("AVX512_CORE_AMX", "amx_tile"), ("AVX512_CORE_AMX_FP16", "amx_fp16")]
ONEDNN_ALIASES = {"AVX10_1_512": "AVX512_CORE_FP16", "AVX10_1_512_AMX": "AVX512_CORE_AMX",
                  "AVX10_1_512_AMX_FP16": "AVX512_CORE_AMX_FP16"}


def onednn_cap_note(flags):
    """What ONEDNN_MAX_CPU_ISA leaves oneDNN: the lower of the cap and the CPU's best ISA."""
    names = [name for name, _ in ONEDNN_ISAS]
    best = [name for name, flag in ONEDNN_ISAS if flag in flags]
    best = best[-1] if best else None
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA")
    if not cap or cap.upper() in ("ALL", "DEFAULT"):
        return "oneDNN: not capped (ONEDNN_MAX_CPU_ISA %s), best ISA %s" % (
            "=" + cap if cap else "unset", best or "below AVX2")
    name = ONEDNN_ALIASES.get(cap.upper(), cap.upper())
    if name in names and best:
        effective = names[min(names.index(name), names.index(best))]
        note = "oneDNN: ONEDNN_MAX_CPU_ISA=%s, effective %s in every side's oneDNN" % (cap, effective)
    else:
        note = "oneDNN: ONEDNN_MAX_CPU_ISA=%s in every side's oneDNN" % cap
    aten = os.environ.get("ATEN_CPU_CAPABILITY") or ("avx2" if name == "AVX2" else None)
    # PyTorch's own vectorized kernels do not read oneDNN's cap.
    note += "; PyTorch's own kernels: " + (
        "ATEN_CPU_CAPABILITY=" + aten if aten else "not capped (ATEN_CPU_CAPABILITY caps them)")
    return note


def isa_summary():
    """The ISA flags present, and what oneDNN may use of them."""
    flags = set(cpuinfo_field("flags").split())
    present = [name for name, flag in (("avx2", "avx2"), ("avx512f", "avx512f"), ("amx", "amx_tile"))
               if flag in flags]
    return " ".join(present) or "none of avx2/avx512f/amx", onednn_cap_note(flags)


def tf_onednn_note():
    value = os.environ.get("TF_ENABLE_ONEDNN_OPTS")
    if value is None:
        return "TensorFlow: TF_ENABLE_ONEDNN_OPTS unset (its default on x86: oneDNN on)"
    return "TensorFlow: TF_ENABLE_ONEDNN_OPTS=%s" % value


def header(args):
    cpu = cpuinfo_field("model name") or "unknown CPU"
    isa, onednn = isa_summary()
    return [
        "%s training step in %s, batch %d, %dx%d, SGD momentum %.1f lr %g, %d threads; "
        "median of %d steps after %d warm-up" % (args.model, PRECISIONS[args.precision], args.batch,
                                                 args.image_size, args.image_size, MOMENTUM, LR,
                                                 args.threads, args.steps, args.warmup),
        "cpu: %s (%d logical CPUs); ISA: %s" % (cpu, os.cpu_count() or 0, isa),
        "%s; %s" % (onednn, tf_onednn_note()),
    ]


# ---------------------------------------------------------------------------------------------
# The table.


def megabytes(n):
    return "%.0f MB" % (n / 1e6) if n else "n/a"


def ratio(ours, row):
    if ours is None or "error" in ours or "error" in row:
        return None
    return ours["images_per_s"] / row["images_per_s"]


def table(rows):
    ours = next((r for r in rows if r["side"] == "graphrun"), None)
    lines = ["  %-28s %9s %10s %17s %9s %10s %14s" % ("side", "s/step", "images/s", "min-max s/step",
                                                     "peak RSS", "1st step", "graphrun/side")]
    for row in rows:
        if "error" in row:
            lines.append("  %-28s error: %s" % (row["label"], row["error"][:160]))
            continue
        r = ratio(ours, row) if row["side"] != "graphrun" else None
        lines.append("  %-28s %9.4f %10.2f %8.4f-%-8.4f %9s %9.2fs %14s" % (
            row["label"], row["median_s"], row["images_per_s"], row["min_s"], row["max_s"],
            megabytes(row.get("rss")), row["first_step_s"], "%.2f" % r if r else "-"))
    return lines


def best_peer(rows):
    peers = [r for r in rows if r["side"] != "graphrun" and "error" not in r]
    return max(peers, key=lambda r: r["images_per_s"]) if peers else None


def footer(rows):
    lines = []
    ours = next((r for r in rows if r["side"] == "graphrun"), None)
    best = best_peer(rows)
    if best:
        r = ratio(ours, best)
        lines.append("best peer: %s, %.2f images/s; graphrun/best: %s" % (
            best["label"], best["images_per_s"], "%.2f" % r if r else "n/a (no graphrun figure)"))
    compiles = ["%s %.1f s" % (r["label"], r["compile_s"]) for r in rows if "compile_s" in r]
    if compiles:
        lines.append("compilation (1st step - median step): " + ", ".join(compiles))
    params = ["%s %s" % (r["label"], "{:,}".format(r["params"])) for r in rows
              if "error" not in r and r.get("params")]
    if params:
        lines.append("trainable parameters: " + ", ".join(params))
    versions = {}
    for r in rows:
        if "info" in r:
            versions.setdefault(r["info"]["framework"], r["info"]["detail"])
    if versions:
        lines.append("versions: " + "; ".join("%s (%s)" % kv for kv in versions.items()))
    return lines


# ---------------------------------------------------------------------------------------------


def reexec_into_venv(script=THIS):
    """Runs `script` again under bench/.venv's Python, where the peers are installed."""
    python = os.path.join(VENV, "bin", "python")
    if os.path.realpath(sys.prefix) == os.path.realpath(VENV):
        return
    if not os.path.exists(python):
        print("%s: no %s (bench/setup-peers creates it): the peer rows use %s's packages"
              % (os.path.basename(script), VENV, sys.executable), file=sys.stderr)
        return
    os.execv(python, [python, script] + sys.argv[1:])


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="inception_v3", choices=sorted(MODELS))
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--image-size", type=int, help="default: the model's (299, 224 for resnet18, 28 for small_cnn)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--precision", default="fp32", choices=sorted(PRECISIONS),
                   help="fp32, or bf16 compute with f32 master weights on every side (see above)")
    p.add_argument("--steps", type=int, default=6, help="measured steps per side")
    p.add_argument("--warmup", type=int, default=2,
                   help="steps before the measured ones (at least 1: it holds compilation)")
    p.add_argument("--only", help="comma-separated sides: " + ",".join(SIDES))
    p.add_argument("--graphrun", default=os.path.normpath(os.path.join(HERE, "..", "build", "bin", "graphrun")))
    p.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    p.add_argument("--child", choices=[s for s in SIDES if s != "graphrun"], help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.image_size is None:
        args.image_size = MODELS[args.model][2]
    if args.warmup < 1 or args.steps < 1 or args.batch < 1 or args.threads < 1:
        p.error("--warmup, --steps, --batch and --threads must be at least 1")
    args.sides = list(SIDES) if not args.only else [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in args.sides if s not in SIDES]
    if unknown:
        p.error("unknown side %s; the sides are %s" % (",".join(unknown), ",".join(SIDES)))
    args.sides = [s for s in SIDES if s in args.sides]  # table order, each once
    return args


def main():
    args = parse_args()
    if args.child:
        return child_main(args)
    reexec_into_venv()
    for line in header(args):
        print(line, flush=True)
    rows = []
    for side in args.sides:
        result = run_graphrun(args) if side == "graphrun" else run_peer(side, args)
        rows.append(summarize(side, result, args))
    for line in table(rows) + footer(rows):
        print(line)
    if args.json:
        best = best_peer(rows)
        ours = next((r for r in rows if r["side"] == "graphrun"), None)
        with open(args.json, "w") as f:
            json.dump({"header": header(args), "model": args.model, "precision": args.precision,
                       "batch": args.batch, "image_size": args.image_size, "threads": args.threads,
                       "steps": args.steps, "warmup": args.warmup, "cpu": cpuinfo_field("model name"),
                       "env": {k: os.environ.get(k) for k in ("ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY",
                                                              "TF_ENABLE_ONEDNN_OPTS")},
                       "rows": [dict(r, ratio=ratio(ours, r)) for r in rows],
                       "best_peer": best and {"side": best["side"], "ratio": ratio(ours, best)}},
                      f, indent=1)


if __name__ == "__main__":
    main()
