#!/usr/bin/env python3
"""Loopback TCP tap between qwen and the companion, for wire-level diagnosis (E2E_TAP=1).

  tap_proxy.py --target-port P --port-file F --log tap.log

Listens on 127.0.0.1:0, writes its port to F, forwards every connection to
127.0.0.1:P and logs each chunk in both directions (with connection number and time).
The client's "127.0.0.1:<tap port>" (its Host header) is rewritten to
"127.0.0.1:<P>" so that the companion's Host check still sees its own port.
Standard library only.
"""

import argparse
import itertools
import os
import re
import socket
import sys
import threading
import time


BEARER = re.compile(r"(?i)(authorization: *bearer +)\S+")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target-port", type=int, required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    a = ap.parse_args()

    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    port = srv.getsockname()[1]
    host_from = b"127.0.0.1:%d" % port
    host_to = b"127.0.0.1:%d" % a.target_port
    log_lock = threading.Lock()
    log = open(a.log, "a", encoding="utf-8")
    t0 = time.time()

    def record(conn_id, direction, data):
        text = BEARER.sub(r"\1<redacted>", data.decode("utf-8", "replace"))
        with log_lock:
            log.write("[%8.3f] #%d %s %d bytes\n" % (time.time() - t0, conn_id, direction, len(data)))
            for line in text.splitlines():
                log.write("    " + line + "\n")
            log.flush()

    def pump(conn_id, direction, src, dst, rewrite):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if rewrite:
                    data = data.replace(host_from, host_to)
                record(conn_id, direction, data)
                dst.sendall(data)
        except OSError as e:
            record(conn_id, direction, ("<%s>" % e).encode())
        finally:
            record(conn_id, direction, b"<closed>")
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % port)
    os.replace(tmp, a.port_file)

    for conn_id in itertools.count(1):
        client, _ = srv.accept()
        try:
            upstream = socket.create_connection(("127.0.0.1", a.target_port))
        except OSError as e:
            record(conn_id, "!!", ("cannot reach companion: %s" % e).encode())
            client.close()
            continue
        threading.Thread(target=pump, args=(conn_id, "C>S", client, upstream, True), daemon=True).start()
        threading.Thread(target=pump, args=(conn_id, "S>C", upstream, client, False), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
