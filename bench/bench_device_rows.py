"""bench_device_rows.py: the row ops' checks on the GPU (er.softmax_covers_device, er.log_softmax_covers_device,
er.rmsnorm_covers_device) on the outputs of torch's own ops, against the same op in float64 on the same GPU
(torch.softmax, torch.log_softmax; rmsnorm as x * rsqrt(mean(x^2) + eps) * w); warm (one untimed round first),
three alternating rounds, medians. For rmsnorm also the host's check of host copies (er.rmsnorm(...).covers on the
CPU, once, after the GPU's rounds) with the same verdict. Prints `name: X s vs baseline Y s = Rx`. Usage:
python3 bench/bench_device_rows.py [N ...] (square inputs; default 4096 16384). Needs torch with CUDA and the library
built with the CUDA toolkit."""
import statistics
import sys
import time

import exactref as er


def rounds(base, check):
    """base and check warm, then three alternating rounds: their medians and check's last result."""
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
    return statistics.median(tb), statistics.median(tx), res


def verdict(res):
    return "verdict %s, exact %d, covered %d" % ("pass" if res.all() else "FAIL", res.counts["exact"],
                                                 res.counts["covered"])


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
            name = "float32" if dtype == torch.float32 else "bfloat16"
            x = (torch.randn(n, n, device="cuda") * 3).to(dtype)
            out = torch.softmax(x, -1) if dtype == torch.float32 else torch.softmax(x.float(), -1).to(dtype)
            torch.cuda.synchronize()

            def base():
                torch.softmax(x.double(), -1)
                torch.cuda.synchronize()
            b, c, res = rounds(base, lambda: er.softmax_covers_device(x, out))
            print("softmax_covers_device_%s_%dx%d: %.4f s vs baseline %.4f s = %.2fx  (baseline: torch.softmax of the "
                  "input in float64 on the same GPU; medians of 3 alternating rounds; output of torch.softmax: %s)"
                  % (name, n, n, c, b, c / b, verdict(res)))
            out = torch.log_softmax(x, -1) if dtype == torch.float32 else torch.log_softmax(x.float(), -1).to(dtype)
            torch.cuda.synchronize()

            def base_log():
                torch.log_softmax(x.double(), -1)
                torch.cuda.synchronize()
            b, c, res = rounds(base_log, lambda: er.log_softmax_covers_device(x, out))
            print("log_softmax_covers_device_%s_%dx%d: %.4f s vs baseline %.4f s = %.2fx  (baseline: torch.log_softmax "
                  "of the input in float64 on the same GPU; medians of 3 alternating rounds; output of "
                  "torch.log_softmax: %s)" % (name, n, n, c, b, c / b, verdict(res)))
            w = (1 + torch.randn(n, device="cuda") / 4).to(dtype)
            eps = 1e-6
            out = torch.nn.functional.rms_norm(x, (n,), w, eps)
            torch.cuda.synchronize()

            def base_rms():
                xd = x.double()
                xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + eps) * w.double()
                torch.cuda.synchronize()
            b, c, res = rounds(base_rms, lambda: er.rmsnorm_covers_device(x, out, w, eps))
            hx, hw, ho = x.cpu(), w.cpu(), out.cpu()
            t0 = time.perf_counter()
            host = er.rmsnorm(hx, hw, eps).covers(ho)
            th = time.perf_counter() - t0
            same = host.counts == res.counts and str(host) == str(res)
            print("rmsnorm_covers_device_%s_%dx%d: %.4f s vs baseline %.4f s = %.2fx  (baseline: rmsnorm of the input "
                  "in float64 on the same GPU; medians of 3 alternating rounds; output of torch's rms_norm: %s; the "
                  "host's check of copies %.3f s, %s)" % (name, n, n, c, b, c / b, verdict(res), th,
                                                          "the same report" if same else "A DIFFERENT REPORT"))


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [4096, 16384])
