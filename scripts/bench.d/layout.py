"""layout.py - writes the Hub-shaped static tree nginx serves for one repo with one LFS file.

  www/api/models/ORG/NAME/revision/{main,COMMIT}   revision JSON (sha, siblings)
  www/api/models/ORG/NAME/tree/{main,COMMIT}       tree JSON (nginx ignores ?recursive=...)
  www/ORG/NAME/resolve/{main,COMMIT}/FILE          hard links to the blob
With --no-lfs-repo, a second repo serves the same blob but lists it as a plain git file (no
`lfs` entry, so no SHA-256 to check, only its git blob id, a SHA-1).
Prints the commit id of each repo, one a line (40 hex, derived from the content), then the
second repo's git blob id. The writer is scripts/lib/common.py's write_hub_repo.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from common import HubFile, git_blob_id_file, write_hub_repo  # noqa: E402

p = argparse.ArgumentParser()
for a in ("www", "repo", "file", "blob", "sha256"):
    p.add_argument("--" + a, required=True)
p.add_argument("--size", type=int, required=True)
p.add_argument("--no-lfs-repo")
args = p.parse_args()

print(write_hub_repo(args.www, args.repo, [HubFile(args.file, args.size, source=args.blob, sha256=args.sha256)],
                     library_name="safetensors"))

if args.no_lfs_repo:
    # The content's real git blob id: every file is verified, so this repo measures a download
    # checked by SHA-1 instead of SHA-256.
    oid = git_blob_id_file(args.blob, args.size)
    print(write_hub_repo(args.www, args.no_lfs_repo, [HubFile(args.file, args.size, source=args.blob, oid=oid)],
                         library_name="safetensors"))
    print(oid)
