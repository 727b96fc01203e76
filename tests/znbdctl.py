"""The zone control socket's client, on the standard library alone, so
that a caller without the nbd module (python3 -S in the guest, where the
site module's imports cost seconds in TCG) uses the same one as the
tests (znbdtest re-exports it)."""
import socket


def control(path, line, timeout=5.0):
    """Send one request LINE to the zone control socket PATH
    (zone_control=PATH; grammar in include/znbd/control.h) and return the
    reply text, all lines, read until the server closes after our EOF."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(path)
        s.sendall(line.encode() + b"\n")
        s.shutdown(socket.SHUT_WR)
        out = b""
        while True:
            c = s.recv(65536)
            if not c:
                break
            out += c
    finally:
        s.close()
    return out.decode()
