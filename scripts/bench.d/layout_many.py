"""layout_many.py - a Hub-shaped repo of many small git files (scenario 5) for nginx.

  www/api/models/ORG/NAME/{revision,tree}/{main,COMMIT}   revision JSON (siblings) and the
                                                          recursive tree (directories too)
  www/ORG/NAME/resolve/{main,COMMIT}/PATH                 the files
Appends exact-URI entries to the nginx map include files MAPDIR/etag.conf and
MAPDIR/commit.conf (ETag = the git blob id, X-Repo-Commit). Prints the commit id.
File contents are derived from a seeded generator, so a rerun writes the same repo. The writer
is scripts/lib/common.py's write_hub_repo.
"""
import argparse
import hashlib
import json
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from common import HubFile, write_hub_repo  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--www", required=True)
p.add_argument("--repo", required=True)
p.add_argument("--map-dir", required=True)
p.add_argument("--files", type=int, default=500)
a = p.parse_args()

rng = random.Random(5)
dirs = ["", "voices/", "tokenizer/", "config/", "vocab/"]
files = []
for i in range(a.files):
    path = f"{dirs[i % len(dirs)]}item_{i:04d}.json"
    n = rng.randrange(200, 4096)
    body = json.dumps({"id": i, "data": "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789")
                                                for _ in range(n))}).encode()
    files.append(HubFile(path, len(body), body=body))

os.makedirs(a.map_dir, exist_ok=True)
print(write_hub_repo(a.www, a.repo, files, map_dir=a.map_dir,
                     directories=[(d.rstrip("/"), hashlib.sha1(d.encode()).hexdigest()) for d in dirs if d]))
