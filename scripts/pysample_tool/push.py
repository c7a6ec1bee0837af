# push.py - `pysample serve --push URL`: the Pyroscope model.  Every EVERY
# seconds one record session of EVERY seconds in each armed process, sent as
# pprof to URL/ingest (multipart field "profile", as Pyroscope's own Go
# client sends it) with name=SERVICE{labels}, one push per service.
#
# A server that is down or slow must cost the sidecar nothing: recording
# never waits for sending (a queue between them), the queue holds at most
# QUEUE_MAX profiles (the oldest is dropped, and said so, when a new one
# comes), and each push gives up after --push-timeout.  So a server that
# comes back gets the profiles from then on; the ones it missed are lost.
#
# SPDX-License-Identifier: MIT

import collections
import threading
import time
import uuid
from urllib.error import HTTPError, URLError
from urllib.parse import quote, urlsplit
from urllib.request import Request, urlopen

from . import remote, targets
from .common import ToolError

QUEUE_MAX = 4
SPY_NAME = "pysample"


def ingest_url(base):
    parts = urlsplit(base)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ToolError("--push takes the server's URL (http://pyroscope:4040), not %r" % base)
    base = base.rstrip("/")
    return base if base.endswith("/ingest") else base + "/ingest"


def _name(service, labels):
    """SERVICE{k=v,...}: Pyroscope's application name with its tags (its
    names allow letters, digits and ._-; other characters become _)."""
    def clean(text):
        return "".join(c if c.isalnum() or c in "._-" else "_" for c in text)
    tags = ",".join("%s=%s" % (clean(k), clean(v)) for k, v in labels if v)
    return "%s{%s}" % (clean(service), tags)


def _multipart(pprof):
    boundary = uuid.uuid4().hex
    body = (("--%s\r\nContent-Disposition: form-data; name=\"profile\"; filename=\"profile.pprof\"\r\n"
             "Content-Type: application/octet-stream\r\n\r\n" % boundary).encode("ascii")
            + pprof + ("\r\n--%s--\r\n" % boundary).encode("ascii"))
    return body, "multipart/form-data; boundary=" + boundary


class Pusher(object):
    """The queue and its sender thread."""

    def __init__(self, service, url, timeout):
        self.service = service
        self.url = ingest_url(url)
        self.timeout = timeout
        self.queue = collections.deque()
        self.cond = threading.Condition()
        self.dropped = 0

    def put(self, item):
        with self.cond:
            if len(self.queue) >= QUEUE_MAX:
                self.queue.popleft()
                self.dropped += 1
                self.service.log("push: %s is behind: dropped the oldest profile (%d dropped so far)"
                                 % (self.url, self.dropped))
            self.queue.append(item)
            self.cond.notify()

    def sender(self):
        while True:
            with self.cond:
                while not self.queue:
                    self.cond.wait()
                item = self.queue.popleft()
            self.send(*item)

    def send(self, name, start, end, rate, pprof, samples):
        query = "name=%s&from=%d&until=%d&spyName=%s&sampleRate=%d" % (
            quote(name, safe=""), start, end, SPY_NAME, rate)
        body, ctype = _multipart(pprof)
        req = Request(self.url + "?" + query, data=body, headers={"Content-Type": ctype}, method="POST")
        try:
            with urlopen(req, timeout=self.timeout) as answer:
                answer.read(4096)
            self.service.log("push: %s %d samples, %d bytes to %s: ok" % (name, samples, len(pprof), self.url))
        except HTTPError as e:
            self.service.log("push: %s to %s: HTTP %d %s" % (name, self.url, e.code, e.reason))
        except (URLError, OSError) as e:
            why = getattr(e, "reason", None) or getattr(e, "strerror", None) or e
            self.service.log("push: %s to %s failed: %s (this profile is lost)" % (name, self.url, why))


def _by_service(results):
    groups = collections.OrderedDict()
    for r in results:
        labels = dict(r.target.labels)
        groups.setdefault(labels.get("service") or "python", []).append(r)
    return groups


def _static(results):
    """The labels every process of a group shares: the name's tags."""
    common = None
    for r in results:
        items = set((k, v) for k, v in r.target.labels if k not in ("pid", "process", "service"))
        common = items if common is None else common & items
    return sorted(common or ())


def run(service, url, every, timeout):
    pusher = Pusher(service, url, timeout)
    thread = threading.Thread(target=pusher.sender)
    thread.daemon = True
    thread.start()
    service.log("pushing the armed processes' profiles to %s every %d s" % (pusher.url, every))
    try:
        while True:
            next_at = time.monotonic() + every
            _push_once(service, pusher, every)
            # A session that failed at once must not make this loop spin.
            time.sleep(max(0.0, next_at - time.monotonic()))
    except KeyboardInterrupt:
        service.log("stopped")
    return 0


def _push_once(service, pusher, every):
    found = service.registry.discover()
    taken = service.registry.take(found)
    if not taken:
        return
    start = int(time.time())
    try:
        results = targets.record(taken, every, service.rate, service.mode)
    finally:
        for t in taken:
            t.lock.release()
    end = int(time.time())
    for failed in (r for r in results if r.error):
        service.log("push: %s" % failed.error)
    over = targets.note_costs(results)
    if over:   # as a scrape's log line says it (serve.py)
        service.log("push: over their CPU budget: pid %s" % ", ".join(str(p) for p in over))
    for name, group in _by_service(results).items():
        pprof, samples = targets.merge(group)
        if samples:
            rate = service.rate or _rate(group)
            pusher.put((_name(name, _static(group)), start, end, rate, pprof, samples))


def _rate(group):
    for r in group:
        if r.reply is not None:
            return remote.meta_number(r.reply.meta, "requested_rate_hz", 100) or 100
    return 100
