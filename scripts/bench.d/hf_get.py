"""hf_get.py REPO DIR - huggingface_hub's snapshot_download of REPO into local_dir DIR.

Run with the venv's python. BENCH_HF_TRANSFER_CONCURRENCY overrides hf_transfer's connection
count (huggingface_hub 0.x reads constants.HF_TRANSFER_CONCURRENCY at call time; default 100).
"""
import os
import sys

from huggingface_hub import constants, snapshot_download

if os.environ.get("BENCH_HF_TRANSFER_CONCURRENCY"):
    constants.HF_TRANSFER_CONCURRENCY = int(os.environ["BENCH_HF_TRANSFER_CONCURRENCY"])
snapshot_download(sys.argv[1], local_dir=sys.argv[2])
