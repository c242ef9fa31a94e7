"""selftest.py - checks of scripts/bench that need no network, no nginx and no binary (a second or
so; scripts/test runs it):

  layers   each module of bench.d imports only modules on a lower floor (measure.py
           at the bottom, the scenario modules above them, page.py above those, run.py on top;
           the small helper commands import none of them), so there is no import cycle.
  page     docs/benchmarks.json renders into a page with every section, through run.py --render,
           and its comparisons of builds into lab/benchmarks.md, which the page links.
  merge    a run of some scenarios (1 and 4; 5 alone; all six) merged into that document keeps the
           others' figures and stamps, and the page says which were measured when, at which commit.

Usage: python3 scripts/bench.d/selftest.py   (exit 0: all passed; else each failure on stderr)
"""
import ast
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

# The floor of every module; a module may import only modules on a lower floor.
FLOORS = {
    "measure": 0,
    "scenario12": 1, "scenario3": 1, "scenario4": 1, "scenario5": 1, "scenario6": 1, "scenario7": 1, "scenario8": 1, "scenario9": 1,
    "page": 2,
    "run": 3, "compare": 3, "small_files": 3,
    # Commands the shell script runs on their own; they import nothing of bench.d.
    "hf_get": 0, "layout": 0, "layout_many": 0, "layout_sharded": 0,
    "selftest": 4,
}

failures = []


def fail(msg):
    failures.append(msg)
    print(f"selftest: FAIL {msg}", file=sys.stderr)


def local_imports(path, local):
    """Names of bench.d modules that the module at path imports (at any depth of its code)."""
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return sorted(n for n in names if n in local)


def check_layers():
    modules = sorted(f[:-3] for f in os.listdir(HERE) if f.endswith(".py"))
    graph = {}
    for m in modules:
        if m not in FLOORS:
            fail(f"layers: {m}.py has no floor in selftest.py's FLOORS; add it there")
            continue
        graph[m] = local_imports(os.path.join(HERE, m + ".py"), set(modules))
        for dep in graph[m]:
            if dep in FLOORS and FLOORS[dep] >= FLOORS[m]:
                fail(f"layers: {m}.py (floor {FLOORS[m]}) imports {dep}.py (floor {FLOORS[dep]}); "
                     "a module may import only lower floors")
    # Cycles follow from the floors; check them anyway, so that a wrong FLOORS table cannot hide one.
    state = {}

    def visit(m, path):
        if state.get(m) == "done":
            return
        if state.get(m) == "open":
            fail("layers: import cycle " + " -> ".join(path + [m]))
            return
        state[m] = "open"
        for dep in graph.get(m, []):
            visit(dep, path + [m])
        state[m] = "done"

    for m in graph:
        visit(m, [])
    return graph


def check_render(doc, label, sections):
    """Renders doc through run.py --render in a temp dir; returns the page text."""
    tmp = tempfile.mkdtemp(prefix="bench-selftest.")
    try:
        path = os.path.join(tmp, "benchmarks.json")
        with open(path, "w") as f:
            json.dump(doc, f)
        r = subprocess.run([sys.executable, os.path.join(HERE, "run.py"), "--render", path],
                           capture_output=True, text=True)
        if r.returncode != 0:
            fail(f"{label}: run.py --render failed: {r.stderr.strip()[-500:]}")
            return ""
        with open(os.path.join(tmp, "benchmarks.md")) as f:
            text = f.read()
        # Comparisons of builds go to the lab page, which the page links; the page keeps none.
        lab = os.path.join(tmp, "lab", "benchmarks.md")
        if doc.get("comparisons"):
            if not os.path.exists(lab):
                fail(f"{label}: the document has comparisons but no lab/benchmarks.md was written")
            else:
                with open(lab) as f:
                    if "\n## Before and after" not in f.read():
                        fail(f"{label}: lab/benchmarks.md has no section '## Before and after'")
            if "(lab/benchmarks.md)" not in text:
                fail(f"{label}: the page does not link lab/benchmarks.md")
        if "\n## Before and after" in text:
            fail(f"{label}: the page holds the comparisons of builds; they belong on lab/benchmarks.md")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for s in sections:
        if f"\n## {s}" not in text:
            fail(f"{label}: the page has no section starting '## {s}'")
    return text


def a_run(previous, keys, generated, run, commit):
    """The document of a run that measured `keys`, made of previous's figures under a new stamp
    (what run.py hands page.merge)."""
    st = {"generated": generated, "run": run, "commit": commit, "runs": 1, "quick": False}
    fresh = copy.deepcopy(previous)
    fresh.update(generated=generated, run=run, runs=1)
    fresh["machine"]["speech_fetch_commit"] = commit
    fresh["machine"]["speech_fetch_sources_uncommitted"] = False
    fresh["scenarios"] = [dict(sc, **st) for sc in fresh["scenarios"] if sc["key"] in keys]
    fresh["more"] = {k: dict(v, **st) for k, v in fresh["more"].items() if k in keys}
    return fresh


def expect(label, cond, msg):
    if not cond:
        fail(f"{label}: {msg}")


def check_merge(page_doc, every):
    import page
    # The page's figures as one run, its entries of 1-2 without stamps (as pages before the merge
    # of any subset wrote them), whatever runs docs/benchmarks.json combines today.
    previous = a_run(page_doc, set("123456"), "2098-12-31 00:00 UTC", "t@0", "base0")
    for sc in previous["scenarios"]:
        for k in ("generated", "commit", "run", "runs", "quick", "versions", "note"):
            sc.pop(k, None)
    prev_run, prev_gen, prev_commit = "t@0", "2098-12-31 00:00 UTC", "base0"

    # Scenarios 1 and 4 (not 2): 2, 3, 5 and 6 keep their figures and the earlier run's stamp.
    doc = page.merge(copy.deepcopy(previous), a_run(previous, {"1", "4"}, "2099-01-02 03:04 UTC", "t@1", "feedface"))
    label = "merge of 1 and 4"
    expect(label, [sc["key"] for sc in doc["scenarios"]] == ["1", "2"],
           f"scenarios {[sc['key'] for sc in doc['scenarios']]}, not 1 and 2")
    expect(label, sorted(doc.get("more", {})) == ["3", "4", "5", "6"], f"more has {sorted(doc.get('more', {}))}")
    runs = {sc["key"]: sc.get("run") for sc in doc["scenarios"]}
    runs.update({k: v.get("run") for k, v in doc.get("more", {}).items()})
    expect(label, runs == {"1": "t@1", "2": prev_run, "3": prev_run, "4": "t@1", "5": prev_run, "6": prev_run},
           f"runs per scenario {runs}")
    s2 = next((sc for sc in doc["scenarios"] if sc["key"] == "2"), {})
    old2 = next(sc for sc in previous["scenarios"] if sc["key"] == "2")
    expect(label, s2.get("tools") == old2["tools"], "scenario 2's figures changed")
    expect(label, (s2.get("generated"), s2.get("commit")) == (prev_gen, prev_commit),
           f"scenario 2 stamped {s2.get('generated')} at {s2.get('commit')}, not {prev_gen} at {prev_commit}")
    expect(label, doc["run"] == "t@1" and doc["generated"] == "2099-01-02 03:04 UTC", "top-level run not the new one")
    text = check_render(doc, label, every)
    want = (f"Measured in 2 runs and merged into this page: scenarios 1 and 4 on 2099-01-02 03:04 UTC at "
            f"speech-fetch feedface (the run the machine and method sections describe); scenarios 2, 3, 5 and 6 on "
            f"{prev_gen} at speech-fetch {prev_commit}.")
    expect(label, want in text, f"the page does not say which scenarios were measured when: want '{want}'")
    expect(label, f"Measured {prev_gen} at speech-fetch {prev_commit}, 1 run(s)." in text,
           "scenario 2's section does not state its run")

    # Scenario 5 alone: the top-level fields stay those of the run of 1-2; the page's date is new.
    doc = page.merge(copy.deepcopy(previous), a_run(previous, {"5"}, "2099-01-03 00:00 UTC", "t@2", "beef"))
    label = "merge of 5"
    expect(label, [sc["key"] for sc in doc["scenarios"]] == ["1", "2"] and sorted(doc.get("more", {})) == list("3456"),
           "scenarios lost")
    expect(label, doc["run"] == prev_run and doc["machine"] == previous["machine"], "top-level run replaced")
    expect(label, doc["generated"] == "2099-01-03 00:00 UTC", "the page's date is not the run's")
    expect(label, doc["more"]["5"]["run"] == "t@2" and doc["more"]["6"]["run"] == prev_run, "scenario 5 not merged")
    text = check_render(doc, label, every)
    expect(label, "scenario 5 on 2099-01-03 00:00 UTC at speech-fetch beef;" in text, "page does not name 5's run")

    # All six: one run, no merge paragraph.
    doc = page.merge(copy.deepcopy(previous), a_run(previous, set("123456"), "2099-01-04 00:00 UTC", "t@3", "cafe"))
    text = check_render(doc, "merge of all", every)
    expect("merge of all", "Measured in" not in text, "a page of one run says it was merged")


def main():
    graph = check_layers()
    with open(os.path.join(REPO, "docs", "benchmarks.json")) as f:
        doc = json.load(f)
    every = ["Verdict"] + [f"Scenario {k}:" for k in "123456"] + ["Machine", "Method"]
    check_render(doc, "page", every)
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(HERE, "..", "lib"))
    check_merge(doc, every)
    if failures:
        print(f"selftest: {len(failures)} failure(s)", file=sys.stderr)
        return 1
    print("selftest: imports " + "; ".join(f"{m} -> {', '.join(d) or '-'}" for m, d in sorted(graph.items())),
          file=sys.stderr)
    print("selftest: all passed", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
