"""net-hostile.py - a hostile guest client of mayfly's proxy (run in the guest by run-net-tests.sh):
10,000 connection attempts to a name no rule allows, a 1 MiB CONNECT line, and a
client that starts a 64 MiB download and never reads. Prints one line per part."""
import os
import socket
import time

PROXY = ("127.0.0.1", 3128)


def attempt(payload):
    s = socket.create_connection(PROXY, timeout=30)
    try:
        s.sendall(payload)
    except OSError:
        pass
    data = b""
    try:
        while True:
            d = s.recv(4096)
            if not d:
                break
            data += d
    except OSError:
        pass
    s.close()
    return data


refused = 0
for i in range(int(os.environ.get("ATTEMPTS", "10000"))):
    if attempt(b"CONNECT nope.test:443 HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 403"):
        refused += 1
print("refused", refused)

answer = attempt(b"CONNECT " + b"a" * (1 << 20) + b" HTTP/1.1\r\n\r\n")
print("long line:", answer.split(b" ")[1].decode() if answer.startswith(b"HTTP/1.1 ") else answer[:40])

stalled = socket.create_connection(PROXY, timeout=30)
stalled.sendall(b"GET http://files.test:8080/big HTTP/1.1\r\nHost: files.test\r\n\r\n")
time.sleep(3)   # the server sends; nobody reads
ok = attempt(b"GET http://files.test:8080/alive HTTP/1.1\r\nHost: files.test\r\n\r\n")
print("stalled reader:", "host alive" if b"netserve /alive" in ok else ok[:80])
stalled.close()
