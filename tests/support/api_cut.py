"""Cutting one broker process off the API server while its Kafka connections stay up.

A TCP forwarder in front of the test kube-apiserver, and a kubeconfig that points a broker at it:
`cut()` closes every connection it carries and closes new ones at once, so that broker alone can
neither renew its Lease nor watch (the others fence it when the Lease lapses), while it keeps
serving and fetching as before; `restore()` forwards again. TLS passes through untouched: the
forwarder listens on the API server's own address, which its certificate names.

    cut = ApiCut(kube_env.kubeconfig, workdir)   # cut.kubeconfig -> the broker's KUBECONFIG
    cut.cut(); ...; cut.restore(); cut.close()
"""

from __future__ import annotations

import selectors
import socket
import threading
from pathlib import Path
from urllib.parse import urlsplit

import yaml


class ApiCut:
    def __init__(self, kubeconfig: Path, workdir: Path) -> None:
        config = yaml.safe_load(Path(kubeconfig).read_text())
        server = urlsplit(config["clusters"][0]["cluster"]["server"])
        self.target = (server.hostname, server.port or 443)
        self._listener = socket.create_server((server.hostname, 0))
        self._listener.settimeout(0.2)
        self.port = self._listener.getsockname()[1]
        config["clusters"][0]["cluster"]["server"] = f"https://{server.hostname}:{self.port}"
        workdir.mkdir(parents=True, exist_ok=True)
        self.kubeconfig = workdir / "kubeconfig-via-cut"
        self.kubeconfig.write_text(yaml.safe_dump(config, sort_keys=False))
        self.kubeconfig.chmod(0o600)
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._cut = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept_loop, name="api-cut", daemon=True)
        self._thread.start()

    def cut(self) -> None:
        with self._lock:
            self._cut = True
            for s in self._open:
                _close(s)
            self._open.clear()

    def restore(self) -> None:
        with self._lock:
            self._cut = False

    def close(self) -> None:
        self._stop.set()
        self.cut()
        self._thread.join(5)
        self._listener.close()

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                cut = self._cut
            if cut:
                _close(client)
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                _close(client)
                continue
            with self._lock:
                self._open.update((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream), name="api-cut-pump", daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        """Bytes both ways until either side (or `cut`) closes."""
        sel = selectors.DefaultSelector()
        try:
            sel.register(a, selectors.EVENT_READ, b)
            sel.register(b, selectors.EVENT_READ, a)
            while not self._stop.is_set():
                for key, _ in sel.select(0.5):
                    data = key.fileobj.recv(65536)
                    if not data:
                        return
                    key.data.sendall(data)
        except (OSError, ValueError):
            return  # closed by cut(), or by a peer
        finally:
            sel.close()
            with self._lock:
                self._open.discard(a)
                self._open.discard(b)
            _close(a)
            _close(b)


def _close(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    s.close()
