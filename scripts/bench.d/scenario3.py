"""scenario3.py - scenario 3 of scripts/bench: a sharded repo (4 LFS shards, the index
naming them, a consolidated copy it does not name, 30 small git files) on scenario 2's
`limit_rate`, ours following the index against huggingface_hub given the same selection.
Measured like scenarios 1-2 (measure.measure); run() returns its entry of benchmarks.json's
"more" (page.py renders it).
"""
import os
import shutil

from measure import MIB, fresh_target, keep, log_tail_on_failure, measure, summarize, wait_idle
from common import sha256_file


def run(a, base_env, logs, settle, idle_wait):
    with open(a.sharded_list) as f:
        lines = f.read().split("\n")
    total = int(lines[1])
    files = [ln.split() for ln in lines[2:] if ln.strip()]
    endpoint = f"http://127.0.0.1:{a.port_limited}"
    access_log = os.path.join(a.work, "nginx", "logs", f"access-{a.port_limited}.log")
    ignore = {"BENCH_HF_IGNORE": "consolidated.safetensors"}
    tools = [
        dict(key="speech", label="speech download (ours)", conns="16", ours=True,
             argv=lambda d: [a.speech, "download", a.sharded_repo, "--cache-dir", d], env={},
             shown="speech download bench/Sharded --cache-dir DIR  # the index decides which .safetensors"),
        dict(key="hf", label=f"huggingface_hub {a.hf_new_version}", conns="1 per file, 8 files",
             argv=lambda d: [a.py_new, a.hf_get, a.sharded_repo, d], env=dict(ignore),
             shown="python -c 'snapshot_download(\"bench/Sharded\", local_dir=DIR, "
                   "ignore_patterns=[\"consolidated.safetensors\"])'"),
        dict(key="hft", label=f"huggingface_hub {a.hf_old_version} + hf_transfer", conns="100 per file",
             argv=lambda d: [a.py_old, a.hf_get, a.sharded_repo, d], env=dict(ignore, HF_HUB_ENABLE_HF_TRANSFER="1"),
             shown="HF_HUB_ENABLE_HF_TRANSFER=1 python -c 'snapshot_download(..., ignore_patterns=[...])'  "
                   f"# huggingface_hub {a.hf_old_version}"),
        dict(key="hft16", label=f"huggingface_hub {a.hf_old_version} + hf_transfer, 16 connections",
             conns="16 per file", argv=lambda d: [a.py_old, a.hf_get, a.sharded_repo, d],
             env=dict(ignore, HF_HUB_ENABLE_HF_TRANSFER="1", BENCH_HF_TRANSFER_CONCURRENCY="16"),
             shown="... constants.HF_TRANSFER_CONCURRENCY = 16 ..."),
    ]
    for t in tools:
        t.update(runs=[], verified=None)
    for rnd in range(a.runs):
        order = tools[rnd % len(tools):] + tools[:rnd % len(tools)]
        for t in order:
            for attempt in range(3):
                target, dst = fresh_target(a.work, f"s3-{t['key']}-{rnd}")
                log_path = os.path.join(logs, f"s3-{t['key']}-{rnd}-{attempt}.log")
                waited = wait_idle(a.nginx_pid, settle, idle_wait)
                r = measure(t["argv"](dst), dict(base_env, HF_ENDPOINT=endpoint, **t["env"]), log_path,
                            a.nginx_pid, access_log)
                r.update(round=rnd, waited_s=waited)
                r["consolidated_fetched"] = os.path.exists(os.path.join(dst, "consolidated.safetensors"))
                if r["exit"] == 0 and t["verified"] is None:
                    good = not r["consolidated_fetched"]
                    for pth, n, sha in files:
                        out = os.path.join(dst, pth)
                        good = good and os.path.exists(out) and os.path.getsize(out) == int(n) \
                            and sha256_file(out) == sha
                    t["verified"] = r["verified"] = good
                log_tail_on_failure(r, log_path)
                print(f"bench: s3 round {rnd + 1}/{a.runs} {t['label']:<52} {r['wall_s']:6.2f} s "
                      f"{total / MIB / r['wall_s']:5.0f} MiB/s cpu {r['cpu_s']:5.2f} s pss {r['peak_pss_mib']:5.0f} MiB "
                      f"req {r['server'].get('requests', 0)}/{r['server'].get('connections', 0)}"
                      + ("" if r["exit"] == 0 else f" EXIT {r['exit']}")
                      + ("" if r.get("verified", True) else " WRONG OUTPUT"), flush=True)
                shutil.rmtree(target, ignore_errors=True)
                if keep(t, r, attempt, long_ok=True):
                    break
    limit = 16 * int(a.rate_limit.rstrip("m"))
    ours = tools[0]
    for t in tools:
        t["summary"] = summarize(t, total)
        del t["argv"]
    ours_speed = ours["summary"]["mib_s"]["median"] if ours["summary"] else None
    for t in tools:
        if t["summary"]:
            t["summary"]["x_limit"] = t["summary"]["mib_s"]["median"] / limit
            t["summary"]["x_ours"] = t["summary"]["mib_s"]["median"] / ours_speed if ours_speed else None
    return {"key": "3", "title": f"a sharded repo, nginx `limit_rate {a.rate_limit}` per connection", "runs": a.runs,
            "bytes": total, "files": len(files), "shard_mib": a.size / 4 / MIB, "limit_mib_s": limit, "tools": tools}
