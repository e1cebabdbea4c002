"""Many client connections read in one thread through one selector, as a browser's or a
client library's event loop reads them: each connection is an object with a `sock` (None once
closed); the subclass's `_read(item)` takes one read of a connection that is readable."""

import selectors
import time


class SocketReader:
    def __init__(self):
        self.sel = selectors.DefaultSelector()
        self.items = []
        self.open = 0

    def add(self, item):
        """Counts `item`, whose `sock` is connected, among the open connections (read once
        `watch`ed)."""
        self.items.append(item)
        self.open += 1

    def watch(self, item):
        """Reads `item`'s connection from now on (non-blocking)."""
        item.sock.setblocking(False)
        self.sel.register(item.sock, selectors.EVENT_READ, item)

    def close(self, item):
        """Closes `item`'s connection (once)."""
        if item.sock is not None:
            try:
                self.sel.unregister(item.sock)
            except (KeyError, ValueError):
                pass
            item.sock.close()
            item.sock = None
            self.open -= 1

    def _read(self, item):
        raise NotImplementedError

    def poll(self):
        """Reads what has come already, without waiting."""
        if self.open:
            for key, _ in self.sel.select(timeout=0):
                self._read(key.data)

    def pump(self, until, done, on_tick=None):
        """Reads until `done()` or `until` (monotonic), calling `on_tick()` between reads."""
        while True:
            if on_tick:
                on_tick()
            now = time.monotonic()
            if done() or now >= until or self.open == 0:
                return
            for key, _ in self.sel.select(timeout=min(0.05, until - now)):
                self._read(key.data)

    def close_all(self):
        for item in self.items:
            self.close(item)
        self.sel.close()
