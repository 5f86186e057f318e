"""bench_device_rows.py: er.softmax_covers_device (softmax's sets on the GPU) on the output of torch.softmax, against
torch.softmax of the same input in float64 on the same GPU; warm (one untimed round first), three alternating rounds,
medians. Prints `name: X s vs baseline Y s = Rx`. Usage: python3 bench/bench_device_rows.py [N ...] (square inputs;
default 4096 16384). Needs torch with CUDA and the library built with the CUDA toolkit."""
import statistics
import sys
import time

import exactref as er


def main(sizes):
    try:
        import torch
    except ImportError:
        print("bench_device_rows: needs torch")
        return
    if not torch.cuda.is_available() or not er.cuda_available():
        print("bench_device_rows: no CUDA device here (or an exactref built without CUDA)")
        return
    torch.manual_seed(0)
    for n in sizes:
        for dtype in (torch.float32, torch.bfloat16):
            x = (torch.randn(n, n, device="cuda") * 3).to(dtype)
            out = torch.softmax(x, -1) if dtype == torch.float32 else torch.softmax(x.float(), -1).to(dtype)
            torch.cuda.synchronize()

            def base():
                torch.softmax(x.double(), -1)
                torch.cuda.synchronize()

            def check():
                return er.softmax_covers_device(x, out)
            base()
            res = check()
            tb, tx = [], []
            for _ in range(3):
                t0 = time.perf_counter()
                base()
                t1 = time.perf_counter()
                res = check()
                t2 = time.perf_counter()
                tb.append(t1 - t0)
                tx.append(t2 - t1)
            b, c = statistics.median(tb), statistics.median(tx)
            name = "float32" if dtype == torch.float32 else "bfloat16"
            print("softmax_covers_device_%s_%dx%d: %.4f s vs baseline %.4f s = %.2fx  (baseline: torch.softmax of the "
                  "input in float64 on the same GPU; medians of 3 alternating rounds; output of torch.softmax: verdict "
                  "%s, exact %d, covered %d)" % (name, n, n, c, b, c / b, "pass" if res.all() else "FAIL",
                                                 res.counts["exact"], res.counts["covered"]))


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [4096, 16384])
