"""freeport.py [N] - prints N (default 1) distinct free TCP ports on 127.0.0.1, one a line."""
import socket
import sys

count = int(sys.argv[1]) if len(sys.argv) > 1 else 1
socks = []
for _ in range(count):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print("\n".join(str(s.getsockname()[1]) for s in socks))
for s in socks:
    s.close()
