"""run.py - the runner of scripts/bench (the shell script serves the layout with nginx and starts
this): reads the arguments, describes the machine, runs the wanted scenarios and writes
docs/benchmarks.md and .json through page.py.

The modules, each importing only those below it:
  run.py         this file: arguments, environment, order of the scenarios, the document
  page.py        render + verdict of the page, writing it
  scenario12.py  scenarios 1 and 2 (one layout, one set of tools); scenario3.py .. scenario8.py
  measure.py     process trees, CPU/PSS sampling, measure(), idle waiting, noise keep-or-discard,
                 timing helpers, the machine's description
  ../lib/common.py  hashing, free ports, the Hub-layout writer (shared with the other scripts)

`run.py --render benchmarks.json` rewrites the benchmarks.md beside it from the JSON (the figures
are not touched). Standard library only.
"""
import argparse
import datetime
import json
import os
import platform
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from measure import (MIB, balloon_reports_free_pages, first_line, machine_info, memory_probe,  # noqa: E402
                     pyversion, stop_current)
import page  # noqa: E402
import scenario12  # noqa: E402
import scenario3  # noqa: E402
import scenario4  # noqa: E402
import scenario5  # noqa: E402
import scenario6  # noqa: E402
import scenario7  # noqa: E402
import scenario8  # noqa: E402
from common import sha256_file  # noqa: E402


def arguments():
    p = argparse.ArgumentParser()
    for k in ("work", "repo", "file", "sha256", "commit", "blob", "rate-limit", "scenarios", "speech",
              "py-new", "py-old", "hf-get", "repo-dir", "out-dir"):
        p.add_argument("--" + k, required=True)
    p.add_argument("--nohash-repo", required=True)
    for k in ("fetchd", "wait-rate", "small-repo", "small-commit", "sharded-repo", "sharded-list"):
        p.add_argument("--" + k, default="")
    for k in ("xet-endpoint", "xet-endpoint-capped", "xet-repo", "xet-update-repo", "xet-update-sha256"):
        p.add_argument("--" + k, default="")
    for k in ("xet-hub-pid", "xet-hub-capped-pid", "xet-update-size"):
        p.add_argument("--" + k, type=int, default=0)
    p.add_argument("--port-wait", type=int, default=0)
    p.add_argument("--port-slow", type=int, default=0)
    for k in ("size", "port-free", "port-limited", "nginx-pid", "runs", "quick"):
        p.add_argument("--" + k, type=int, required=True)
    return p.parse_args()


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--render":
        # Rewrites benchmarks.md beside the given benchmarks.json (the figures are not touched).
        with open(sys.argv[2]) as f:
            doc = json.load(f)
        doc["verdict"] = page.verdict(doc)
        out_dir = os.path.dirname(os.path.abspath(sys.argv[2]))
        with open(os.path.join(out_dir, "benchmarks.md"), "w") as f:
            f.write(page.render(doc))
        page.write_lab(doc, out_dir)
        return
    a = arguments()
    signal.signal(signal.SIGTERM, stop_current)
    signal.signal(signal.SIGINT, stop_current)

    wanted = set(a.scenarios.split(","))
    hf_new, hf_old = pyversion(a.py_new, "huggingface_hub"), pyversion(a.py_old, "huggingface_hub")
    versions = {
        "nginx": first_line(["nginx", "-v"], stderr=True).replace("nginx version: ", ""),
        "curl": " ".join(first_line(["curl", "--version"]).split()[:2]),
        "aria2c": first_line(["aria2c", "--version"]),
        "hf_new": hf_new, "hf_old": hf_old, "hf_transfer": pyversion(a.py_old, "hf_transfer"),
        "python": platform.python_version(),
    }
    a.hf_new_version = hf_new
    a.hf_old_version = hf_old
    a.versions = versions

    hf_home = os.path.join(a.work, "hf-home")
    os.makedirs(hf_home, exist_ok=True)
    base_env = {k: v for k, v in os.environ.items()
                if not k.startswith(("HF_", "HUGGING_FACE", "http_proxy", "https_proxy", "HTTP_PROXY",
                                     "HTTPS_PROXY", "all_proxy", "ALL_PROXY"))
                or k.startswith("HF_DOWNLOAD_")}
    base_env.update({"HF_HOME": hf_home, "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1",
                     "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1"})
    logs = os.path.join(a.work, "logs")
    os.makedirs(logs, exist_ok=True)

    # The source in page cache; the VM's memory behaviour.
    sha256_file(a.blob)
    balloon = balloon_reports_free_pages()
    settle = float(os.environ.get("BENCH_SETTLE", "3" if balloon else "1"))
    probe = memory_probe(a.work, a.blob, a.size, settle) if balloon else None

    machine = dict(machine_info(a.work, a.repo_dir), balloon=balloon, memory_probe=probe)
    noise_retries = int(os.environ.get("BENCH_NOISE_RETRIES", "2"))
    idle_wait = float(os.environ.get("BENCH_IDLE_WAIT", "60"))

    t_start = time.monotonic()
    run_id = f"{os.getpid()}@{time.time():.0f}"
    scenarios = scenario12.run(a, wanted, base_env, logs, settle, idle_wait, noise_retries)

    # Every scenario's entry states when, at which commit and in which run it was measured, so
    # that a later run of some scenarios can be merged into the page (page.merge).
    stamp = {"generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
             "commit": machine["speech_fetch_commit"]
             + (" (with uncommitted changes)" if machine["speech_fetch_sources_uncommitted"] else ""),
             "versions": versions, "quick": bool(a.quick), "run": run_id}
    if a.quick:
        stamp["note"] = f"quick run: a {a.size / MIB:.0f} MiB file"
    scenarios = [dict(sc, runs=a.runs, **stamp) for sc in scenarios]
    more_results = {}
    # Scenarios 5 and 6 take no settle pause and no wait for a quiet machine.
    for key, scenario, paced in [("3", scenario3, True), ("4", scenario4, True), ("5", scenario5, False),
                                 ("6", scenario6, False), ("7", scenario7, True), ("8", scenario8, True)]:
        if key in wanted:
            ran = scenario.run(a, base_env, logs, settle, idle_wait) if paced else scenario.run(a, base_env, logs)
            more_results[key] = dict(ran, **stamp)
    out_json = os.path.join(a.out_dir, "benchmarks.json")
    previous = None
    if os.path.exists(out_json):
        with open(out_json) as f:
            previous = json.load(f)
    fresh = {
        "generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "quick": bool(a.quick), "runs": a.runs, "settle_s": settle, "idle_wait_s": idle_wait,
        "noise_retries": noise_retries, "elapsed_s": time.monotonic() - t_start, "run": run_id,
        "script_s": (time.time() - float(os.environ["BENCH_STARTED"])) if os.environ.get("BENCH_STARTED") else None,
        "machine": machine,
        "versions": versions,
        "file": {"repo": a.repo, "path": a.file, "size": a.size, "sha256": a.sha256, "commit": a.commit},
        "scenarios": scenarios, "more": more_results,
    }
    # The scenarios not run this time keep their figures from the page before.
    doc = page.merge(previous, fresh)
    page.write(doc, a.out_dir)
    print(page.render(doc).split("## Machine")[0], file=sys.stderr)
    measured_now = sorted([sc["key"] for sc in scenarios] + list(more_results))
    kept = sorted(k for k in [sc["key"] for sc in doc["scenarios"]] + list(doc.get("more", {}))
                  if k not in measured_now)
    print(f"bench: wrote {a.out_dir}/benchmarks.md and benchmarks.json: scenarios {', '.join(measured_now)} "
          f"measured ({time.monotonic() - t_start:.0f} s of runs)"
          + (f", {', '.join(kept)} kept from the page before" if kept else ""), file=sys.stderr)


if __name__ == "__main__":
    main()
