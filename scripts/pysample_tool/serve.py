# serve.py - `pysample serve`: a sidecar or node agent that gives the armed
# processes it can see to a continuous-profiling backend.
#
# Pull: GET /debug/pprof/profile?seconds=N (Go's net/http/pprof convention,
# which Parca, Pyroscope and Grafana Alloy scrape) records N seconds of every
# armed process (or ?pid=P) and answers one gzipped pprof whose samples carry
# pid, process, thread and the pod's labels (targets.py).  / lists the
# targets, /targets as JSON, /healthz says ok.
# Push: --push URL sends the same profile every --every seconds to
# Pyroscope's /ingest (push.py).
#
# Trust: who gets an answer sees function names, file paths, thread names
# and the labels.  So serve answers only the peers --allow names (default:
# loopback) and, with --token-file, only requests bearing that token; it
# never changes a target's settings beyond a record session's (docs/
# kubernetes.md, "Continuous profiling").  Each request is one log line.
#
# SPDX-License-Identifier: MIT

import gzip
import hmac
import ipaddress
import json
import os
import socket
import sys
import threading
import time

from . import deadline, options, push, remote, targets
from .common import PROG, VERSION, ToolError

try:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
except ImportError:  # Python 3.6
    from http.server import BaseHTTPRequestHandler, HTTPServer
    from socketserver import ThreadingMixIn

    class ThreadingHTTPServer(ThreadingMixIn, HTTPServer):
        daemon_threads = True

from urllib.parse import parse_qs, urlsplit

NAME = "serve"
HELP = "serve the armed processes' profiles to Parca, Pyroscope, Alloy (pprof over HTTP)"
DESCRIPTION = ("Answers GET /debug/pprof/profile?seconds=N, the Go net/http/pprof convention that Parca, "
               "Pyroscope and Grafana Alloy scrape, by recording N seconds of every armed process it can "
               "see (started with PYSAMPLE_ARM=1; ?pid=P for one) and sending one gzipped pprof whose "
               "samples carry pid, process, thread and the pod's labels (PYSAMPLE_SERVICE, "
               "PYSAMPLE_NAMESPACE, PYSAMPLE_POD, PYSAMPLE_CONTAINER, PYSAMPLE_VERSION from each "
               "process's environment or this one's).  / and /targets list the processes, /healthz "
               "answers ok.  With --push, sends the same profiles to Pyroscope's /ingest instead.")
EPILOG = ("Who reaches the port sees stacks: only --allow peers (default loopback) are answered. "
          "docs/kubernetes.md has the manifests and the trust model.")

DEFAULT_LISTEN = "127.0.0.1:7071"
DEFAULT_SECONDS = 10
MAX_CONNECTIONS = 64       # connections handled at once; more get 503
REQUEST_TIMEOUT = 10       # seconds a client may take to send its request, or to read the answer


def _listen(text):
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ToolError("--listen takes HOST:PORT (e.g. %s), not %r" % (DEFAULT_LISTEN, text))
    return host.strip("[]") or "0.0.0.0", int(port)


def _networks(texts):
    nets = []
    for text in texts:
        for item in text.split(","):
            if not item.strip():
                continue
            try:
                nets.append(ipaddress.ip_network(item.strip(), strict=False))
            except ValueError:
                raise ToolError("--allow takes addresses or networks (10.0.0.0/8, ::1), not %r" % item)
    return nets


def _label(text, option="--label"):
    key, sep, value = text.partition("=")
    if not sep or not key or not key.replace("_", "a").isalnum():
        raise ToolError("%s takes KEY=VALUE (letters, digits, _ in KEY), not %r" % (option, text))
    return key, value


def _interval(text):
    t = text.strip()
    if t.endswith("s"):
        t = t[:-1]
    elif t.endswith("m") and t[:-1].isdigit():
        t = str(int(t[:-1]) * 60)
    if not t.isdigit() or not 1 <= int(t) <= 3600:
        raise ToolError("--every takes 1..3600 seconds (15, 15s, 1m), not %r" % text)
    return int(t)


def add_options(parser):
    parser.add_argument("--listen", metavar="HOST:PORT", default=DEFAULT_LISTEN,
                        help="where to answer scrapes (default: %s; 0.0.0.0:7071 for other pods, "
                             "with --allow)" % DEFAULT_LISTEN)
    parser.add_argument("--allow", metavar="NETS", action="append", default=[],
                        help="peers to answer, comma-separated addresses or networks (default: "
                             "127.0.0.0/8,::1); others get 403")
    parser.add_argument("--token-file", metavar="FILE",
                        help="answer only requests with `Authorization: Bearer <the file's text>`")
    parser.add_argument("--max-seconds", type=int, default=60, metavar="N",
                        help="the longest ?seconds= a scrape may ask for (default: 60)")
    parser.add_argument("--rate", type=int, metavar="HZ",
                        help="samples per second of each session (default: each process's PYSAMPLE_RATE)")
    options.mode(parser, help="wall or cpu for each session (default: each process's PYSAMPLE_MODE)")
    parser.add_argument("--label", metavar="KEY=VALUE", action="append", default=[],
                        help="a label for every sample (a process's own PYSAMPLE_* labels win)")
    parser.add_argument("--select", metavar="KEY=VALUE", action="append", default=[],
                        help="serve only the processes with this label (e.g. service=shop, from "
                             "PYSAMPLE_SERVICE; repeat to require several); default: every armed "
                             "process this user can see")
    parser.add_argument("--control-dir", metavar="DIR", action="append", default=[],
                        help="also look for control sockets here (processes started with "
                             "PYSAMPLE_CONTROL_DIR; default: $PYSAMPLE_CONTROL_DIR)")
    parser.add_argument("--client-timeout", type=float, default=REQUEST_TIMEOUT, metavar="SECONDS",
                        help="a client must send its whole request within this, and take the answer "
                             "within this, or be dropped (default: %d)" % REQUEST_TIMEOUT)
    parser.add_argument("--push", metavar="URL",
                        help="send a profile every --every seconds to this Pyroscope server's /ingest")
    parser.add_argument("--every", metavar="SECONDS", default="15",
                        help="how often --push sends, 1..3600 s (default: 15)")
    parser.add_argument("--push-timeout", type=float, default=10.0, metavar="SECONDS",
                        help="give up on one push after this long (default: 10)")


# A target killed mid-scrape closes its connection as it exits, before it
# is a zombie and long before its parent reaps it: a scrape that failed
# for every target gives them this long to be gone (410) rather than
# alive (502).  ServeTests.test_target_exiting_mid_scrape got 502 in 2
# runs of 5: the pid still answered kill(pid, 0).
GONE_WAIT_S = 1.0


def _all_gone(pids):
    end = time.monotonic() + GONE_WAIT_S
    while True:
        if all(not remote._exists(p) or deadline.state(p) in ("Z", "X") for p in pids):
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(0.02)


class Service(object):
    """What the handlers share: the targets, the limits, the log."""

    def __init__(self, args):
        dirs = list(args.control_dir) + [os.environ.get("PYSAMPLE_CONTROL_DIR")]
        self.registry = targets.Registry(dirs, [_label(t) for t in args.label],
                                         [_label(t, "--select") for t in args.select])
        self.allow = _networks(args.allow or ["127.0.0.0/8,::1"])
        self.token = None
        if args.token_file:
            try:
                with open(args.token_file, "rb") as f:
                    self.token = f.read().strip()
            except OSError as e:
                raise ToolError("cannot read --token-file %s: %s" % (args.token_file, e.strerror or e))
            if not self.token:
                raise ToolError("--token-file %s is empty" % args.token_file)
        if not 1 <= args.max_seconds <= 3600:
            raise ToolError("--max-seconds takes 1..3600, not %d" % args.max_seconds)
        if args.rate is not None and not 1 <= args.rate <= 100000:
            raise ToolError("--rate takes 1..100000 samples per second, not %d" % args.rate)
        if not 0.1 <= args.client_timeout <= 300:
            raise ToolError("--client-timeout takes 0.1..300 seconds, not %g" % args.client_timeout)
        self.client_timeout = args.client_timeout
        self.max_seconds = args.max_seconds
        self.rate = args.rate
        self.mode = args.mode
        self.connections = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self.log_lock = threading.Lock()

    def log(self, text):
        with self.log_lock:
            sys.stderr.write("%s: %s\n" % (PROG, text))
            sys.stderr.flush()

    def allowed(self, address):
        try:
            ip = ipaddress.ip_address(address.split("%")[0])
        except ValueError:
            return False
        if ip.version == 6 and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        return any(ip in net for net in self.allow)

    def authorized(self, header):
        if self.token is None:
            return True
        given = (header or "").encode("utf-8", "replace")
        return hmac.compare_digest(given, b"Bearer " + self.token)

    def scrape(self, query):
        """(status, headers, body, what to log) for /debug/pprof/profile."""
        seconds = self._seconds(query)
        if isinstance(seconds, str):
            return 400, {}, seconds, seconds
        chosen = self._targets(query)
        if isinstance(chosen, tuple):
            return chosen
        taken = self.registry.take(chosen)
        if not taken:
            why = "busy: every target is being scraped already (one scrape at a time per process)"
            return 429, {"Retry-After": str(seconds)}, why, why
        try:
            results = targets.record(taken, seconds, self.rate, self.mode)
        finally:
            for t in taken:
                t.lock.release()
        over = targets.note_costs(results)
        body, samples = targets.merge(results)
        failed = [r.error for r in results if r.error]
        skipped = len(chosen) - len(taken)
        packed = gzip.compress(body, 6)
        what = "%d of %d processes, %d samples, %d bytes (%d gzipped)" % (
            len(results) - len(failed), len(chosen), samples, len(body), len(packed))
        if skipped:
            what += ", %d busy" % skipped
        if over:
            what += ", over their CPU budget: pid %s" % ", ".join(str(p) for p in over)
        if failed:
            what += "; failed: " + "; ".join(failed)
        if len(failed) == len(results):
            gone = _all_gone([r.target.pid for r in results])
            status = 410 if gone else 502
            return status, {}, "no profile: " + "; ".join(failed), what
        return 200, {"Content-Type": "application/octet-stream",
                     "Content-Disposition": 'attachment; filename="profile"',
                     "X-Pysample-Samples": str(samples)}, packed, what

    def _seconds(self, query):
        text = query.get("seconds", [str(min(DEFAULT_SECONDS, self.max_seconds))])[-1]
        if not text.isdigit() or not 1 <= int(text) <= self.max_seconds:
            return ("seconds must be a whole number from 1 to %d (--max-seconds), not %r"
                    % (self.max_seconds, text[:32]))
        return int(text)

    def _targets(self, query):
        """The targets a scrape asks for, or (status, headers, body, log)."""
        found = self.registry.discover()
        if "pid" not in query:
            if not found:
                why = "no armed process is visible (started with PYSAMPLE_ARM=1, same user, same PID namespace)"
                return 503, {}, why, why
            return found
        text = query["pid"][-1]
        if not text.isdigit() or int(text) <= 0:
            why = "pid must be a process id, not %r" % text[:32]
            return 400, {}, why, why
        pid = int(text)
        for t in found:
            if t.pid == pid:
                return [t]
        if not remote._exists(pid):
            why = "no process %d" % pid
            return 404, {}, why, why
        why = str(remote._not_armed(pid, "its control socket"))
        return 409, {}, why, why

    def listing(self):
        """Each target's labels, whether a scrape holds it now, and what
        its last scrape cost it (the library's figures: sampler CPU against
        PYSAMPLE_CPU_BUDGET)."""
        return [dict(t.labels, busy=t.lock.locked(), **({"last_scrape": t.last} if t.last else {}))
                for t in self.registry.discover()]


class _Late(Exception):
    """The client did not send its whole request in time (args: bytes got)."""


class _DeadlineReader(object):
    """The request's reader: the request line and the headers must all have
    come by one deadline, however slowly they trickle in.  http.server's
    socket timeout is per recv(): a client sending a byte every few seconds
    (slowloris) held its connection, one of MAX_CONNECTIONS, for ever, and
    64 such clients got every scraper a 503.  Buffered: at most the line
    limit http.server asks for (64 kB) plus one recv."""

    def __init__(self, sock, seconds):
        self.sock = sock
        self.deadline = time.monotonic() + seconds
        self.buffer = b""
        self.got = 0

    def readline(self, limit=-1):
        while True:
            end = self.buffer.find(b"\n")
            if end >= 0 or 0 <= limit <= len(self.buffer):
                n = end + 1 if end >= 0 else limit
                n = min(n, limit) if limit >= 0 else n
                line, self.buffer = self.buffer[:n], self.buffer[n:]
                return line
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise _Late(self.got)
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                raise _Late(self.got)
            if not data:   # the client closed: what came is the last line
                line, self.buffer = self.buffer, b""
                return line
            self.got += len(data)
            self.buffer += data

    def close(self):
        self.buffer = b""


class Handler(BaseHTTPRequestHandler):
    server_version = "pysample/" + VERSION
    protocol_version = "HTTP/1.0"
    timeout = REQUEST_TIMEOUT

    def setup(self):
        self.timeout = self.server.service.client_timeout
        BaseHTTPRequestHandler.setup(self)
        self.rfile.close()
        self.rfile = _DeadlineReader(self.connection, self.timeout)

    def handle_one_request(self):
        try:
            BaseHTTPRequestHandler.handle_one_request(self)
        except _Late as e:
            self.close_connection = True
            self._late(e.args[0])

    def _late(self, got):
        """408 to a client whose request did not come in time, and one line."""
        why = "request timeout: the request line and headers must come within %g s" % self.timeout
        try:
            self.connection.settimeout(1.0)
            self.connection.sendall(("HTTP/1.0 408 Request Timeout\r\nContent-Type: text/plain\r\n"
                                     "Connection: close\r\n\r\n%s\n" % why).encode("ascii"))
        except OSError:
            pass
        self.server.service.log("%s: 408 %s (got %d bytes)" % (self.client_address[0], why, got))

    def log_message(self, fmt, *args):
        pass  # every request is logged once, by _answer

    def log_error(self, fmt, *args):
        # http.server's own errors: a request line that never came, a bad one
        self.server.service.log("%s: %s" % (self.client_address[0], fmt % args))

    def do_GET(self):
        service = self.server.service
        self.connection.settimeout(self.timeout)   # the reader's deadline is over: the answer's own
        peer = self.client_address[0]
        if not service.allowed(peer):
            return self._answer(403, {}, "forbidden: %s is not in --allow" % peer)
        if not service.authorized(self.headers.get("Authorization")):
            return self._answer(401, {"WWW-Authenticate": "Bearer"}, "unauthorized: no valid bearer token")
        url = urlsplit(self.path)
        query = parse_qs(url.query, keep_blank_values=True)
        if url.path == "/healthz":
            return self._answer(200, {}, "ok")
        if url.path == "/targets":
            body = json.dumps(service.listing(), indent=1) + "\n"
            return self._answer(200, {"Content-Type": "application/json"}, body, "%d targets" % body.count("\"pid\""))
        if url.path == "/":
            return self._answer(200, {}, _index(service.listing()))
        if url.path == "/debug/pprof/profile":
            return self._answer(*service.scrape(query))
        return self._answer(404, {}, "not found: %s (try /, /targets, /healthz, /debug/pprof/profile)"
                            % url.path[:64])

    def _answer(self, status, headers, body, what=None):
        data = body if isinstance(body, bytes) else (body + "\n").encode("utf-8", "replace")
        if what is None:   # a refusal says why in its log line too
            what = body if status >= 400 and isinstance(body, str) else ""
        line = "%s GET %s: %d %s" % (self.client_address[0], self.path[:120], status, what)
        try:
            self.send_response(status)
            if "Content-Type" not in headers:
                headers = dict(headers, **{"Content-Type": "text/plain; charset=utf-8"})
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except (OSError, socket.timeout) as e:
            line += " (the client left before the answer: %s)" % (getattr(e, "strerror", None) or e)
        self.server.service.log(line.rstrip())


def _index(listing):
    lines = ["pysample serve %s: GET /debug/pprof/profile?seconds=N[&pid=P] (gzipped pprof), "
             "/targets (JSON), /healthz" % VERSION, ""]
    if not listing:
        lines.append("no armed process is visible")
    for labels in listing:
        lines.append(" ".join("%s=%s" % (k, v) for k, v in sorted(labels.items())
                              if k not in ("busy", "last_scrape"))
                     + (" (being scraped)" if labels.get("busy") else ""))
    return "\n".join(lines)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # socketserver's backlog of 5 left a burst of scrapers retrying their
    # SYN for seconds; these wait for accept() instead, and get 503 then.
    request_queue_size = 128

    def process_request(self, request, client_address):
        # A bounded number of handler threads: past it, 503 at once.
        if not self.service.connections.acquire(False):
            try:
                request.settimeout(1.0)
                request.sendall(b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
                                b"Retry-After: 1\r\n\r\ntoo many connections\n")
            except OSError:
                pass
            self.service.log("%s: 503 too many connections (%d at once)" % (client_address[0], MAX_CONNECTIONS))
            self.shutdown_request(request)
            return
        ThreadingHTTPServer.process_request(self, request, client_address)

    def process_request_thread(self, request, client_address):
        try:
            ThreadingHTTPServer.process_request_thread(self, request, client_address)
        finally:
            self.service.connections.release()

    def handle_error(self, request, client_address):
        self.service.log("%s: %s" % (client_address[0], sys.exc_info()[1]))


def _bind(host, port):
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    Server.address_family = family
    try:
        return Server((host, port), Handler)
    except OSError as e:
        raise ToolError("cannot listen on %s:%d: %s" % (host, port, e.strerror or e))


def run(args):
    service = Service(args)
    if args.push:
        every = _interval(args.every)
        return push.run(service, args.push, every, args.push_timeout)
    host, port = _listen(args.listen)
    server = _bind(host, port)
    server.service = service
    host, port = server.server_address[:2]
    service.log("serving the armed processes on http://%s:%d/debug/pprof/profile (answering %s)"
                % (host if ":" not in host else "[%s]" % host, port, ", ".join(str(n) for n in service.allow)))
    try:
        server.serve_forever(poll_interval=0.5)
    except KeyboardInterrupt:
        service.log("stopped")
    finally:
        server.server_close()
    return 0
