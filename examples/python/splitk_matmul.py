"""A split-K matmul "kernel" written with numpy, checked with exactref.

The kernel cuts K into blocks of 32, computes each block's product in float32, and adds the block partials
in float32: an order no framework reference uses. exactref checks it against every result an
fp32-accumulating implementation can produce, whatever its order. A variant that drops the last K block
shows what a bug looks like.
"""
import numpy as np

import exactref as er

BLOCK_K = 32


def splitk_matmul(A, B, drop_last_block=False):
    K = A.shape[1]
    starts = list(range(0, K, BLOCK_K))
    if drop_last_block and len(starts) > 1:
        starts = starts[:-1]
    a, b = A.astype(np.float32), B.astype(np.float32)
    out = np.zeros((A.shape[0], B.shape[1]), dtype=np.float32)
    for k0 in starts:
        partial = np.zeros_like(out)            # one block: products added in float32, one k at a time
        for k in range(k0, min(k0 + BLOCK_K, K)):
            partial += a[:, k, None] * b[None, k, :]
        out += partial                          # the block partials added in float32
    return out


def main():
    rng = np.random.default_rng(2026)
    print("split-K kernel, BLOCK_K = %d, fp16 inputs, fp32 accumulation and output:" % BLOCK_K)
    for (m, k, n) in [(1, 1, 1), (3, 5, 7), (64, 256, 32), (17, 300, 9)]:
        A = rng.uniform(-1, 1, (m, k)).astype(np.float16)
        B = rng.uniform(-1, 1, (k, n)).astype(np.float16)
        out = splitk_matmul(A, B)
        print("%s covered: %s" % ((m, k, n), er.matmul(A, B).covers(out, standard="any_order").all()))
    A = rng.uniform(-1, 1, (17, 300)).astype(np.float16)
    B = rng.uniform(-1, 1, (300, 9)).astype(np.float16)
    res = er.matmul(A, B).covers(splitk_matmul(A, B, drop_last_block=True), standard="any_order", compute="float32")
    print("\nthe same kernel with the last K block dropped, covered: %s" % res.all())
    print(res)


if __name__ == "__main__":
    main()
