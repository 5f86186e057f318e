"""Shared by the capture scripts: the outputs they write. write_case_files(out, name, arrays, lines, header) writes
OUT/name.npz (every array as name.npy, stored uncompressed, which tests/common/npz.h reads) and OUT/name.txt (the
header line, then one case a line)."""
import io
import os
import zipfile

import numpy as np


def write_case_files(out, name, arrays, lines, header):
    with zipfile.ZipFile(os.path.join(out, name + ".npz"), "w", zipfile.ZIP_STORED) as z:
        for k, v in arrays.items():
            b = io.BytesIO()
            np.save(b, v)
            z.writestr(k + ".npy", b.getvalue())
    with open(os.path.join(out, name + ".txt"), "w") as f:
        f.write(header.rstrip("\n") + "\n" + "\n".join(lines) + "\n")


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


def torch_header():
    import torch
    import triton
    return "# torch %s, triton %s, %s" % (torch.__version__, triton.__version__, torch.cuda.get_device_name())
