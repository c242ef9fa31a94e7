"""sha256.py FILE - prints the file's SHA-256 (OpenSSL through hashlib: faster than sha256sum)."""
import hashlib
import sys


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            block = f.read(8 << 20)
            if not block:
                return h.hexdigest()
            h.update(block)


if __name__ == "__main__":
    print(sha256_file(sys.argv[1]))
