"""scenario5.py - scenario 5 of scripts/bench: the second call on a complete cache, a
repo of 500 small git files on nginx without a limit: ours online and --offline, huggingface_hub's
cached snapshot_download online and with HF_HUB_OFFLINE=1, and `speech --help` as the floor.
BENCH_S5_RUNS sets the runs per tool (default 10). run() returns its entry of benchmarks.json's
"more" (page.py renders it).
"""
import os
import time

from measure import log_tail_on_failure, med, read_log, rng, timed

S5_RUNS = int(os.environ.get("BENCH_S5_RUNS", "10"))


def run(a, base_env, logs):
    endpoint = f"http://127.0.0.1:{a.port_free}"
    access_log = os.path.join(a.work, "nginx", "logs", f"access-{a.port_free}.log")
    root = os.path.join(a.work, "s5")
    base = os.path.join(root, "speech-base")
    hf_home = os.path.join(root, "hf-home")
    os.makedirs(base, exist_ok=True)
    os.makedirs(hf_home, exist_ok=True)
    env = dict(base_env, HF_ENDPOINT=endpoint, HF_HOME=hf_home)
    call_time = os.path.join(root, "hf-call-time")
    tools = [
        dict(key="speech_online", label="speech download (ours), online", ours=True,
             argv=[a.speech, "download", a.small_repo, "--cache-base", base], env={},
             shown="speech download bench/Small500 --cache-base DIR"),
        dict(key="speech_offline", label="speech download --offline (ours)", ours=True,
             argv=[a.speech, "download", a.small_repo, "--cache-base", base, "--offline"], env={},
             shown="speech download bench/Small500 --cache-base DIR --offline"),
        dict(key="hf_online", label=f"huggingface_hub {a.hf_new_version} snapshot_download, cached",
             argv=[a.py_new, a.hf_get, a.small_repo], env={"BENCH_HF_CALL_TIME": call_time},
             shown="python -c 'snapshot_download(\"bench/Small500\")'  # HF_HOME holds the complete snapshot"),
        dict(key="hf_offline", label=f"huggingface_hub {a.hf_new_version} snapshot_download, HF_HUB_OFFLINE=1",
             argv=[a.py_new, a.hf_get, a.small_repo], env={"BENCH_HF_CALL_TIME": call_time, "HF_HUB_OFFLINE": "1"},
             shown="HF_HUB_OFFLINE=1 python -c 'snapshot_download(\"bench/Small500\")'"),
        dict(key="speech_start", label="speech --help (process start and exit only) *(reference)*", reference=True,
             argv=[a.speech, "--help"], env={}, shown="speech --help"),
    ]
    # The first calls fill both caches.
    fill = {}
    for key, argv in (("speech", tools[0]["argv"]), ("hf", tools[2]["argv"])):
        r = timed(argv, env, os.path.join(logs, f"s5-fill-{key}.log"), access_log)
        time.sleep(0.2)
        r["server"] = read_log(access_log, r.pop("log_offset"))
        fill[key] = r
        print(f"bench: s5 first call {key}: {r['wall_s']:.2f} s, {r['server'].get('requests', 0)} requests"
              + ("" if r["exit"] == 0 else f" EXIT {r['exit']}"), flush=True)
        if r["exit"] != 0:
            with open(os.path.join(logs, f"s5-fill-{key}.log"), errors="replace") as f:
                print(f.read()[-2000:], flush=True)
    files = sum(len([n for n in fs if not n.startswith(".")]) for d, _, fs in
                os.walk(os.path.join(base, "models", a.small_repo)) if "/." not in d)
    for t in tools:
        t["runs"] = []
    for rnd in range(S5_RUNS + 1):  # round 0 warms up and is not counted
        order = tools[rnd % len(tools):] + tools[:rnd % len(tools)]
        for t in order:
            if os.path.exists(call_time):
                os.unlink(call_time)
            log_path = os.path.join(logs, f"s5-{t['key']}-{rnd}.log")
            r = timed(t["argv"], dict(env, **t["env"]), log_path, access_log)
            time.sleep(0.05)
            r["server"] = read_log(access_log, r.pop("log_offset"))
            r["round"] = rnd
            try:
                with open(call_time) as f:
                    r["call_s"] = float(f.read())
            except (OSError, ValueError):
                pass
            if log_tail_on_failure(r, log_path):
                print(f"bench: s5 {t['label']} EXIT {r['exit']}: {r['log_tail'][-400:]}", flush=True)
            if rnd:
                t["runs"].append(r)
    for t in tools:
        ok = [r for r in t["runs"] if r["exit"] == 0]
        t["summary"] = None if not ok else {
            "wall_ms": rng([r["wall_s"] * 1000 for r in ok]),
            "cpu_ms": rng([r["cpu_s"] * 1000 for r in ok]),
            "call_ms": rng([r["call_s"] * 1000 for r in ok if "call_s" in r]),
            "requests": med([r["server"].get("requests", 0) for r in ok]),
            "methods": ok[len(ok) // 2]["server"].get("methods", {}),
        }
        print(f"bench: s5 {t['label']:<60} median {t['summary']['wall_ms']['median'] if t['summary'] else float('nan'):8.1f} ms"
              f" requests {t['summary']['requests'] if t['summary'] else '-'}", flush=True)
        del t["argv"]
    return {"key": "5", "title": "second call on a complete cache, 500 small files", "runs": S5_RUNS,
            "repo": a.small_repo, "files_in_our_cache": files, "fill": fill, "tools": tools}
