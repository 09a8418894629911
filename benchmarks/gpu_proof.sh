#!/usr/bin/env bash
# GPU proof on one GPU node, in about five minutes:
#  1. the node's real nvidia-smi outputs (query CSV, -q, topo -m), saved in the layout of
#     tests/fixtures/nvidia-smi/<name>/ so gpu_facts' tests can replay them;
#  2. gpu_facts (its parsers over those outputs; the module too, where Ansible is installed)
#     and the telemetry sampler, against the real GPU;
#  3. ResNet-50 v1.5 synthetic training throughput with the PyTorch engine, in the precision
#     --dtype auto picks (bf16 AMP where the GPU has bf16): channels_last (eager, then
#     torch.compile), and NCHW for comparison;
#  4. the PyTorch engine on real JPEG records (generated noise images of ImageNet's typical
#     size, packed by dlperf data prepare): input through NVIDIA DALI on the GPU against
#     DataLoader workers;
#  5. the MXNet engine on the same GPU, NCHW and NHWC (its failure is recorded when it cannot
#     load);
#  6. dlperf allreduce on the GPU, one rank: torch.distributed (NCCL) and Horovod on MXNet;
#  and first a line on the node: its Python, torch and the CUDA it is built for, the GPUs torch
#  sees, /dev/shm's free space (the DataLoader workers' batches pass through it).
# Every step runs even when an earlier one failed, each dlperf run within STEP_S seconds and
# each nvidia-smi within 60 (a hang in one, in NCCL's set-up or a compile, costs that step
# alone); summary.txt holds the numbers, also when the script is stopped (SIGTERM, a hangup,
# Ctrl-C) part-way.
#
# Usage:  benchmarks/gpu_proof.sh OUTDIR
# Env:    DLPERF   the dlperf command (default: dlperf; e.g. "python3 -m dlperf")
#         BATCH    images per GPU (default 256)   ITERS / WARMUP   steps / untimed (200 / 50)
#         DEVICE   gpu (default) or cpu           MODEL_ARGS   extra train flags (default none)
#         IMAGES   JPEGs packed for the input-pipeline runs (default 8192: two batches of 256
#                  per DataLoader worker of a 16-core node in every epoch), in a scratch
#                  directory under SCRATCH (default TMPDIR, /tmp) that is removed at the end
#         STEP_S   seconds each run may take, then it is stopped and says so (default 240)
#         PYTHON   the Python whose packages dlperf uses (default python3)
#         DLPERF_DIST_TIMEOUT  seconds torch.distributed waits for a rank (120 here; dlperf's
#                  own default is 600)
# With DEVICE=cpu, small MODEL_ARGS and the fixture nvidia-smi, the whole script runs on a CPU
# machine: tests/training/test_gpu_proof.py does that, so a GPU node's minutes go to numbers.
set -uo pipefail
out=${1:?usage: benchmarks/gpu_proof.sh OUTDIR}
root=$(cd "$(dirname "$0")/.." && pwd)
read -r -a dlperf <<<"${DLPERF:-dlperf}"
python=${PYTHON:-python3}
batch=${BATCH:-256} iters=${ITERS:-200} warmup=${WARMUP:-50}
device=${DEVICE:-gpu} images=${IMAGES:-8192} step_s=${STEP_S:-240}
read -r -a model_args <<<"${MODEL_ARGS:-}"
mkdir -p "$out/fixture" "$out/runs"
scratch=$(mktemp -d "${SCRATCH:-${TMPDIR:-/tmp}}/gpu_proof.XXXXXX")
step() { echo "=== $* ($(date -u +%H:%M:%S))"; }
sampler="" running=""

bounded() {  # LOG ARGS...: ARGS within STEP_S seconds, output to LOG; its exit status
  local log=$1 rc
  shift
  # In the background, so that a SIGTERM to the script is taken at once (wait returns).
  timeout -k 10 "$step_s" "$@" >"$log" 2>&1 &
  running=$!
  wait "$running"
  rc=$?
  running=""
  if ((rc == 124 || rc == 137)); then
    echo "gpu_proof: stopped after STEP_S=$step_s s" >>"$log"
  fi
  echo "rc=$rc"
  return "$rc"
}

finish() {  # the summary and the archive of the runs; the scratch data removed
  trap - TERM HUP INT
  if [[ -n $running ]]; then kill -TERM "$running" 2>/dev/null; wait "$running"; fi
  if [[ -n $sampler ]]; then kill -TERM "$sampler" 2>/dev/null; wait "$sampler"; fi
  rm -rf "$scratch"
step "summary"
"$python" - "$out" <<'EOF' | tee "$out/summary.txt"
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
for res in sorted(out.glob("runs/*/result.json")):
    r = json.loads(res.read_text())
    p = r.get("provenance", {})
    rate = r.get("throughput_img_per_s")
    print(f"{res.parent.name:28s} {r['status']:6s} "
          f"{'%.0f img/s' % rate if rate else '-':>12s}  first step {r.get('first_step_s') or 0:.1f} s"
          f"  {r.get('precision')} {p.get('layout')} {p.get('loader')} {p.get('gpu_model')}"
          f" torch {p.get('torch')}"
          f" cuda {p.get('torch_cuda')} cudnn {p.get('cudnn')} nccl {p.get('nccl')}"
          f" driver {p.get('driver')}")
# One GPU's ResNet-50 v1.5 training rate against the goal (3,000 img/s on an H200) and the
# ~4,600 img/s per H100 of MLPerf-class submissions
rates = {}
for name in ("pytorch-nhwc", "pytorch-nhwc-compile", "pytorch-nchw"):  # the synthetic-data runs
    res = out / "runs" / name / "result.json"
    rate = json.loads(res.read_text()).get("throughput_img_per_s") if res.exists() else None
    if rate:
        rates[name] = rate
if rates:
    name, rate = max(rates.items(), key=lambda kv: kv[1])
    print(f"best synthetic rate: {rate:.0f} img/s ({name}): {rate / 3000:.2f} of the 3,000 img/s "
          f"goal, {rate / 4600:.2f} of ~4,600 img/s (MLPerf-class, H100)")
for res in sorted(out.glob("runs/allreduce-*.json")):
    a = json.loads(res.read_text())
    print(f"{res.stem:28s} {'correct' if a['correct'] else 'WRONG':7s} {a['bytes'] / 1e6:.0f} MB "
          f"on {a['world_size']} rank(s), {a['transport']} {a['device']} tensors, "
          f"median {a['median_s'] * 1e3:.2f} ms, algbw {a['algbw_MBps']:.0f} MB/s")
for log in sorted(out.glob("runs/*.log")):  # a run that left no result: why, in one line
    done = log.with_suffix("") / "result.json", log.with_suffix(".json")
    if not any(p.exists() for p in done):
        lines = [l for l in log.read_text().splitlines() if l.strip()]
        why = ([l for l in lines if l.startswith("gpu_proof:")]
               or [l for l in lines if "error" in l.lower()] or lines or ["(empty log)"])
        print(f"{log.stem:28s} no result: {why[-1]}")
node = out / "runs/node.txt"
print(node.read_text().strip() if node.exists() else "node: not looked at (stopped before)")
sampled = out / "runs/telemetry.jsonl"
rows = [json.loads(l) for l in sampled.read_text().splitlines()[1:]] if sampled.exists() else []
gpu = [g for row in rows for g in (row.get("gpu") or {}).values()]
def peak(key, scale=1.0, unit=""):  # a reading NVML does not give (MIG, no power sensor): n/a
    values = [g[key] for g in gpu if g.get(key) is not None]
    return f"{max(values) / scale:.1f}{unit}" if values else "n/a"
if gpu:
    print(f"telemetry: {len(rows)} samples; GPU util max {peak('util_percent', unit=' %')}, "
          f"power max {peak('power_w', unit=' W')}, "
          f"memory max {peak('mem_used_bytes', 2**30, ' GiB')}")
else:
    print(f"telemetry: {len(rows)} samples, no GPU source")
EOF
  tar -C "$out" -czf "$out/runs.tar.gz" runs && rm -rf "$out/runs"
}
trap 'echo "gpu_proof: stopped"; finish; exit 143' TERM HUP
trap 'echo "gpu_proof: stopped"; finish; exit 130' INT

step "this node"
"$python" - <<'EOF' | tee "$out/runs/node.txt"
import os, platform, shutil
line = f"python {platform.python_version()}"
try:
    import torch
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    seen = f"{torch.cuda.get_device_name(0)} x{gpus}" if gpus else "no GPU seen"
    line += f"; torch {torch.__version__} (CUDA {torch.version.cuda}): {seen}"
except ImportError as exc:
    line += f"; torch not installed ({exc})"
shm = shutil.disk_usage("/dev/shm").free / 2**30 if os.path.isdir("/dev/shm") else 0
print(f"{line}; /dev/shm {shm:.1f} GiB free (DataLoader workers' batches)")
EOF

step "nvidia-smi outputs"
fields=$("$python" -c 'from dlperf_module_utils.dlperf_gpu import QUERY_ARGS; print(" ".join(QUERY_ARGS))')
# shellcheck disable=SC2086  # two arguments
timeout 60 nvidia-smi $fields >"$out/fixture/query.csv"
timeout 60 nvidia-smi -q >"$out/fixture/q.txt"
timeout 60 nvidia-smi topo -m >"$out/fixture/topo.txt"
head -n 3 "$out/fixture/query.csv"

step "gpu_facts"
# gpu_facts' own parsers over the saved outputs (what the module returns, without Ansible) ...
"$python" - "$out/fixture" >"$out/runs/gpu_facts.json" <<'EOF'
import json, sys
from pathlib import Path
from dlperf_module_utils.dlperf_gpu import classify, parse_cuda_version, parse_query, parse_topology
d = Path(sys.argv[1])
topo = parse_topology((d / "topo.txt").read_text())
print(json.dumps({"gpus": parse_query((d / "query.csv").read_text()),
                  "cuda_version": parse_cuda_version((d / "q.txt").read_text()),
                  **classify(topo)}, indent=1))
EOF
echo "gpu_facts parsers rc=$?"
grep -E '"(name|cuda_version|layout)"' "$out/runs/gpu_facts.json" | sort | uniq -c
# ... and the module itself, run by Ansible against the live nvidia-smi, where Ansible is installed
if "$python" -c 'import ansible' 2>/dev/null; then
  ANSIBLE_COLLECTIONS_PATH="$root/collections" \
    ANSIBLE_LOCALHOST_WARNING=0 ANSIBLE_INVENTORY_UNPARSED_WARNING=0 LC_ALL=C.UTF-8 \
    "$python" -m ansible.cli.adhoc localhost -c local -m dlperf.cluster.gpu_facts \
    -e "ansible_python_interpreter=$(command -v "$python")" -o >"$out/runs/gpu_facts_module.txt" 2>&1
  echo "gpu_facts module rc=$?"
else
  echo "gpu_facts module: skipped, Ansible is not installed for $python"
fi

step "telemetry sampler (1 s) for the training runs"
"${dlperf[@]}" telemetry --output "$out/runs/telemetry.jsonl" --interval 1 --duration 900 &
sampler=$!

train() {  # NAME ARGS...: one throughput run (synthetic unless ARGS give --data)
  local name=$1
  shift
  step "train $name"
  bounded "$out/runs/$name.log" "${dlperf[@]}" train --data synthetic --model resnet50_v1.5 \
    --image-size 224 --batch-size "$batch" --iterations "$iters" --warmup-iterations "$warmup" \
    --device "$device" "${model_args[@]}" --output "$out/runs/$name" "$@"
  grep -E "^throughput|Error|error" "$out/runs/$name.log" | tail -n 5
}
train pytorch-nhwc --backend pytorch --layout NHWC
# torch.compile's GPU kernels (Triton) are built with the node's C compiler and Python's headers
echo "for --compile: cc $(command -v cc || echo MISSING), Python.h $("$python" -c \
  'import os, sysconfig; print(os.path.exists(sysconfig.get_paths()["include"] + "/Python.h"))')"
train pytorch-nhwc-compile --backend pytorch --layout NHWC --compile
train pytorch-nchw --backend pytorch --layout NCHW
step "records for the input pipelines"
"$python" - "$scratch/jpegs" "$images" <<'EOF'
import multiprocessing, random, sys
from pathlib import Path
from PIL import Image
root = Path(sys.argv[1])
def write(i):  # 4 classes of 500x375 JPEGs, ImageNet's typical size
    noise = 40 + random.Random(i).random() * 40
    Image.effect_noise((500, 375), noise).convert("RGB").save(root / f"class{i % 4}" / f"{i}.jpg")
for c in range(4):
    (root / f"class{c}").mkdir(parents=True, exist_ok=True)
with multiprocessing.get_context("fork").Pool() as pool:  # write() is defined on stdin
    pool.map(write, range(int(sys.argv[2])), chunksize=64)
EOF
bounded "$out/runs/data-prepare.txt" \
  "${dlperf[@]}" data prepare "$scratch/jpegs" --output "$scratch/jpegs.rec"
tail -n 1 "$out/runs/data-prepare.txt"
rec=(--data "$scratch/jpegs.rec" --classes 4)
train pytorch-dali "${rec[@]}" --backend pytorch --loader dali
train pytorch-native "${rec[@]}" --backend pytorch --loader native
kill -TERM "$sampler" 2>/dev/null
wait "$sampler"
sampler=""
iters=20 warmup=5 train mxnet-nchw --backend mxnet --layout NCHW
iters=20 warmup=5 train mxnet-nhwc --backend mxnet --layout NHWC
# One rank's allreduce proves each path on this GPU (NCCL for PyTorch; Horovod's NCCL operations
# need a Horovod built with them): bandwidth across GPUs needs several, as in validate.yml.
for backend in pytorch mxnet; do
  step "allreduce --backend $backend"
  # torch.distributed's own wait for a rank that never comes (600 s) cut to the step's scale
  bounded "$out/runs/allreduce-$backend.log" env DLPERF_DIST_TIMEOUT="${DLPERF_DIST_TIMEOUT:-120}" \
    "${dlperf[@]}" allreduce --backend "$backend" --device "$device" --megabytes 64 \
    --output "$out/runs/allreduce-$backend.json"
  tail -n 2 "$out/runs/allreduce-$backend.log"
done

finish
step "done"
