"""layout.py - writes the Hub-shaped static tree nginx serves for one repo with one LFS file.

  www/api/models/ORG/NAME/revision/{main,COMMIT}   revision JSON (sha, siblings)
  www/api/models/ORG/NAME/tree/{main,COMMIT}       tree JSON (nginx ignores ?recursive=...)
  www/ORG/NAME/resolve/{main,COMMIT}/FILE          hard links to the blob
With --no-lfs-repo, a second repo serves the same blob but lists it as a plain git file (no
`lfs` entry, so no SHA-256 to check, only its git blob id, a SHA-1).
Prints the commit id of each repo, one a line (40 hex, derived from the content).
"""
import argparse
import hashlib
import json
import os

p = argparse.ArgumentParser()
for a in ("www", "repo", "file", "blob", "sha256"):
    p.add_argument("--" + a, required=True)
p.add_argument("--size", type=int, required=True)
p.add_argument("--no-lfs-repo")
args = p.parse_args()


def write_repo(repo, commit, revision, tree):
    api = os.path.join(args.www, "api", "models", repo)
    for rev in ("main", commit):
        for kind, doc in (("revision", revision), ("tree", tree)):
            os.makedirs(os.path.join(api, kind), exist_ok=True)
            with open(os.path.join(api, kind, rev), "w") as f:
                json.dump(doc, f)
        target = os.path.join(args.www, repo, "resolve", rev, args.file)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if os.path.exists(target):
            os.unlink(target)
        os.link(args.blob, target)


pointer = (f"version https://git-lfs.github.com/spec/v1\noid sha256:{args.sha256}\n"
           f"size {args.size}\n").encode()
git_oid = hashlib.sha1(b"blob %d\0" % len(pointer) + pointer).hexdigest()
commit = hashlib.sha1(f"speech-fetch bench {args.repo} {args.file} {git_oid}".encode()).hexdigest()

lfs = {"oid": args.sha256, "size": args.size, "pointerSize": len(pointer)}
revision = {
    "_id": commit[:24], "id": args.repo, "modelId": args.repo, "author": args.repo.split("/")[0],
    "sha": commit, "lastModified": "2025-01-01T00:00:00.000Z", "private": False, "gated": False,
    "disabled": False, "downloads": 0, "likes": 0, "tags": [], "library_name": "safetensors",
    "createdAt": "2025-01-01T00:00:00.000Z", "usedStorage": args.size,
    "siblings": [{"rfilename": args.file, "size": args.size,
                  "blobId": git_oid, "lfs": {"sha256": args.sha256, "size": args.size,
                                              "pointerSize": len(pointer)}}],
}
tree = [{"type": "file", "path": args.file, "size": args.size, "oid": git_oid, "lfs": lfs}]

write_repo(args.repo, commit, revision, tree)
print(commit)

if args.no_lfs_repo:
    # The content's real git blob id (SHA-1 of "blob <size>\0" and the bytes): every file is
    # verified, so this repo measures a download checked by SHA-1 instead of SHA-256.
    h = hashlib.sha1(b"blob %d\0" % args.size)
    with open(args.blob, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    oid2 = h.hexdigest()
    commit2 = hashlib.sha1(f"speech-fetch bench {args.no_lfs_repo} {args.file} {oid2}".encode()).hexdigest()
    revision2 = dict(revision, _id=commit2[:24], id=args.no_lfs_repo, modelId=args.no_lfs_repo, sha=commit2,
                     siblings=[{"rfilename": args.file, "size": args.size, "blobId": oid2}])
    tree2 = [{"type": "file", "path": args.file, "size": args.size, "oid": oid2}]
    write_repo(args.no_lfs_repo, commit2, revision2, tree2)
    print(commit2)
    print(oid2)
