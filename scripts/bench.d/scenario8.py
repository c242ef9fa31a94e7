"""scenario8.py - scenario 8 of scripts/bench: Xet. `speech download` (native Xet: chunks
decoded, hashed, Merkle root and SHA-256 checked) against hf_xet under huggingface_hub (the
newest line's venv, `snapshot_download`), both on speech-testhub --xet (the shell script starts
it: one without a limit, one with a per-connection `rateLimit` on every body, xorb ranges
included). Three parts:

  S1      scenario 1's file, no limit
  S2      the same, every connection paced to `limit_rate` (the capped test Hub)
  update  revision 2 of the file (1 KiB inserted at 40 %, 16 bytes overwritten at 70 %; another
          repo on the same CAS, the test Hub having no history) fetched into the cache that holds
          revision 1: the xorb bytes the CAS served for it (the test Hub's counters) and the wall time

Every run ends with `sync` inside the timed command, like every tool of scripts/bench (`/usr/bin/time`
times `sh -c 'TOOL && sync'`). run() returns its entry of benchmarks.json's "more"; render() and
verdict() are what page.py prints for it.
"""
import glob
import json
import os
import shutil
import urllib.request

from measure import MIB, fresh_target, keep, log_tail_on_failure, measure, rng, wait_idle
from common import sha256_file

TOOLS = (("speech", "speech download (ours, native Xet, verified)"),
         ("hf_xet", "hf_xet under huggingface_hub (snapshot_download)"))


def hf_xet_version(python):
    import subprocess
    try:
        return subprocess.run([python, "-c", "import importlib.metadata as m; print(m.version('hf-xet'))"],
                              capture_output=True, text=True, timeout=60).stdout.strip() or "?"
    except Exception:
        return "?"


def counters(endpoint):
    with urllib.request.urlopen(endpoint + "/_testhub/counters", timeout=10) as r:
        return json.load(r)


def argv_of(a, key, repo, dest, base):
    """The timed command: the tool, then sync."""
    if key == "speech":
        tool = f"'{a.speech}' download '{repo}' --cache-base '{base}'"
    else:
        tool = f"'{a.py_new}' '{a.hf_get}' '{repo}'" + (f" '{dest}'" if dest else "")
    return ["sh", "-c", tool + " && sync"]


def output_of(a, key, repo, dest, base):
    if key == "speech":
        return os.path.join(base, "models", repo, a.file)
    if dest:
        return os.path.join(dest, a.file)
    found = glob.glob(os.path.join(base, "hf-home", "hub", "models--" + repo.replace("/", "--"), "snapshots", "*", a.file))
    return found[0] if found else ""


def one(a, key, label, part, rnd, endpoint, hub_pid, repo, sha, env, logs, settle, idle_wait, t, prepare=None):
    for attempt in range(3):
        target, base = fresh_target(a.work, f"s8-{part}-{key}-{rnd}")
        # hf_xet: into a local folder, or (the update) into its cache, where revision 1 went too.
        dest = None if prepare else os.path.join(base, "local")
        run_env = dict(env, HF_ENDPOINT=endpoint, HF_HOME=os.path.join(base, "hf-home"))
        log_path = os.path.join(logs, f"s8-{part}-{key}-{rnd}-{attempt}.log")
        if prepare:
            prepare(key, base, dest, run_env, log_path)
        waited = wait_idle(hub_pid, settle, idle_wait)
        before = counters(endpoint)
        r = measure(argv_of(a, key, repo, dest, base), run_env, log_path, hub_pid, "")
        after = counters(endpoint)
        r.update(round=rnd, waited_s=waited,
                 xorb_bytes=after["xorbBytes"] - before["xorbBytes"],
                 bridge_bytes=after["bridgeBytes"] - before["bridgeBytes"],
                 reconstructions=after["reconstructions"] - before["reconstructions"])
        out = output_of(a, key, repo, dest, base)
        if r["exit"] == 0:
            r["verified"] = os.path.exists(out) and sha256_file(out) == sha
        log_tail_on_failure(r, log_path)
        print(f"bench: s8 {part} round {rnd + 1}/{a.runs} {label:<52} {r['wall_s']:6.2f} s cpu {r['cpu_s']:5.2f} s "
              f"rss {r['maxrss_mib'] or 0:5.0f} MiB xorb {r['xorb_bytes'] / MIB:7.1f} MiB bridge {r['bridge_bytes']}"
              + ("" if r["exit"] == 0 else f" EXIT {r['exit']}") + ("" if r.get("verified", True) else " NOT VERIFIED"),
              flush=True)
        shutil.rmtree(target, ignore_errors=True)
        if keep(t, r, attempt, long_ok=True):
            break


def summary(t, size):
    ok = [r for r in t["runs"] if r["exit"] == 0]
    if not ok:
        return None
    return {"wall_s": rng([r["wall_s"] for r in ok]), "mib_s": rng([size / MIB / r["wall_s"] for r in ok]),
            "cpu_s": rng([r["cpu_s"] for r in ok]), "maxrss_mib": rng([r["maxrss_mib"] or 0 for r in ok]),
            "xorb_mib": rng([r["xorb_bytes"] / MIB for r in ok]), "bridge_bytes": max(r["bridge_bytes"] for r in ok),
            "verified": all(r.get("verified") for r in ok)}


def run(a, base_env, logs, settle, idle_wait):
    parts = []
    for part, endpoint, hub_pid in (("S1", a.xet_endpoint, a.xet_hub_pid), ("S2", a.xet_endpoint_capped, a.xet_hub_capped_pid)):
        tools = [dict(key=k, label=label, runs=[]) for k, label in TOOLS]
        for rnd in range(a.runs):
            for t in tools[rnd % 2:] + tools[:rnd % 2]:
                one(a, t["key"], t["label"], part, rnd, endpoint, hub_pid, a.xet_repo, a.sha256, base_env, logs,
                    settle, idle_wait, t)
        for t in tools:
            t["summary"] = summary(t, a.size)
        parts.append({"key": part, "tools": tools})

    # The update: revision 1 fetched first (not timed), revision 2 timed into the same cache.
    def prepare(key, base, dest, env, log_path):
        import subprocess
        subprocess.run(argv_of(a, key, a.xet_repo, dest, base), env=env, check=True,
                       stdout=open(log_path + ".rev1", "w"), stderr=subprocess.STDOUT)

    tools = [dict(key=k, label=label, runs=[]) for k, label in TOOLS]
    for rnd in range(a.runs):
        for t in tools[rnd % 2:] + tools[:rnd % 2]:
            # hf_xet: revision 1 into its cache (HF_HOME), revision 2 likewise (what a user's
            # second snapshot_download does); ours: both into one cache base.
            one(a, t["key"], t["label"], "update", rnd, a.xet_endpoint, a.xet_hub_pid, a.xet_update_repo,
                a.xet_update_sha256, base_env, logs, settle, idle_wait, t, prepare=prepare)
    for t in tools:
        t["summary"] = summary(t, a.xet_update_size)
    parts.append({"key": "update", "tools": tools})
    return {"key": "8", "title": "Xet: ours against hf_xet on the test Hub's Xet path", "runs": a.runs,
            "hf_xet": hf_xet_version(a.py_new),
            "size": a.size, "update_size": a.xet_update_size, "limit": a.rate_limit, "parts": parts}


def render(sc, header, fr, tool_rows):
    L = ["", f"## Scenario 8: {sc['title']}", "",
         f"`speech-testhub --xet` serves scenario 1's file ({sc['size'] / MIB:.0f} MiB) as Xet: chunks cut by the "
         "gear-hash CDC, xorbs of at most 64 MiB, the Xet headers on resolve, reconstructions and pre-signed xorb "
         "ranges. `speech download REPO --cache-base DIR` fetches it natively (every chunk decoded and hashed where "
         "it arrives, the Merkle root and the SHA-256 checked; docs/xet.md); hf_xet " + sc.get("hf_xet", "?") + " under "
         "the newest huggingface_hub runs `snapshot_download` into a local folder (it verifies nothing). Each timed "
         "command ends with `sync`. S2 paces every connection, xorb ranges included, to "
         f"`{sc['limit']}` bytes/s. Update: revision 2 ({sc['update_size'] / MIB:.1f} MiB: 1 KiB inserted at 40 %, "
         "16 bytes overwritten at 70 %) is another repo on the same CAS; each tool first fetches revision 1 into "
         "its cache (not timed), then revision 2 into the same cache; \"xorb MiB\" is what the test Hub's CAS "
         "served for it.", "", header(sc), ""]
    for part in sc["parts"]:
        L += [f"**{part['key']}**", "",
              "| tool | wall s | MiB/s | CPU s | max RSS MiB | xorb MiB | bridge bytes | verified |",
              "|---|---|---|---|---|---|---|---|"]
        L += tool_rows(part["tools"], 7, lambda t, s: (
            f"| {t['label']} | {fr(s['wall_s'], '{:.2f}')} | {fr(s['mib_s'], '{:.0f}')} | {fr(s['cpu_s'], '{:.2f}')} | "
            f"{fr(s['maxrss_mib'], '{:.0f}')} | {fr(s['xorb_mib'], '{:.2f}')} | {s['bridge_bytes']} | "
            f"{'yes' if s['verified'] else '**no**'} |"))
        L.append("")
    return L


def verdict(sc):
    out = []
    for part in sc["parts"]:
        s = {t["key"]: t["summary"] for t in part["tools"]}
        ours, theirs = s.get("speech"), s.get("hf_xet")
        if not ours or not theirs:
            out.append(f"- Scenario 8 {part['key']}: **a tool failed** in every run (see benchmarks.json).")
            continue
        x = theirs["wall_s"]["median"] / ours["wall_s"]["median"]
        line = (f"- Scenario 8 {part['key']}: ours {ours['wall_s']['median']:.2f} s against hf_xet "
                f"{theirs['wall_s']['median']:.2f} s: **{x:.2f}×** its speed; CPU {ours['cpu_s']['median']:.2f} s "
                f"against {theirs['cpu_s']['median']:.2f} s; max RSS {ours['maxrss_mib']['median']:.0f} MiB against "
                f"{theirs['maxrss_mib']['median']:.0f} MiB")
        if part["key"] == "update":
            line += (f"; xorb bytes served for revision 2: ours {ours['xorb_mib']['median']:.2f} MiB, hf_xet "
                     f"{theirs['xorb_mib']['median']:.2f} MiB")
        out.append(line + ".")
    return out
