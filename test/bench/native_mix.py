"""A program for item 11 of the benchmark suite (run.py: how many native
samples unwind to the root): the standard library's C code under load.

    native_mix.py SECONDS

Three threads for SECONDS, contending for the GIL as real services do:
one serialises and parses JSON documents (the _json accelerator), one
hashes (hashlib: OpenSSL's sha256 and blake2b, which release the GIL for
large buffers), one compresses and decompresses (zlib, which releases it
too); the main thread waits for them.  The native stacks go through
libpython, the extension modules, libcrypto and libz, the C library's
locks and the GIL's wait.
"""
import hashlib
import json
import sys
import threading
import time
import zlib


def documents():
    return [{"id": i, "name": "item-%d" % i, "tags": ["a", "b", "c"][: i % 4],
             "price": i * 1.25, "nested": {"x": list(range(i % 20))}} for i in range(300)]


def json_worker(until):
    docs = documents()
    while time.monotonic() < until:
        text = json.dumps(docs, sort_keys=True)
        back = json.loads(text)
        assert len(back) == len(docs)


def hash_worker(until):
    block = bytes(range(256)) * 4096   # 1 MiB
    while time.monotonic() < until:
        hashlib.sha256(block).hexdigest()
        hashlib.blake2b(block[: 1 << 16]).hexdigest()
        hashlib.md5(b"x" * 100).hexdigest()


def zlib_worker(until):
    data = (b"the quick brown fox jumps over the lazy dog " * 20000)
    while time.monotonic() < until:
        packed = zlib.compress(data, 6)
        assert zlib.decompress(packed) == data


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    until = time.monotonic() + seconds
    threads = [threading.Thread(target=f, args=(until,), name=f.__name__)
               for f in (json_worker, hash_worker, zlib_worker)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
