"""layout_many.py - a Hub-shaped repo of many small git files (scenario 5) for nginx.

  www/api/models/ORG/NAME/{revision,tree}/{main,COMMIT}   revision JSON (siblings) and the
                                                          recursive tree (directories too)
  www/ORG/NAME/resolve/{main,COMMIT}/PATH                 the files
Appends exact-URI entries to the nginx map include files MAPDIR/etag.conf and
MAPDIR/commit.conf (ETag = the git blob id, X-Repo-Commit). Prints the commit id.
File contents are derived from a seeded generator, so a rerun writes the same repo.
"""
import argparse
import hashlib
import json
import os
import random

p = argparse.ArgumentParser()
p.add_argument("--www", required=True)
p.add_argument("--repo", required=True)
p.add_argument("--map-dir", required=True)
p.add_argument("--files", type=int, default=500)
a = p.parse_args()

rng = random.Random(5)
dirs = ["", "voices/", "tokenizer/", "config/", "vocab/"]
files = {}
for i in range(a.files):
    path = f"{dirs[i % len(dirs)]}item_{i:04d}.json"
    n = rng.randrange(200, 4096)
    body = json.dumps({"id": i, "data": "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789")
                                                for _ in range(n))}).encode()
    files[path] = body

oids = {p: hashlib.sha1(b"blob %d\0" % len(b) + b).hexdigest() for p, b in files.items()}
commit = hashlib.sha1(("speech-fetch bench " + a.repo + "".join(sorted(oids.values()))).encode()).hexdigest()
revision = {"_id": commit[:24], "id": a.repo, "modelId": a.repo, "author": a.repo.split("/")[0],
            "sha": commit, "lastModified": "2025-01-01T00:00:00.000Z", "private": False, "gated": False,
            "disabled": False, "downloads": 0, "likes": 0, "tags": [],
            "createdAt": "2025-01-01T00:00:00.000Z", "usedStorage": sum(len(b) for b in files.values()),
            "siblings": [{"rfilename": p, "size": len(b), "blobId": oids[p]} for p, b in sorted(files.items())]}
tree = [{"type": "directory", "path": d.rstrip("/"), "size": 0,
         "oid": hashlib.sha1(d.encode()).hexdigest()} for d in dirs if d]
tree += [{"type": "file", "path": p, "size": len(b), "oid": oids[p]} for p, b in sorted(files.items())]

api = os.path.join(a.www, "api", "models", a.repo)
os.makedirs(a.map_dir, exist_ok=True)
with open(os.path.join(a.map_dir, "etag.conf"), "a") as etag, \
        open(os.path.join(a.map_dir, "commit.conf"), "a") as com:
    for rev in ("main", commit):
        for kind, doc in (("revision", revision), ("tree", tree)):
            os.makedirs(os.path.join(api, kind), exist_ok=True)
            with open(os.path.join(api, kind, rev), "w") as f:
                json.dump(doc, f)
        com.write(f"    ~^/{a.repo}/resolve/{rev}/ '{commit}';\n")
        for path, body in files.items():
            target = os.path.join(a.www, a.repo, "resolve", rev, path)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as f:
                f.write(body)
            etag.write(f"    /{a.repo}/resolve/{rev}/{path} '\"{oids[path]}\"';\n")
print(commit)
