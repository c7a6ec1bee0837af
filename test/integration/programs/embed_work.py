"""Run inside test/embed/embed_host (an embedded CPython): a known hot
function per role, so the profile says which interpreter ran what.
sys.argv[1] is the role: main, sub1 or sub2.  One run spins a fixed time;
the host runs a role again until the sampler has woken often enough
during it (embed_host.c), so the loop here stays a plain loop."""
import sys
import time

SECONDS = 0.8


def spin(seconds):
    end = time.perf_counter() + seconds
    n = 0
    while time.perf_counter() < end:  # spin-loop
        n += 1
    return n


def main_work():
    spin(SECONDS)  # main-call


def sub_one():
    spin(SECONDS / 2)  # sub1-call


def sub_two():
    spin(SECONDS / 2)  # sub2-call


{"main": main_work, "sub1": sub_one, "sub2": sub_two}[sys.argv[1]]()
