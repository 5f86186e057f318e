"""exactref.torch.standard_for on an H200: the orders of torch's CUDA row sum and of the same sum compiled by
torch.compile (Inductor), revealed at the example's shape; each line is the Order, then the function's outputs on
fresh rows of the `normal` and `wide` families checked under its standard, and, where it is fixed (a named order or
the tree written out), compared bit for bit with its emulation. Needs a CUDA device and torch; run with
EXACTREF_LIBRARY pointing at a built library.

    python3 tools/capture/standard_for_orders.py > standard_for.txt
"""
import time

import numpy as np
import torch

import exactref as er
import exactref.torch as ert
from exactref.testing import family


def main():
    dtypes = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
    fns = {"torch.sum (CUDA)": lambda x: x.sum(-1), "torch.compile sum (Inductor)": torch.compile(lambda x: x.sum(-1))}
    for rows, n, dt in ((64, 1024, "float32"), (64, 4096, "float32"), (32, 8192, "float32"), (64, 4096, "float16"),
                        (64, 4096, "bfloat16")):
        for name, fn in fns.items():
            ex = torch.zeros(rows, n, dtype=dtypes[dt], device="cuda")
            fn(ex)  # compiled here, not inside the probes' timing
            t0 = time.perf_counter()
            try:
                o = ert.standard_for(fn, ex, max_calls=4000)
            except Exception as e:  # a refusal is printed, the run goes on
                print("%s %d x %d %s: %s: %s" % (name, rows, n, dt, type(e).__name__, e), flush=True)
                continue
            spent = time.perf_counter() - t0
            verdicts = []
            for fam in ("normal", "wide"):
                x = family(fam, (rows, n), dt, seed=17)
                raw = x.view(np.uint16) if dt != "float32" else x
                xt = torch.from_numpy(raw).view(dtypes[dt]).cuda()
                got = fn(xt).float().cpu().numpy()
                got = got.astype(x.dtype) if dt != "float32" else got
                res = er.sum(x).covers(got, **o.standard)
                verdicts.append("%s %s" % (fam, "covered" if res.all() else "NOT COVERED (%s)" % res.counts))
                if o.fixed:
                    em = er.sum(x).emulate(**o.standard, dtype=dt)
                    same = np.array_equal(em.view(np.uint8), np.ascontiguousarray(got).view(np.uint8))
                    verdicts[-1] += ", emulated %s" % ("bit for bit" if same else "DIFFERENTLY in %d of %d" % (
                        int((em != got).sum()), got.size))
            print("%s %d x %d %s: %s\n  %.1f s; fresh rows: %s" % (name, rows, n, dt, o, spent, ", ".join(verdicts)),
                  flush=True)


if __name__ == "__main__":
    main()
