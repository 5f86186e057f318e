"""bench_device_rows.py: the row ops' checks on the GPU (er.softmax_covers_device, er.log_softmax_covers_device,
er.rmsnorm_covers_device, er.layer_norm_covers_device) on the outputs of torch's own ops, against the same op in
float64 on the same GPU (torch.softmax, torch.log_softmax, torch's layer_norm; rmsnorm as
x * rsqrt(mean(x^2) + eps) * w); warm (one untimed round first), three alternating rounds, medians. For rmsnorm and
layer_norm also the host's check of host copies (er.rmsnorm(...).covers, er.layer_norm(...).covers on the CPU, once,
after the GPU's rounds) with the same verdict. Prints `name: X s vs baseline Y s = Rx`. Usage:
python3 bench/bench_device_rows.py [N ...] (square inputs; default 4096 16384); python3 bench/bench_device_rows.py
outputs [N] times layer_norm's three outputs (layer_norm_outputs), classes [N] what reading Result.classes costs
after a check that left them on the GPU (classes), auto [N] the paths Python takes by itself (auto),
epilogue [N ...] a GEMM epilogue's chain on CUDA tensors (epilogue), attention [B H S D [host]]
er.attention_covers_device on torch's SDPA (attention), cross_entropy [N C [dtypes]] er.cross_entropy_covers_device
on torch's F.cross_entropy and its gradient (cross_entropy), backward [N ...] er.softmax_backward_covers_device on
torch's softmax backward (backward), log_backward [N ...] er.log_softmax_backward_covers_device on torch's
log_softmax backward, log_backward_masked [N ...] the same with the logits above the diagonal filled with -1e9.
Needs torch with CUDA and the library built with the CUDA toolkit."""
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


def ops(torch, x, w, b, eps):
    """Each op: its name, torch's output, the float64 baseline, the device check, the host's check of copies (or
    None) and what the baseline and the output are."""
    n = x.shape[-1]
    xf = x if x.dtype == torch.float32 else x.float()
    sm, lsm = torch.softmax(xf, -1).to(x.dtype), torch.log_softmax(xf, -1).to(x.dtype)
    rms = torch.nn.functional.rms_norm(x, (n,), w, eps)
    ln = torch.nn.functional.layer_norm(x, (n,), w, b, eps)
    xd = lambda: x.double()  # noqa: E731
    return (
        ("softmax", sm, lambda: torch.softmax(xd(), -1), lambda: er.softmax_covers_device(x, sm), None,
         "torch.softmax of the input in float64", "torch.softmax"),
        ("log_softmax", lsm, lambda: torch.log_softmax(xd(), -1), lambda: er.log_softmax_covers_device(x, lsm), None,
         "torch.log_softmax of the input in float64", "torch.log_softmax"),
        ("rmsnorm", rms,
         lambda: xd() * torch.rsqrt(xd().pow(2).mean(-1, keepdim=True) + eps) * w.double(),
         lambda: er.rmsnorm_covers_device(x, rms, w, eps),
         lambda hx, ho: er.rmsnorm(hx, w.cpu(), eps).covers(ho),
         "rmsnorm of the input in float64", "torch's rms_norm"),
        ("layer_norm", ln,
         lambda: torch.nn.functional.layer_norm(xd(), (n,), w.double(), b.double(), eps),
         lambda: er.layer_norm_covers_device(x, ln, n, w, b, eps),
         lambda hx, ho: er.layer_norm(hx, n, w.cpu(), b.cpu(), eps).covers(ho),
         "torch's layer_norm of the input in float64", "torch's layer_norm"),
    )


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
            w = (1 + torch.randn(n, device="cuda") / 4).to(dtype)
            b = (torch.randn(n, device="cuda") / 4).to(dtype)
            for op, out, base64, check, host, based, outd in ops(torch, x, w, b, 1e-6):
                torch.cuda.synchronize()

                def base():
                    base64()
                    torch.cuda.synchronize()
                tb, tc, res = rounds(base, check)
                extra = ""
                if host is not None:
                    hx, ho = x.cpu(), out.cpu()
                    t0 = time.perf_counter()
                    hres = host(hx, ho)
                    th = time.perf_counter() - t0
                    same = hres.counts == res.counts and str(hres) == str(res)
                    extra = "; the host's check of copies %.3f s, %s" % (
                        th, "the same report" if same else "A DIFFERENT REPORT")
                print("%s_covers_device_%s_%dx%d: %.4f s vs baseline %.4f s = %.2fx  (baseline: %s on the same GPU; "
                      "medians of 3 alternating rounds; output of %s: %s%s)"
                      % (op, name, n, n, tc, tb, tc / tb, based, outd, verdict(res), extra))
                del out


def classes(n=16384):
    """What reading Result.classes costs after a row op's device check, which leaves them on the GPU until then: the
    check with its classes read (er_report_fetch_classes, then a numpy array over them) against the check alone, fp32
    softmax and rmsnorm of an n x n input (x = 3 randn), medians of 3 alternating rounds."""
    import torch
    torch.manual_seed(0)
    x = torch.randn(n, n, device="cuda") * 3
    w = 1 + torch.randn(n, device="cuda") / 4
    sm, rms = torch.softmax(x, -1), torch.nn.functional.rms_norm(x, (n,), w, 1e-6)
    for op, f in (("softmax", lambda: er.softmax_covers_device(x, sm)),
                  ("rmsnorm", lambda: er.rmsnorm_covers_device(x, rms, w, 1e-6))):
        def read():
            r = f()
            assert r.classes.shape == (n, n)
            return r
        tb, tc, res = rounds(f, read)
        print("%s_covers_device_classes_read_float32_%dx%d: %.4f s vs %.4f s = %.2fx  (the check with Result.classes "
              "read, against the check alone; medians of 3 alternating rounds; %s)" % (op, n, n, tc, tb, tc / tb,
                                                                                   verdict(res)))


def layer_norm_outputs(n=8192):
    """torch.native_layer_norm's three outputs (y, mean, rstd) of an n x n fp32 input, checked by
    er.layer_norm(x, n, w, b, eps).covers((y, mean, rstd)) on CUDA tensors (y on the GPU, mean and rstd on the host)
    against the same check of host copies (all three on the host); each timed once after an untimed call."""
    import torch
    torch.manual_seed(0)
    x = torch.randn(n, n, device="cuda") * 3
    w, b = 1 + torch.randn(n, device="cuda") / 4, torch.randn(n, device="cuda") / 4
    outs = torch.native_layer_norm(x, (n,), w, b, 1e-5)
    torch.cuda.synchronize()
    ref = er.layer_norm(x, n, w, b, 1e-5)
    href = er.layer_norm(x.cpu(), n, w.cpu(), b.cpu(), 1e-5)
    houts = tuple(o.cpu() for o in outs)

    def once(f):
        f()
        t0 = time.perf_counter()
        r = f()
        return time.perf_counter() - t0, r
    td, rd = once(lambda: ref.covers(outs))
    th, rh = once(lambda: href.covers(houts))
    same = all(str(rd.results[k]) == str(rh.results[k]) for k in ("y", "mean", "rstd"))
    print("layer_norm_outputs_covers_%dx%d: %.4f s vs %.4f s = %.2fx  (y on the GPU, mean and rstd on the host, "
          "against all three on the host's copies; torch.native_layer_norm's outputs: verdict %s, %s)"
          % (n, n, td, th, td / th, "pass" if rd.all() else "FAIL",
             "the same reports" if same else "DIFFERENT REPORTS"))


def auto(n=8192):
    """The device paths as Python takes them by itself, er.matmul(A, B).covers(C) and er.layer_norm(x, n, w, b)
    .covers(y) on CUDA tensors (the reference made in the time), against matmul_covers_device and
    layer_norm_covers_device called directly; each timed once after an untimed call."""
    import torch
    torch.manual_seed(0)
    A, B = torch.randn(n, n, device="cuda").half(), torch.randn(n, n, device="cuda").half()
    C = A.float() @ B.float()
    x = torch.randn(n, n, device="cuda") * 3
    w, b = 1 + torch.randn(n, device="cuda") / 4, torch.randn(n, device="cuda") / 4
    y = torch.nn.functional.layer_norm(x, (n,), w, b, 1e-5)
    torch.cuda.synchronize()

    def once(f):
        f()
        t0 = time.perf_counter()
        r = f()
        return time.perf_counter() - t0, r
    std = dict(standard="mma:sm90", outer="any")
    for name, made, direct in (
            ("matmul_fp16_%dx%dx%d" % (n, n, n), lambda: er.matmul(A, B).covers(C, **std),
             lambda: er.matmul_covers_device(A, B, C, **std)),
            ("layer_norm_fp32_%dx%d" % (n, n), lambda: er.layer_norm(x, n, w, b).covers(y),
             lambda: er.layer_norm_covers_device(x, y, n, w, b))):
        ta, ra = once(made)
        td, rd = once(direct)
        print("auto_%s: %.4f s vs %.4f s = %.2fx  (er.<op>(...).covers(out) on CUDA tensors, the reference made in "
              "the time, against the device path called directly; %s)" % (name, ta, td, ta / td,
                                                                          "the same report" if str(ra) == str(rd)
                                                                          else "A DIFFERENT REPORT"))


def epilogue(sizes):
    """A GEMM epilogue on CUDA tensors, er.matmul(A, B).add(bias).gelu(approximate="tanh").cast("float16")
    .covers(out) (N x N x N fp16 operands, A of randn and B of randn / sqrt(N), out = gelu(A B + bias) in fp32
    stored as fp16, all by torch on the GPU),
    the reference made in the time (its fp64 GEMM on the GPU: er_matmul_device), against the same epilogue in float64
    on the same GPU (torch's GEMM, bias and gelu of the operands in float64); warm, three alternating rounds, medians;
    with the time of the reference alone (er.matmul(A, B) built: the copies, the GPU's GEMM, the host's floats and
    norms) and of the matmul's own check (er.matmul(A, B).covers(acc): the device path) in the same run."""
    import torch
    gen = torch.Generator(device="cpu").manual_seed(9)
    for n in sizes:
        # a layer's scales: inputs of unit variance, weights of variance 1/N, so pre-activations of about unit size
        A = torch.randn((n, n), generator=gen).half().cuda()
        B = (torch.randn((n, n), generator=gen) / n ** 0.5).half().cuda()
        bias = torch.randn(n, generator=gen).cuda()
        acc = A.float() @ B.float()
        out = torch.nn.functional.gelu(acc + bias, approximate="tanh").half()
        Ad, Bd, bd = A.double(), B.double(), bias.double()
        torch.cuda.synchronize()

        def base():
            torch.nn.functional.gelu(Ad @ Bd + bd, approximate="tanh")
            torch.cuda.synchronize()

        def check():
            return er.matmul(A, B).add(bias).gelu(approximate="tanh").cast("float16").covers(out)
        tb, tx, res = rounds(base, check)
        t0 = time.perf_counter()
        ref = er.matmul(A, B)
        ref._ptr
        t1 = time.perf_counter()
        mm = er.matmul(A, B).covers(acc)
        t2 = time.perf_counter()
        print("epilogue_gelu_tanh_fp16_%dx%dx%d: %.4f s vs baseline %.4f s = %.2fx  (baseline: gelu(A B + bias) in "
              "float64 on the same GPU; medians of 3 alternating rounds; the reference alone %.4f s, the matmul's "
              "device check %.4f s (%s); %s)" % (n, n, n, tx, tb, tx / tb, t1 - t0, t2 - t1,
                                                  "pass" if mm.all() else "FAIL", verdict(res)))


def backward(sizes, log=False, masked=False):
    """er.softmax_backward_covers_device of torch's softmax backward (torch._softmax_backward_data, as autograd calls
    it) on an n x n softmax output y of randn * 3 logits and a randn gradient, in fp32 and bf16, against the same
    backward in float64 on the same GPU; then the host's check of copies once, with the same verdict. log: the same
    for er.log_softmax_backward_covers_device of torch._log_softmax_backward_data on a log_softmax output. masked: the
    logits above the diagonal filled with -1e9 first (a causal mask by a constant)."""
    import torch
    op = "log_softmax_backward" if log else "softmax_backward"
    fwd = torch.log_softmax if log else torch.softmax
    bwd = torch._log_softmax_backward_data if log else torch._softmax_backward_data
    dev = er.log_softmax_backward_covers_device if log else er.softmax_backward_covers_device
    for n in sizes:
        for dt in (torch.float32, torch.bfloat16):
            name = "float32" if dt == torch.float32 else "bfloat16"
            g = torch.Generator(device="cuda").manual_seed(12)
            x = 3 * torch.randn(n, n, device="cuda", generator=g)
            if masked:
                x.masked_fill_(torch.ones(n, n, device="cuda", dtype=torch.bool).triu(1), -1e9)
            y = fwd(x, -1).to(dt)
            dy = torch.randn(n, n, device="cuda", generator=g).to(dt)
            dx = bwd(dy, y, -1, dt)
            yd, dyd = y.double(), dy.double()

            def base():
                bwd(dyd, yd, -1, torch.float64)
                torch.cuda.synchronize()

            tb, tx, res = rounds(base, lambda: dev(dy, y, dx))
            hd, hy, ho = dy.cpu(), y.cpu(), dx.cpu()
            t0 = time.perf_counter()
            hres = getattr(er, op)(hd, hy).covers(ho)
            th = time.perf_counter() - t0
            same = hres.counts == res.counts and str(hres) == str(res)
            print("%s_covers_device_%s_%dx%d%s: %.4f s vs baseline %.4f s = %.2fx  (baseline: torch.%s in float64 on "
                  "the same GPU, y and dy made float64 before; medians of 3 alternating rounds; output of torch.%s: "
                  "%s; the host's check of copies %.3f s, %s)"
                  % (op, name, n, n, "_masked" if masked else "", tx, tb, tx / tb, bwd.__name__, bwd.__name__,
                     verdict(res), th,
                     "the same report" if same else "A DIFFERENT REPORT"))


def cross_entropy(N=4096, C=128256, dtypes="float32,bfloat16"):
    """er.cross_entropy_covers_device of torch's F.cross_entropy (mean) and its gradient (autograd: torch's
    composition), logits 2 randn, against the same forward and backward in float64 on the GPU."""
    import torch
    F = torch.nn.functional
    for name in dtypes.split(","):
        dt = getattr(torch, name)
        g = torch.Generator(device="cuda").manual_seed(8)
        z = (2 * torch.randn(N, C, device="cuda", generator=g)).to(dt)
        t = torch.randint(0, C, (N,), device="cuda", generator=g)
        zr = z.clone().requires_grad_(True)
        loss = F.cross_entropy(zr, t)
        loss.backward()
        dz = zr.grad.detach()
        loss = loss.detach()
        tc = t.cpu()

        def base():
            zd = z.double().requires_grad_(True)
            F.cross_entropy(zd, t).backward()
            torch.cuda.synchronize()

        def check():
            return er.cross_entropy_covers_device(z, tc, loss, dz)
        tb, tx, res = rounds(base, check)
        d = res.dlogits
        print("cross_entropy_%s_%dx%d: %.4f s vs baseline %.4f s = %.2fx  (baseline: F.cross_entropy forward and "
              "backward in float64 on the GPU; dlogits %s, loss %s)"
              % (name, N, C, tx, tb, tx / tb, verdict(d), "pass" if res.loss.all() else "FAIL"))


def attention(B=1, H=32, S=8192, D=128, host=0, dtypes="bfloat16,float16"):
    """er.attention_covers_device on the output of torch's scaled_dot_product_attention (its default backend on
    inputs of dtypes, bf16 and fp16 unless told, q, k, v = randn, without and with the causal mask) against the same
    SDPA in float64 on the same GPU (its math backend, the one that takes float64); with host=1 also the host's check
    of copies, once."""
    import torch
    gen = torch.Generator(device="cpu").manual_seed(5)
    for dtype in (getattr(torch, name) for name in dtypes.split(",")):
        q, k, v = (torch.randn((B, H, S, D), generator=gen).to(dtype).cuda() for _ in range(3))
        qd, kd, vd = q.double(), k.double(), v.double()
        for causal in (False, True):
            out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
            torch.cuda.synchronize()

            def base():
                torch.nn.functional.scaled_dot_product_attention(qd, kd, vd, is_causal=causal)
                torch.cuda.synchronize()

            def check():
                return er.attention_covers_device(q, k, v, out, causal=causal)
            tb, tx, res = rounds(base, check)
            name = "attention_covers_device_%s_%dx%dx%dx%dx%d%s" % (str(dtype)[6:], B, H, S, S, D,
                                                                    "_causal" if causal else "")
            extra = ""
            if host:
                t0 = time.perf_counter()
                hres = er.attention(q.cpu(), k.cpu(), v.cpu(), causal=causal).covers(out.cpu())
                extra = "; the host's check of copies %.3f s, %s" % (time.perf_counter() - t0,
                                                                      "the same report" if str(hres) == str(res)
                                                                      else "ANOTHER REPORT")
            print("%s: %.4f s vs baseline %.4f s = %.2fx  (baseline: torch's scaled_dot_product_attention of the "
                  "inputs in float64 on the same GPU; medians of 3 alternating rounds; output of torch's SDPA: %s%s)"
                  % (name, tx, tb, tx / tb, verdict(res), extra), flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["cross_entropy"]:
        cross_entropy(*[int(a) for a in sys.argv[2:4]], *sys.argv[4:5])
    elif sys.argv[1:2] == ["attention"]:
        attention(*[int(a) for a in sys.argv[2:7]], *sys.argv[7:8])
    elif sys.argv[1:2] in (["backward"], ["log_backward"], ["log_backward_masked"]):
        backward([int(a) for a in sys.argv[2:]] or [4096, 16384], sys.argv[1] != "backward",
                 sys.argv[1] == "log_backward_masked")
    elif sys.argv[1:2] == ["epilogue"]:
        epilogue([int(a) for a in sys.argv[2:]] or [2048, 4096, 8192])
    elif sys.argv[1:2] == ["auto"]:
        auto(*[int(a) for a in sys.argv[2:3]])
    elif sys.argv[1:2] == ["classes"]:
        classes(*[int(a) for a in sys.argv[2:3]])
    elif sys.argv[1:2] == ["outputs"]:
        layer_norm_outputs(*[int(a) for a in sys.argv[2:3]])
    else:
        main([int(a) for a in sys.argv[1:]] or [4096, 16384])
