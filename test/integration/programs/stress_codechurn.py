"""Fresh code objects created and dropped continuously: exec/compile of new
functions (each with a new name), lambdas, classes defined in a loop, with
gc.collect() now and then.  With 'api' as second argument, stops the
sampler at the end and prints how many samples it took (the profile's
total must equal it)."""
import ctypes
import gc
import sys

import sampled
from stress_common import deadline

TEMPLATE = """
def churn_fn_{i}(x):
    s = 0
    for k in range(x):
        s += k * {i}
    return s
"""


def churn(more, work):
    i = 0
    while more():
        ns = {}
        code = compile(TEMPLATE.format(i=i), "<churn-%d>" % (i % 64), "exec")
        exec(code, ns)
        assert ns["churn_fn_%d" % i](work) == i * (work * (work - 1) // 2)
        f = lambda y, i=i: sum(range(y)) + i  # noqa: E731
        assert f(10) == 45 + i

        class Churned:
            def method(self, n):
                return sum(range(n))
        assert Churned().method(50) == 1225
        dyn = type("Dyn%d" % i, (), {"m": lambda self: i})
        assert dyn().m() == i
        del ns, code, f, Churned, dyn
        if i % 200 == 0:
            gc.collect()
        i += 1
    return i


api = len(sys.argv) > 2 and sys.argv[2] == "api"
# With 'api' most time goes into the new functions, so that nearly every
# sample is a new stack and the stack limit is reached on a loaded machine.
if api:
    # Its stated time and on until the table has overflowed (more than
    # PYSAMPLE_MAX_STACKS=100 lines: the marker's is the extra one), however
    # few samples a loaded machine leaves in that time.
    churn(sampled.Until(float(sys.argv[1]), enough=lambda st: st.distinct_stacks > 100).more,
          3000)
    ps = ctypes.CDLL(None)
    ps.pysample_samples.restype = ctypes.c_uint64
    ps.pysample_stop()
    print("samples %d" % ps.pysample_samples())
else:
    churn(deadline(float(sys.argv[1])), 40)
print("churn ok")
