"""faultproxy - an HTTP/1.1 proxy between speech-fetch and the test Hub that injects faults.

The client is pointed at the proxy's Hub port (HF_ENDPOINT); the proxy's CDN port stands for the
CDN, a host of its own as on the real Hub. A redirect's Location is rewritten to the proxy's CDN
port, so every body the client reads crosses the proxy. Each response may get one fault, drawn at random:

  drop      the body is cut after a random share and the connection reset (RST)
  truncate  the body is cut after a random share and the connection closed cleanly (FIN),
            fewer bytes than Content-Length
  stall     the body pauses for `stall_seconds` after a random share, then goes on
  flip      one byte of the body is XORed 0xFF (the client must catch it by digest)
  status    503 or 429 with Retry-After: 1, the upstream never asked
  expired   (CDN only) 403 "Request has expired", as a CDN says of a signed URL past its time

The Xet path crosses it too: the CAS is the test Hub's CDN listener, so every header value and
every API answer's body (the token's `casUrl`, a reconstruction's pre-signed xorb URLs) has the
Hub's and CDN's ports rewritten to the proxy's. Xorb bodies (`/xorbs/`) are logged as file bodies
under `xorb:<hash>` (offsets in the xorb); reconstructions are API answers, not file bodies.

One request per client connection (the proxy answers `Connection: close`). It counts the body
bytes it sent to clients, which is what the Hub and CDN served, and the faults per kind. It also
keeps a log of every file body (`take_log`): which file, from which offset, how many bytes were
written to the client's socket and how many of them the client's kernel acknowledged (TCP_INFO's
bytes_acked), and which fault it carried, so a soak can tell where the bytes beyond each byte once
went.
"""
import fcntl
import io
import random
import re
import socket
import struct
import termios
import threading
import time

FAULT_KINDS = ("drop", "truncate", "stall", "flip", "status", "expired")


class FaultProxy:
    def __init__(self, hub_port, cdn_port, rate, seed, stall_seconds=3.0, kinds=FAULT_KINDS):
        self.hub_port = hub_port
        self.cdn_port = cdn_port
        self.rate = rate
        self.random = random.Random(seed)
        self.stall_seconds = stall_seconds
        self.kinds = kinds
        self.lock = threading.Lock()
        self.body_bytes = 0
        self.acked_bytes = 0
        self.requests = 0
        self.log = []  # one dict per file body, appended when the response ends
        self.faults = {k: 0 for k in FAULT_KINDS}
        self.enabled = True
        self.listeners = []
        for is_cdn in (False, True):
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", 0))
            listener.listen(256)
            self.listeners.append(listener)
            threading.Thread(target=self._accept, args=(listener, is_cdn), daemon=True).start()
        self.port = self.listeners[0].getsockname()[1]
        self.cdn_proxy_port = self.listeners[1].getsockname()[1]
        self.base = f"http://127.0.0.1:{self.port}"

    def stats(self):
        with self.lock:
            return {"requests": self.requests, "bodyBytes": self.body_bytes, "ackedBytes": self.acked_bytes,
                    "faults": dict(self.faults)}

    def take_log(self):
        """The file bodies logged since the last call: dicts with file, start, sent, acked, fault,
        began, ended (monotonic seconds)."""
        with self.lock:
            taken, self.log = self.log, []
            return taken

    def _accept(self, listener, is_cdn):
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn, is_cdn), daemon=True).start()

    def _draw(self, is_cdn, has_body_request, is_file):
        with self.lock:
            self.requests += 1
            if not self.enabled or self.random.random() >= self.rate:
                return None, 0.0
            # A flipped byte is what a bad disk or cache upstream does to a file; API answers
            # reach a real client through TLS, which would catch it, so they are not flipped.
            kinds = [k for k in self.kinds if (k != "expired" or is_cdn)
                     and (k in ("status", "expired") or has_body_request)
                     and (k != "flip" or is_file)]
            if not kinds:
                return None, 0.0
            kind = self.random.choice(kinds)
            self.faults[kind] += 1
            return kind, self.random.random()

    def _count(self, n, counting, entry=None):
        if not counting:
            return
        with self.lock:
            self.body_bytes += n
            if entry is not None:
                entry["sent"] += n

    def _serve(self, conn, is_cdn):
        counting = False
        entry = None
        try:
            conn.settimeout(120)
            head = read_head(conn)
            if head is None:
                return
            request_line, headers = head
            method, target, _ = request_line.split(" ", 2)
            # File bodies (resolve, CDN, bridge, xorbs), not API answers (a reconstruction is the CAS's).
            counting = "/resolve/" in target or (is_cdn and "/reconstructions/" not in target)
            kind, share = self._draw(is_cdn, method == "GET", counting)
            if kind == "status":
                code = self.random.choice((503, 429))
                body = b'{"error":"injected by faultproxy"}'
                conn.sendall((f"HTTP/1.1 {code} Injected\r\nRetry-After: 1\r\nContent-Type: application/json\r\n"
                              f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body)
                return
            if kind == "expired":
                body = b"<?xml version=\"1.0\"?><Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>"
                conn.sendall((f"HTTP/1.1 403 Forbidden\r\nContent-Type: application/xml\r\n"
                              f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body)
                return
            upstream = socket.create_connection(("127.0.0.1", self.cdn_port if is_cdn else self.hub_port))
            upstream.settimeout(120)
            out = [request_line]
            for name, value in headers:
                if name.lower() in ("connection", "keep-alive", "proxy-connection"):
                    continue
                out.append(f"{name}: {value}")
            out.append("Connection: close")
            upstream.sendall(("\r\n".join(out) + "\r\n\r\n").encode("latin-1"))
            rhead = read_head(upstream)
            if rhead is None:
                upstream.close()
                return
            status_line, rheaders = rhead
            length = None
            out = [status_line]
            for name, value in rheaders:
                low = name.lower()
                if low in ("connection", "keep-alive"):
                    continue
                if low == "content-length":
                    length = int(value)
                # Location, and the Xet headers (X-Xet-Cas-Url, the xet-auth Link).
                value = self._through_proxy(value)
                out.append(f"{name}: {value}")
            body = None
            if not counting and method != "HEAD" and length and length <= (64 << 20):
                # An API answer, read whole: the URLs it names (the CAS, pre-signed xorb URLs) go
                # through the proxy too.
                body = b""
                while len(body) < length:
                    chunk = upstream.recv(min(65536, length - len(body)))
                    if not chunk:
                        break
                    body += chunk
                body = self._through_proxy(body.decode("latin-1")).encode("latin-1")
                out = [f"Content-Length: {len(body)}" if line.lower().startswith("content-length:") else line for line in out]
            out.append("Connection: close")
            head = ("\r\n".join(out) + "\r\n\r\n").encode("latin-1")
            receive = upstream.recv
            if body is not None:
                # The rewritten answer goes out through the same loop: its faults as before.
                length = len(body)
                source = io.BytesIO(body)
                receive = source.read
            conn.sendall(head)
            if method == "HEAD" or not length:
                upstream.close()
                return
            if counting:
                entry = {"file": file_of(target), "start": range_start(headers), "sent": 0, "acked": None,
                         "fault": kind, "began": time.monotonic(), "ended": None, "head": len(head)}
            cut = int(length * share) if kind in ("drop", "truncate", "stall", "flip") else None
            sent = 0
            while sent < length:
                chunk = receive(min(65536, length - sent))
                if not chunk:
                    break
                if cut is not None and sent <= cut < sent + len(chunk):
                    if kind == "flip":
                        i = cut - sent
                        chunk = chunk[:i] + bytes([chunk[i] ^ 0xFF]) + chunk[i + 1:]
                    elif kind == "stall":
                        conn.sendall(chunk[:cut - sent])
                        self._count(cut - sent, counting, entry)
                        time.sleep(self.stall_seconds)
                        chunk = chunk[cut - sent:]
                        sent = cut
                        cut = None
                    else:
                        part = chunk[:cut - sent]
                        conn.sendall(part)
                        self._count(len(part), counting, entry)
                        if kind == "drop":
                            # A reset throws away what the socket has not sent yet: count what arrived.
                            self._settle(entry, conn, wait=False)
                            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                        upstream.close()
                        return
                conn.sendall(chunk)
                self._count(len(chunk), counting, entry)
                sent += len(chunk)
            upstream.close()
        except OSError:
            pass
        finally:
            self._settle(entry, conn, wait=True)
            try:
                conn.close()
            except OSError:
                pass

    def _through_proxy(self, text):
        """`text` with the Hub's and the CDN's 127.0.0.1 ports replaced by the proxy's."""
        text = re.sub(rf"127\.0\.0\.1:{self.cdn_port}(?!\d)", f"127.0.0.1:{self.cdn_proxy_port}", text)
        return re.sub(rf"127\.0\.0\.1:{self.hub_port}(?!\d)", f"127.0.0.1:{self.port}", text)

    def _settle(self, entry, conn, wait):
        """Logs a file body once: how many of its bytes the client's kernel acknowledged. With
        `wait`, first lets the socket drain (up to 2 s): a live client acknowledges at once, a
        killed one's kernel resets the connection, and either way the count is then final."""
        if entry is None or entry["acked"] is not None:
            return
        acked = None
        try:
            deadline = time.monotonic() + 2.0
            while True:
                info = conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
                unsent = struct.unpack("i", fcntl.ioctl(conn.fileno(), termios.TIOCOUTQ, b"\0\0\0\0"))[0]
                if not wait or unsent == 0 or info[0] not in (1, 8) or time.monotonic() > deadline:
                    break  # 1 ESTABLISHED, 8 CLOSE_WAIT: the peer may still acknowledge
                time.sleep(0.005)
            if len(info) >= 128:
                acked = max(0, min(entry["sent"], struct.unpack_from("Q", info, 120)[0] - entry["head"]))
        except OSError:
            pass
        entry["acked"] = entry["sent"] if acked is None else acked
        entry["ended"] = time.monotonic()
        with self.lock:
            self.acked_bytes += entry["acked"]
            self.log.append(entry)


def file_of(target):
    """The repo path of a file body's URL: /cdn/org/name/commit/PATH or /org/name/resolve/rev/PATH;
    `xorb:<hash>` for a xorb's (/xorbs/HASH?…: its offsets are the xorb's)."""
    path = target.split("?", 1)[0]
    if path.startswith("/xorbs/"):
        return "xorb:" + path[len("/xorbs/"):]
    return "/".join(path.split("/")[5:])


def range_start(headers):
    """The first byte a request's `Range: bytes=a-b` asks for (0 without one)."""
    for name, value in headers:
        if name.lower() == "range" and value.strip().lower().startswith("bytes="):
            first = value.strip()[6:].split("-", 1)[0].strip()
            if first.isdigit():
                return int(first)
    return 0


def read_head(sock):
    """Reads an HTTP head; returns (first line, [(name, value)]) or None at EOF."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(1)  # byte by byte: the body that follows is not ours to read here
        if not chunk:
            return None
        data += chunk
        if len(data) > 65536:
            return None
    lines = data.decode("latin-1").split("\r\n")
    headers = []
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers.append((name.strip(), value.strip()))
    return lines[0], headers
