"""layout_sharded.py - scenario 3's repo for nginx: the blob cut into N LFS shards, the shard index
naming them, a consolidated copy (the whole blob, LFS) the index does not name, and small git
JSON/vocab files.

  www/api/models/ORG/NAME/{revision,tree}/{main,COMMIT}
  www/ORG/NAME/resolve/{main,COMMIT}/PATH      shards and the consolidated copy hard-linked
Appends exact-URI entries to MAPDIR/{etag,linked_etag,linked_size,commit}.conf.
Prints the commit, the bytes a downloader that follows the index fetches, then one line per
fetched file: PATH SIZE SHA256 (SHA256 '-' for git files).
"""
import argparse
import hashlib
import json
import os
import random

p = argparse.ArgumentParser()
for k in ("www", "repo", "map-dir", "blob", "blob-sha256", "work"):
    p.add_argument("--" + k, required=True)
p.add_argument("--shards", type=int, default=4)
p.add_argument("--small", type=int, default=30)
a = p.parse_args()

size = os.path.getsize(a.blob)
shard_size = size // a.shards
shards_dir = os.path.join(a.work, "shards")
os.makedirs(shards_dir, exist_ok=True)
entries = []  # (path, size, sha256 or None, source file or None, bytes or None)
with open(a.blob, "rb") as src:
    for i in range(a.shards):
        name = f"model-{i + 1:05d}-of-{a.shards:05d}.safetensors"
        dst = os.path.join(shards_dir, name)
        h = hashlib.sha256()
        n = shard_size if i < a.shards - 1 else size - shard_size * (a.shards - 1)
        with open(dst, "wb") as out:
            left = n
            while left:
                chunk = src.read(min(left, 8 << 20))
                h.update(chunk)
                out.write(chunk)
                left -= len(chunk)
        entries.append((name, n, h.hexdigest(), dst, None))
index = {"metadata": {"total_size": size},
         "weight_map": {f"model.layers.{j}.weight": entries[j % a.shards][0] for j in range(4 * a.shards)}}
entries.append(("model.safetensors.index.json", 0, None, None, json.dumps(index, indent=2).encode()))
entries.append(("consolidated.safetensors", size, a.blob_sha256, a.blob, None))
rng = random.Random(3)
names = ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
         "special_tokens_map.json", "vocab.json", "merges.txt", "vocab.txt", "preprocessor_config.json",
         "chat_template.json"]
for i in range(a.small):
    name = names[i] if i < len(names) else f"extra/vocab_{i:02d}.json"
    n = rng.randrange(1 << 10, 1 << 20)
    entries.append((name, n, None, None, rng.randbytes(n)))
entries = [(pth, len(b) if b is not None else n, sha, srcf, b) for pth, n, sha, srcf, b in entries]


def pointer(sha, n):
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha}\nsize {n}\n".encode()


def git_oid(body):
    return hashlib.sha1(b"blob %d\0" % len(body) + body).hexdigest()


oids = {}
for pth, n, sha, srcf, b in entries:
    oids[pth] = git_oid(pointer(sha, n) if sha else b)
commit = hashlib.sha1(("speech-fetch bench " + a.repo + "".join(sorted(oids.values()))).encode()).hexdigest()
siblings, tree = [], [{"type": "directory", "path": "extra", "size": 0, "oid": hashlib.sha1(b"extra").hexdigest()}]
for pth, n, sha, srcf, b in sorted(entries):
    sib = {"rfilename": pth, "size": n, "blobId": oids[pth]}
    ent = {"type": "file", "path": pth, "size": n, "oid": oids[pth]}
    if sha:
        lfs = {"sha256": sha, "size": n, "pointerSize": len(pointer(sha, n))}
        sib["lfs"] = lfs
        ent["lfs"] = {"oid": sha, "size": n, "pointerSize": lfs["pointerSize"]}
    siblings.append(sib)
    tree.append(ent)
revision = {"_id": commit[:24], "id": a.repo, "modelId": a.repo, "author": a.repo.split("/")[0], "sha": commit,
            "lastModified": "2025-01-01T00:00:00.000Z", "private": False, "gated": False, "disabled": False,
            "downloads": 0, "likes": 0, "tags": [], "library_name": "safetensors",
            "createdAt": "2025-01-01T00:00:00.000Z", "usedStorage": sum(e[1] for e in entries),
            "siblings": siblings}
api = os.path.join(a.www, "api", "models", a.repo)
maps = {k: open(os.path.join(a.map_dir, k + ".conf"), "a") for k in ("etag", "linked_etag", "linked_size", "commit")}
for rev in ("main", commit):
    for kind, doc in (("revision", revision), ("tree", tree)):
        os.makedirs(os.path.join(api, kind), exist_ok=True)
        with open(os.path.join(api, kind, rev), "w") as f:
            json.dump(doc, f)
    maps["commit"].write(f"    ~^/{a.repo}/resolve/{rev}/ '{commit}';\n")
    for pth, n, sha, srcf, b in entries:
        target = os.path.join(a.www, a.repo, "resolve", rev, pth)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if srcf:
            os.link(srcf, target)
        else:
            with open(target, "wb") as f:
                f.write(b)
        uri = f"/{a.repo}/resolve/{rev}/{pth}"
        if sha:
            maps["etag"].write(f"    {uri} '\"{sha}\"';\n")
            maps["linked_etag"].write(f"    {uri} '\"{sha}\"';\n")
            maps["linked_size"].write(f"    {uri} '{n}';\n")
        else:
            maps["etag"].write(f"    {uri} '\"{oids[pth]}\"';\n")
for f in maps.values():
    f.close()
fetched = [e for e in entries if e[0] != "consolidated.safetensors"]
print(commit)
print(sum(e[1] for e in fetched))
for pth, n, sha, srcf, b in fetched:
    print(pth, n, sha or hashlib.sha256(b).hexdigest())
