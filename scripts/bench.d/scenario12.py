"""scenario12.py - scenarios 1 and 2 of scripts/bench: one LFS file into a cold
directory, by every tool in turn, on nginx without a limit (1: the disk and the cores are the
limits) and with `limit_rate` per connection (2: 16 x the cap is the limit). The two share one
layout and one set of tools (BENCH_TOOLS picks tools by their key below), so they share a module.

run() measures them through measure.py and returns their entries of benchmarks.json's
"scenarios" list; page.py renders them.
"""
import os
import shutil
import sys
import time

from measure import MIB, fresh_target, keep, log_tail_on_failure, measure, summarize, wait_idle
from common import sha256_file


def tools(a, hf_new_version, hf_old_version):
    out_file = lambda d: os.path.join(d, a.file)  # noqa: E731
    conc = int(os.environ.get("HF_DOWNLOAD_RANGE_CONCURRENCY", "16") or 16)
    return [
        dict(key="curl", label="curl -o", conns="1", scenarios={"1"}, reference=True,
             argv=lambda d, ep: ["curl", "-sSf", "-o", out_file(d), f"{ep}/{a.repo}/resolve/main/{a.file}"],
             shown="curl -sSf -o DIR/model.safetensors $HF_ENDPOINT/bench/OneGiB/resolve/main/model.safetensors",
             env={}, out=out_file),
        dict(key="curl_sync", label="curl -o, then fsync", conns="1", scenarios={"1"}, reference=True,
             argv=lambda d, ep: ["sh", "-c", 'curl -sSf -o "$1" "$2" && sync "$1"', "sh", out_file(d),
                                 f"{ep}/{a.repo}/resolve/main/{a.file}"],
             shown="curl -sSf -o DIR/model.safetensors URL && sync DIR/model.safetensors",
             env={}, out=out_file),
        dict(key="dd", label="dd bs=256K of the source (no network)", conns="–", scenarios={"1"}, reference=True,
             argv=lambda d, ep: ["dd", f"if={a.blob}", f"of={out_file(d)}", "bs=256K", "status=none"],
             shown="dd if=SOURCE of=DIR/model.safetensors bs=256K status=none",
             env={}, out=out_file),
        dict(key="speech", label="speech download (ours)", conns=str(min(conc, 16)), scenarios={"1", "2"},
             argv=lambda d, ep: [a.speech, "download", a.repo, "--cache-dir", d],
             shown="speech download bench/OneGiB --cache-dir DIR",
             env={}, out=out_file, ours=True),
        dict(key="speech_nohash", label="speech download, file listed without `lfs` (checked by its git blob id, SHA-1, not SHA-256)",
             conns=str(min(conc, 16)), scenarios={"1"}, reference=True,
             argv=lambda d, ep: [a.speech, "download", a.nohash_repo, "--cache-dir", d],
             shown="speech download bench/OneGiB-nohash --cache-dir DIR  # same bytes, tree entry without lfs: SHA-1 blob id",
             env={}, out=out_file),
        # The same SHA-256 work done by another process beside the SHA-1-checked download (the wall
        # time is both done): what hashing 1 GiB costs on this machine however it is arranged.
        dict(key="speech_nohash_openssl",
             label="speech download checked by SHA-1, beside `openssl dgst -sha256` of the same bytes",
             conns=str(min(conc, 16)), scenarios={"1"}, reference=True,
             argv=lambda d, ep: ["sh", "-c", 'openssl dgst -sha256 "$1" >/dev/null & h=$!; "$2" download "$3" --cache-dir "$4"; s=$?; wait $h || s=1; exit $s',
                                 "sh", a.blob, a.speech, a.nohash_repo, d],
             shown="openssl dgst -sha256 SOURCE & speech download bench/OneGiB-nohash --cache-dir DIR; wait",
             env={}, out=out_file),
        # One connection at scenario 2's cap takes ~53 s and its speed is the cap itself: one run
        # there (max_runs), which keeps the whole bench within its 15 minutes.
        dict(key="aria2", label="aria2c (defaults)", conns="1", scenarios={"1", "2"}, max_runs={"2": 1},
             argv=lambda d, ep: ["aria2c", "-q", "--allow-overwrite=true", "--auto-file-renaming=false",
                                 "-d", d, "-o", a.file, f"{ep}/{a.repo}/resolve/main/{a.file}"],
             shown="aria2c -q --allow-overwrite=true --auto-file-renaming=false -d DIR -o model.safetensors URL",
             env={}, out=out_file),
        dict(key="aria2_16", label="aria2c -x16 -s16 -k8M", conns="16", scenarios={"1", "2"},
             argv=lambda d, ep: ["aria2c", "-q", "--allow-overwrite=true", "--auto-file-renaming=false",
                                 "-x16", "-s16", "-k8M", "-d", d, "-o", a.file,
                                 f"{ep}/{a.repo}/resolve/main/{a.file}"],
             shown="aria2c -q --allow-overwrite=true --auto-file-renaming=false -x16 -s16 -k8M -d DIR -o model.safetensors URL",
             env={}, out=out_file),
        dict(key="hf", label=f"huggingface_hub {hf_new_version}", conns="1", scenarios={"1", "2"}, max_runs={"2": 1},
             argv=lambda d, ep: [a.py_new, a.hf_get, a.repo, d],
             shown=f"python -c 'snapshot_download(\"bench/OneGiB\", local_dir=DIR)'  # huggingface_hub {hf_new_version}",
             env={}, out=out_file),
        dict(key="hft", label=f"huggingface_hub {hf_old_version} + hf_transfer", conns="100",
             scenarios={"1", "2"},
             argv=lambda d, ep: [a.py_old, a.hf_get, a.repo, d],
             shown=f"python -c 'snapshot_download(\"bench/OneGiB\", local_dir=DIR)'  # huggingface_hub {hf_old_version}",
             env={"HF_HUB_ENABLE_HF_TRANSFER": "1"}, out=out_file),
        dict(key="hft16", label=f"huggingface_hub {hf_old_version} + hf_transfer, 16 connections",
             conns="16", scenarios={"1", "2"},
             argv=lambda d, ep: [a.py_old, a.hf_get, a.repo, d],
             shown="python -c 'constants.HF_TRANSFER_CONCURRENCY = 16; snapshot_download(...)'",
             env={"HF_HUB_ENABLE_HF_TRANSFER": "1", "BENCH_HF_TRANSFER_CONCURRENCY": "16"}, out=out_file),
    ]


def definitions(a, wanted):
    """The scenarios of 1 and 2 that are wanted, each with its tools (runs not yet measured)."""
    rate_mib = int(a.rate_limit.rstrip("m"))
    all_tools = tools(a, a.hf_new_version, a.versions["hf_old"])
    if os.environ.get("BENCH_TOOLS"):  # development runs: only these tools (keys of tools())
        only = set(os.environ["BENCH_TOOLS"].split(","))
        all_tools = [t for t in all_tools if t["key"] in only]
    scenarios = []
    if "1" in wanted:
        scenarios.append(dict(key="1", title=f"one {a.size / MIB:.0f} MiB LFS file, no limit", port=a.port_free,
                              description="nginx without a rate limit on loopback: the disk (page cache) "
                                          "and the 2 CPU cores are the limits."))
    if "2" in wanted:
        scenarios.append(dict(key="2", title=f"the same file, nginx `limit_rate {a.rate_limit}` per connection",
                              port=a.port_limited,
                              description=f"Each connection is capped at {rate_mib} MiB/s (a CDN's per-stream "
                                          "cap); more connections go faster. Peers at their defaults and at "
                                          "16 connections. nginx applies `limit_rate` per request, so a "
                                          "client that sends several shorter requests down one connection "
                                          "can end slightly above the cap per connection (× limit above 1)."))
    for sc in scenarios:
        sc["tools"] = [dict(t, runs=[], verified=None) for t in all_tools if sc["key"] in t["scenarios"]]
    return scenarios


def run(a, wanted, base_env, logs, settle, idle_wait, noise_retries):
    """Measures scenarios 1 and 2 (those in wanted), tools alternating, and returns their entries
    for benchmarks.json (limits and ratios included)."""
    scenarios = definitions(a, wanted)

    def one_run(sc, t, rnd, attempt):
        endpoint = f"http://127.0.0.1:{sc['port']}"
        access_log = os.path.join(a.work, "nginx", "logs", f"access-{sc['port']}.log")
        _, dst = fresh_target(a.work, f"s{sc['key']}-{t['key']}-{rnd}")
        env = dict(base_env, HF_ENDPOINT=endpoint, **t["env"])
        log_path = os.path.join(logs, f"s{sc['key']}-{t['key']}-{rnd}-{attempt}.log")
        waited = wait_idle(a.nginx_pid, settle, idle_wait)
        r = measure(t["argv"](dst, endpoint), env, log_path, a.nginx_pid, access_log)
        r["round"] = rnd
        r["waited_s"] = waited
        out = t["out"](dst)
        if r["exit"] == 0 and t["verified"] is None:
            try:
                tv = time.monotonic()
                cpu0 = time.process_time()
                good = os.path.getsize(out) == a.size and sha256_file(out) == a.sha256
                r["verify_wall_s"] = time.monotonic() - tv
                r["verify_cpu_s"] = time.process_time() - cpu0
            except OSError:
                good = False
            t["verified"] = good
            r["verified"] = good
        if log_tail_on_failure(r, log_path):
            print(f"bench: {t['label']} failed (exit {r['exit']}):\n{r['log_tail']}", file=sys.stderr)
        print(f"bench: s{sc['key']} round {rnd + 1}/{a.runs} {t['label']:<52} {r['wall_s']:7.2f} s "
              f"{a.size / MIB / r['wall_s']:7.0f} MiB/s cpu {r['cpu_s']:5.2f} s "
              f"rss {r['maxrss_mib']:5.0f} pss {r['peak_pss_mib']:5.0f} MiB "
              f"req {r['server'].get('requests', 0)}/{r['server'].get('connections', 0)} "
              f"other {r['other_cpu_s']:.2f}"
              + ("" if r["exit"] == 0 else f" EXIT {r['exit']}")
              + ("" if r.get("verified", True) else " WRONG OUTPUT"), file=sys.stderr)
        shutil.rmtree(os.path.join(a.work, "target"), ignore_errors=True)
        return r

    for sc in scenarios:
        ts = sc["tools"]
        for rnd in range(a.runs):
            order = ts[rnd % len(ts):] + ts[:rnd % len(ts)]
            for t in order:
                if rnd >= t.get("max_runs", {}).get(sc["key"], a.runs):
                    continue
                for attempt in range(1 + noise_retries):
                    r = one_run(sc, t, rnd, attempt)
                    if keep(t, r, attempt, long_ok=True, retries=noise_retries, stream=sys.stderr):
                        break

    # Limits and ratios.
    rate_mib = int(a.rate_limit.rstrip("m"))
    disk_limit = None
    for sc in scenarios:
        for t in sc["tools"]:
            t["summary"] = summarize(t, a.size)
        if sc["key"] == "1":
            curl = next(t for t in sc["tools"] if t["key"] == "curl")
            if curl["summary"] is None:
                raise SystemExit("bench: curl failed; no disk limit")
            disk_limit = curl["summary"]["mib_s"]["median"]
            sc["limit_mib_s"] = disk_limit
            sc["limit_basis"] = "`curl -o` of the same file to the same disk (median)"
            cs = curl["summary"]
            if cs["cpu_s"]["median"] >= 0.8 * cs["wall_s"]["median"]:
                sc["limit_basis"] += (f"; curl used {cs['cpu_s']['median']:.2f} CPU s in {cs['wall_s']['median']:.2f} s, "
                                      "so its one stream is bound by one core (loopback receive plus the "
                                      "page-cache write), not by the disk: tools that spread the work over "
                                      "both cores can pass it")
        else:
            cap = 16 * rate_mib
            sc["limit_mib_s"] = cap if disk_limit is None else min(cap, disk_limit)
            sc["limit_basis"] = (f"16 × {rate_mib} MiB/s" if sc["limit_mib_s"] == cap
                                 else "the disk limit of scenario 1, below 16 × the cap")
            if disk_limit is None:
                sc["limit_basis"] += " (scenario 1 not run: disk not measured)"
        ours = next((t for t in sc["tools"] if t.get("ours")), None)
        ours_speed = ours["summary"]["mib_s"]["median"] if ours and ours["summary"] else None
        for t in sc["tools"]:
            if t["summary"]:
                t["summary"]["x_limit"] = t["summary"]["mib_s"]["median"] / sc["limit_mib_s"]
                t["summary"]["x_ours"] = (t["summary"]["mib_s"]["median"] / ours_speed) if ours_speed else None

    return [{"key": sc["key"], "title": sc["title"], "description": sc["description"],
             "limit_mib_s": sc["limit_mib_s"], "limit_basis": sc["limit_basis"],
             "tools": [{k: v for k, v in t.items() if k not in ("argv", "out", "scenarios")} for t in sc["tools"]]}
            for sc in scenarios]
