"""Shared by the capture scripts: the outputs they write. write_case_files(out, name, arrays, lines, header) writes
OUT/name.npz (every array as name.npy, deflated: numpy and tests/common/npz.h read it) and OUT/name.txt (the
header line, then one case a line). store_case(arrays, cid, ins, outs) names a case's arrays as the tests read them:
cid__in__name and cid__out__name."""
import io
import os
import zipfile

import numpy as np


def write_case_files(out, name, arrays, lines, header, compressed=True):
    """compressed=False stores the arrays uncompressed."""
    mode = zipfile.ZIP_DEFLATED if compressed else zipfile.ZIP_STORED
    with zipfile.ZipFile(os.path.join(out, name + ".npz"), "w", mode) as z:
        for k, v in arrays.items():
            b = io.BytesIO()
            np.save(b, v)
            z.writestr(k + ".npy", b.getvalue())
    with open(os.path.join(out, name + ".txt"), "w") as f:
        f.write(header.rstrip("\n") + "\n" + "\n".join(lines) + "\n")


def splitmix_values(seed, rows, n, p, e_max):
    """rows x n values that need no storing: splitmix64's output for the state (seed + r) golden + (i + 1) golden
    gives each element's sign (bit 63), a p-bit significand (bits 11 ..) and an exponent in [-e_max, e_max] (bits 40 ..,
    modulo 2 e_max + 1); tests regenerate them (capture_tlsum.py's rows)."""
    g = np.uint64(0x9E3779B97F4A7C15)
    with np.errstate(over="ignore"):
        r = np.arange(rows, dtype=np.uint64)[:, None]
        i = np.arange(n, dtype=np.uint64)[None, :]
        z = (np.uint64(seed) + r) * g + (i + np.uint64(1)) * g
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    m = (z >> np.uint64(11)) & np.uint64((1 << (p - 1)) - 1)
    e = ((z >> np.uint64(40)) % np.uint64(2 * e_max + 1)).astype(np.int64) - e_max
    s = np.where((z >> np.uint64(63)) == 1, -1.0, 1.0)
    return s * np.ldexp(1.0 + m.astype(np.float64) / 2.0 ** (p - 1), e)


def tlsum_values(kind, seed, rows, n, p, e_max):
    """capture_tlsum.py's rows by kind: "wide", splitmix_values as they are; "subnormal", fp32 values of 24 bits and
    exponents in [-10, 10] times 2^-136 (most below fp32's least normal 2^-126; rounded to fp32 by the caller);
    "ties", +-2^e for e in [-1, 25] (sums of powers of two far apart meet exact midpoints)."""
    if kind == "subnormal":
        return splitmix_values(seed, rows, n, 24, 10) * 2.0 ** -136
    if kind == "ties":
        return splitmix_values(seed, rows, n, 1, 13) * 2.0 ** 12
    return splitmix_values(seed, rows, n, p, e_max)


def new_group(arrays, ins):
    """Stores a group's inputs once (gNN__in__name, NN the groups so far) and returns its id gNN."""
    gid = "g%02d" % len({k.split("__")[0] for k in arrays if k.startswith("g")})
    store_case(arrays, gid, ins, {})
    return gid


def store_case(arrays, cid, ins, outs):
    for k, v in ins.items():
        arrays["%s__in__%s" % (cid, k)] = host(v)
    for k, v in outs.items():
        arrays["%s__out__%s" % (cid, k)] = host(v)


def host(t):
    """A torch tensor as the numpy array the tests read: contiguous, on the host; bfloat16 as uint16 patterns and fp8
    as uint8 patterns (numpy has neither)."""
    import torch
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.uint16).numpy()
    if t.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        return t.view(torch.uint8).numpy()
    return t.numpy()


def cuda_row_softmax(exp="expf", div="{e} / {s}", options=()):
    """A CuPy kernel sm(x, y, n, rows): one thread per row, the maximum, a sequential sum of exp(x - max), then each
    output exp(x - max) divided by the sum, with the given exp function and division (a format of e and s), built
    with the given NVRTC options."""
    import cupy as cp
    src = r'''
    extern "C" __global__ void sm(const float* x, float* y, int n, int rows) {
        int r = blockIdx.x * blockDim.x + threadIdx.x;
        if (r >= rows) return;
        const float* xr = x + (long)r * n; float* yr = y + (long)r * n;
        float m = -__int_as_float(0x7f800000);
        for (int j = 0; j < n; j++) m = fmaxf(m, xr[j]);
        float s = 0.f;
        for (int j = 0; j < n; j++) s += EXP(xr[j] - m);
        for (int j = 0; j < n; j++) yr[j] = DIV;
    }'''.replace("EXP", exp).replace("DIV", div.format(e="%s(xr[j] - m)" % exp, s="s"))
    return cp.RawModule(code=src, options=tuple(options)).get_function("sm")


def torch_header():
    import torch
    import triton
    return "# torch %s, triton %s, %s" % (torch.__version__, triton.__version__, torch.cuda.get_device_name())
