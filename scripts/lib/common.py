"""common.py - the Python helpers more than one script of scripts/ needs (standard library only).

  free_ports(n)         n distinct free TCP ports on 127.0.0.1
  sha256_file(path)     a file's SHA-256 (OpenSSL through hashlib: faster than sha256sum)
  git_blob_id(body), git_blob_id_file(path, size)
                        the git blob id (SHA-1 of `blob <size>\\0` and the bytes)
  speech_commands(speech)
                        `speech`'s commands that have a help of their own, as word lists, read
                        from its --help (the table is in the Swift source alone): its commands in
                        the help's order, `cache` last, then `cache ls`, `cache verify`, ... from
                        `speech cache --help`'s usage line
  HubFile, write_hub_repo(...)
                        the one writer of a Hub-shaped static tree (the API's revision and tree
                        JSON, the resolve URLs' files, nginx's map entries) that scripts/bench
                        serves with nginx; its layout_*.py commands describe their repos with it

As a command, for the shell scripts:
  python3 scripts/lib/common.py free-ports N    N free ports, one a line
  python3 scripts/lib/common.py sha256 FILE     the file's SHA-256
  python3 scripts/lib/common.py speech-commands SPEECH
                                                speech_commands, one command a line ("cache ls")

Scripts import it after `sys.path.insert(0, <scripts/lib>)`; scripts/lib/common.sh is the shell
scripts' counterpart.
"""
import hashlib
import itertools
import json
import os
import socket
import subprocess
import sys


def free_ports(count=1):
    """`count` distinct free TCP ports on 127.0.0.1 (all bound at once, so none repeats)."""
    socks = []
    for _ in range(count):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def free_port():
    return free_ports(1)[0]


def _hash_file(h, path):
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(8 << 20), b""):
            h.update(block)
    return h.hexdigest()


def sha256_file(path):
    return _hash_file(hashlib.sha256(), path)


def git_blob_id(body):
    return hashlib.sha1(b"blob %d\0" % len(body) + body).hexdigest()


def git_blob_id_file(path, size):
    return _hash_file(hashlib.sha1(b"blob %d\0" % size), path)


def speech_commands(speech):
    def help_lines(*words):
        return subprocess.run([speech, *words, "--help"], capture_output=True, text=True, check=True).stdout.splitlines()

    lines = help_lines()
    rows = itertools.takewhile(lambda line: line.startswith(" "), lines[lines.index("commands:") + 1:])
    # A command's row starts two spaces in, a wrapped summary further in.
    names = [row.split()[0] for row in rows if not row.startswith("   ")]
    usage = help_lines("cache")[0]  # usage: speech cache <ls | verify | ...> [...]
    return ([[n] for n in names if n not in ("help", "cache")] + [["cache"]]
            + [["cache", c.strip()] for c in usage[usage.index("<") + 1:usage.index(">")].split("|")])


def lfs_pointer(sha256, size):
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


class HubFile:
    """One file of a repo: its bytes (`body`) or a file to hard-link (`source`); `sha256` makes it
    an LFS file (listed with its pointer's git blob id); `oid` overrides the git blob id of a git
    file whose bytes sit in `source`."""

    def __init__(self, path, size, body=None, source=None, sha256=None, oid=None):
        self.path, self.size, self.body, self.source, self.sha256 = path, size, body, source, sha256
        if sha256:
            self.pointer_size = len(lfs_pointer(sha256, size))
            self.oid = git_blob_id(lfs_pointer(sha256, size))
        else:
            self.oid = oid or git_blob_id(body)

    def sibling(self):
        entry = {"rfilename": self.path, "size": self.size, "blobId": self.oid}
        if self.sha256:
            entry["lfs"] = {"sha256": self.sha256, "size": self.size, "pointerSize": self.pointer_size}
        return entry

    def tree_entry(self):
        entry = {"type": "file", "path": self.path, "size": self.size, "oid": self.oid}
        if self.sha256:
            entry["lfs"] = {"oid": self.sha256, "size": self.size, "pointerSize": self.pointer_size}
        return entry


def hub_commit(repo, files):
    """A commit id derived from the repo and its files' blob ids: a rerun writes the same one."""
    return hashlib.sha1(("speech-fetch bench " + repo + "".join(sorted(f.oid for f in files))).encode()).hexdigest()


def write_hub_repo(www, repo, files, map_dir=None, directories=(), library_name=None):
    """Writes `repo` at `main` and at its commit into `www`:
      www/api/models/ORG/NAME/{revision,tree}/{main,COMMIT}   revision JSON (siblings) and the
                                                              recursive tree (`directories`, as
                                                              (path, oid), first)
      www/ORG/NAME/resolve/{main,COMMIT}/PATH                 the files (bodies, or hard links)
    With `map_dir`, appends exact-URI entries to nginx's map include files there: etag.conf (the
    sha256 of an LFS file, else the git blob id), commit.conf (X-Repo-Commit), and for LFS files
    linked_etag.conf and linked_size.conf. Returns the commit."""
    files = sorted(files, key=lambda f: f.path)
    commit = hub_commit(repo, files)
    revision = {"_id": commit[:24], "id": repo, "modelId": repo, "author": repo.split("/")[0], "sha": commit,
                "lastModified": "2025-01-01T00:00:00.000Z", "private": False, "gated": False, "disabled": False,
                "downloads": 0, "likes": 0, "tags": []}
    if library_name:
        revision["library_name"] = library_name
    revision.update({"createdAt": "2025-01-01T00:00:00.000Z", "usedStorage": sum(f.size for f in files),
                     "siblings": [f.sibling() for f in files]})
    tree = [{"type": "directory", "path": d, "size": 0, "oid": oid} for d, oid in directories]
    tree += [f.tree_entry() for f in files]
    names = ["etag", "commit"] + (["linked_etag", "linked_size"] if map_dir and any(f.sha256 for f in files) else [])
    maps = {k: open(os.path.join(map_dir, k + ".conf"), "a") for k in names} if map_dir else {}
    api = os.path.join(www, "api", "models", repo)
    for rev in ("main", commit):
        for kind, doc in (("revision", revision), ("tree", tree)):
            os.makedirs(os.path.join(api, kind), exist_ok=True)
            with open(os.path.join(api, kind, rev), "w") as f:
                json.dump(doc, f)
        if maps:
            maps["commit"].write(f"    ~^/{repo}/resolve/{rev}/ '{commit}';\n")
        for file in files:
            target = os.path.join(www, repo, "resolve", rev, file.path)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            if os.path.lexists(target):
                os.unlink(target)
            if file.source:
                os.link(file.source, target)
            else:
                with open(target, "wb") as f:
                    f.write(file.body)
            if maps:
                uri = f"/{repo}/resolve/{rev}/{file.path}"
                maps["etag"].write(f"    {uri} '\"{file.sha256 or file.oid}\"';\n")
                if file.sha256:
                    maps["linked_etag"].write(f"    {uri} '\"{file.sha256}\"';\n")
                    maps["linked_size"].write(f"    {uri} '{file.size}';\n")
    for f in maps.values():
        f.close()
    return commit


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "free-ports":
        print("\n".join(str(p) for p in free_ports(int(sys.argv[2]))))
    elif len(sys.argv) == 3 and sys.argv[1] == "sha256":
        print(sha256_file(sys.argv[2]))
    elif len(sys.argv) == 3 and sys.argv[1] == "speech-commands":
        print("\n".join(" ".join(words) for words in speech_commands(sys.argv[2])))
    else:
        sys.exit("usage: common.py free-ports N | sha256 FILE")
