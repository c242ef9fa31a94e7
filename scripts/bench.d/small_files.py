"""small_files.py - the runner of scripts/bench-small-files (the shell script serves the repo of
many small files with nginx and starts this): runs scenario 9 and merges its entry into
docs/benchmarks.json's "more", then writes docs/benchmarks.md through page.py (the other
scenarios keep their figures). Standard library only.
"""
import argparse
import datetime
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from measure import machine_info  # noqa: E402
import page  # noqa: E402
import scenario9  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    for k in ("work", "repo", "speech", "fetchd", "repo-dir", "out-dir", "load", "command"):
        p.add_argument("--" + k, required=True)
    for k in ("files", "bytes", "port", "nginx-pid", "runs", "strace"):
        p.add_argument("--" + k, type=int, required=True)
    a = p.parse_args()
    base_env = {k: v for k, v in os.environ.items()
                if not k.startswith(("HF_", "HUGGING_FACE", "http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY",
                                     "all_proxy", "ALL_PROXY", "SPEECH_FETCH_"))}
    logs = os.path.join(a.work, "logs")
    os.makedirs(logs, exist_ok=True)
    settle = float(os.environ.get("BENCH_SETTLE", "1"))
    idle_wait = float(os.environ.get("BENCH_IDLE_WAIT", "30"))
    machine = machine_info(a.work, a.repo_dir)
    entry = scenario9.run(a, base_env, logs, settle, idle_wait)
    entry.update({"generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                  "commit": machine["speech_fetch_commit"]
                  + (" (with uncommitted changes)" if machine["speech_fetch_sources_uncommitted"] else ""),
                  "run": f"{os.getpid()}@small-files", "quick": False})
    out_json = os.path.join(a.out_dir, "benchmarks.json")
    with open(out_json) as f:
        doc = json.load(f)
    doc.setdefault("more", {})["9"] = entry
    page.write(doc, a.out_dir)
    for line in scenario9.verdict(entry):
        print(line, file=sys.stderr)
    print(f"bench-small-files: wrote scenario 9 into {a.out_dir}/benchmarks.md and benchmarks.json", file=sys.stderr)
    ceiling = os.environ.get("SF_MAX_RATIO")
    if ceiling:
        # The check scripts/test runs: every round's daemon-hosted wall time within `ceiling` times
        # the same round's embedded one (a ratio within one run: both modes share the machine's load).
        x = entry.get("ratio_daemon_embedded")
        if not x:
            print("bench-small-files: FAILED: a mode failed (see the runs above)", file=sys.stderr)
            sys.exit(1)
        if x["max"] > float(ceiling):
            print(f"bench-small-files: FAILED: daemon-hosted took {x['max']:.2f}x the embedded time "
                  f"(at most {ceiling}x)", file=sys.stderr)
            sys.exit(1)
        print(f"bench-small-files: daemon-hosted within {ceiling}x the embedded time ({x['max']:.2f}x)", file=sys.stderr)


if __name__ == "__main__":
    main()
