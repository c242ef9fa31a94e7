"""hf_get.py REPO [DIR] - huggingface_hub's snapshot_download of REPO into local_dir DIR, or into
its own cache (HF_HOME) when DIR is left out (the cached call of scenario 5).

Run with the venv's python. BENCH_HF_TRANSFER_CONCURRENCY overrides hf_transfer's connection
count (huggingface_hub 0.x reads constants.HF_TRANSFER_CONCURRENCY at call time; default 100).
BENCH_HF_IGNORE=GLOB,... passes ignore_patterns (scenario 3's file selection).
BENCH_HF_CALL_TIME=FILE writes the seconds the snapshot_download call alone took (no imports).
"""
import os
import sys
import time

from huggingface_hub import constants, snapshot_download

if os.environ.get("BENCH_HF_TRANSFER_CONCURRENCY"):
    constants.HF_TRANSFER_CONCURRENCY = int(os.environ["BENCH_HF_TRANSFER_CONCURRENCY"])
kwargs = {}
if os.environ.get("BENCH_HF_IGNORE"):
    kwargs["ignore_patterns"] = os.environ["BENCH_HF_IGNORE"].split(",")
t0 = time.monotonic()
if len(sys.argv) > 2:
    snapshot_download(sys.argv[1], local_dir=sys.argv[2], **kwargs)
else:
    snapshot_download(sys.argv[1], **kwargs)
if os.environ.get("BENCH_HF_CALL_TIME"):
    with open(os.environ["BENCH_HF_CALL_TIME"], "w") as f:
        f.write(f"{time.monotonic() - t0:.6f}\n")
