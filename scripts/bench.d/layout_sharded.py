"""layout_sharded.py - scenario 3's repo for nginx: the blob cut into N LFS shards, the shard index
naming them, a consolidated copy (the whole blob, LFS) the index does not name, and small git
JSON/vocab files.

  www/api/models/ORG/NAME/{revision,tree}/{main,COMMIT}
  www/ORG/NAME/resolve/{main,COMMIT}/PATH      shards and the consolidated copy hard-linked
Appends exact-URI entries to MAPDIR/{etag,linked_etag,linked_size,commit}.conf.
Prints the commit, the bytes a downloader that follows the index fetches, then one line per
fetched file: PATH SIZE SHA256 (SHA256 '-' for git files). The writer is scripts/lib/common.py's
write_hub_repo.
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
commit = write_hub_repo(a.www, a.repo, [HubFile(pth, n, body=b, source=srcf, sha256=sha) for pth, n, sha, srcf, b in entries],
                        map_dir=a.map_dir, directories=[("extra", hashlib.sha1(b"extra").hexdigest())],
                        library_name="safetensors")
fetched = [e for e in entries if e[0] != "consolidated.safetensors"]
print(commit)
print(sum(e[1] for e in fetched))
for pth, n, sha, srcf, b in fetched:
    print(pth, n, sha or hashlib.sha256(b).hexdigest())
