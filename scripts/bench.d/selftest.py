"""selftest.py - checks of scripts/bench that need no network, no nginx and no binary (a second or
so; scripts/test runs it):

  layers   each module of bench.d imports only modules on a lower floor (measure.py and sha256.py
           at the bottom, the scenario modules above them, page.py above those, run.py on top;
           the small helper commands import none of them), so there is no import cycle.
  page     docs/benchmarks.json renders into a page with every section, through run.py --render.

Usage: python3 scripts/bench.d/selftest.py   (exit 0: all passed; else each failure on stderr)
"""
import ast
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
    "sha256": 0, "measure": 0,
    "scenario12": 1, "scenario3": 1, "scenario4": 1, "scenario5": 1, "scenario6": 1,
    "page": 2,
    "run": 3,
    # Commands the shell script runs on their own; they import nothing of bench.d.
    "freeport": 0, "hf_get": 0, "layout": 0, "layout_many": 0, "layout_sharded": 0,
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
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for s in sections:
        if f"\n## {s}" not in text:
            fail(f"{label}: the page has no section starting '## {s}'")
    return text


def main():
    graph = check_layers()
    with open(os.path.join(REPO, "docs", "benchmarks.json")) as f:
        doc = json.load(f)
    every = ["Verdict"] + [f"Scenario {k}:" for k in "123456"] + ["Machine", "Method"]
    check_render(doc, "page", every)
    if failures:
        print(f"selftest: {len(failures)} failure(s)", file=sys.stderr)
        return 1
    print("selftest: imports " + "; ".join(f"{m} -> {', '.join(d) or '-'}" for m, d in sorted(graph.items())),
          file=sys.stderr)
    print("selftest: all passed", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
