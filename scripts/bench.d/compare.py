"""compare.py - ours before and after a change, from two scripts/bench runs into separate folders,
added to the lab page (docs/lab/benchmarks.md, "Before and after") so that it says whether a change moved
scenarios 1, 2 and 4 beyond the runs' noise.

Usage:
  python3 scripts/bench.d/compare.py BEFORE_DIR AFTER_DIR --title TEXT --command TEXT \\
      [--note TEXT] [--into docs/benchmarks.json]
BEFORE_DIR and AFTER_DIR are two BENCH_OUT_DIRs (each with the benchmarks.json of a run of the same
scenarios, the binaries given by BENCH_SPEECH_BIN/BENCH_FETCHD_BIN/BENCH_SPEECH_COMMIT). A tool's
figures are within noise when the two runs' min–max ranges of MiB/s overlap. The comparison is
appended to the document's `comparisons`, and both pages are rendered again (the page of current
figures links the lab page); the figures of the scenarios are not touched.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import page  # noqa: E402


def ours(doc):
    """{(scenario, tool label): summary} of our tools in a bench document (scenarios 1, 2 and 4)."""
    found = {}
    for sc in doc.get("scenarios", []):
        for t in sc["tools"]:
            if t.get("ours") and t.get("summary"):
                found[(sc["key"], t["label"])] = t["summary"]
    for t in doc.get("more", {}).get("4", {}).get("tools", []):
        if t.get("summary"):
            found[("4", t["label"])] = t["summary"]
    return found


def compare(before, after, title, command, note=None):
    rows = []
    a_ours = ours(after)
    for key, b in sorted(ours(before).items()):
        a = a_ours.get(key)
        if a is None:
            continue
        bm, am = b["mib_s"], a["mib_s"]
        rows.append({"scenario": key[0], "tool": key[1],
                     "mib_s_before": bm, "mib_s_after": am,
                     "cpu_s_before": b["cpu_s"], "cpu_s_after": a["cpu_s"],
                     "within_noise": am["min"] <= bm["max"] and bm["min"] <= am["max"]})
    return {"title": title, "command": command, "generated": after["generated"],
            "before": page.commit_of(before), "after": page.commit_of(after), "runs": after["runs"], "rows": rows,
            "note": note}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("before")
    p.add_argument("after")
    p.add_argument("--title", required=True)
    p.add_argument("--command", required=True)
    p.add_argument("--note", help="what the reader should know of the two runs (the machine's load, say)")
    p.add_argument("--into", default=os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "docs", "benchmarks.json"))
    a = p.parse_args()
    docs = []
    for d in (a.before, a.after):
        with open(os.path.join(d, "benchmarks.json")) as f:
            docs.append(json.load(f))
    entry = compare(docs[0], docs[1], a.title, a.command, a.note)
    with open(a.into) as f:
        doc = json.load(f)
    doc.setdefault("comparisons", []).append(entry)
    page.write(doc, os.path.dirname(os.path.abspath(a.into)))
    for r in entry["rows"]:
        print(f"compare: scenario {r['scenario']} {r['tool']}: {r['mib_s_before']['median']:.0f} -> "
              f"{r['mib_s_after']['median']:.0f} MiB/s ({'within' if r['within_noise'] else 'BEYOND'} noise)")


if __name__ == "__main__":
    main()
