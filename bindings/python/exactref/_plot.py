"""Result.plot: an image of an output's elements by class (matplotlib, an optional dependency)."""
import numpy as np

from ._ffi import CLASSES

# The picture's codes, one color each: the passing classes, then outside by how far (in ulps of the output format
# at the output), then the special values' classes.
CODES = ("exact", "covered", "overflow", "outside, < 2 ulps", "outside, 2 to 16 ulps", "outside, > 16 ulps",
         "outside (no distance)", "NaN or inf where not allowed", "NaN or inf missing")
COLORS = ("#1a9850", "#a6d96a", "#fee08b", "#fdae61", "#f46d43", "#a50026", "#d73027", "#542788", "#998ec3")


def codes(classes, slack=None):
    """Each element's picture code (an index into CODES) from its class and, for an outside element, its slack (the
    distance to its set in ulps, negative outside; NaN or None where unknown)."""
    c = np.asarray(classes)
    out = np.full(c.shape, CODES.index("outside (no distance)"), np.int8)
    for name, code in (("exact", 0), ("covered", 1), ("overflow", 2), ("nan_unexpected", 7), ("inf_unexpected", 7),
                       ("nan_missing", 8), ("inf_missing", 8)):
        out[c == CLASSES.index(name)] = code
    outside = c == CLASSES.index("outside")
    if slack is not None:
        d = -np.asarray(slack, np.float64)
        with np.errstate(invalid="ignore"):
            out[outside & (d < 2)] = 3
            out[outside & (d >= 2) & (d <= 16)] = 4
            out[outside & (d > 16)] = 5
    return out


def _grid(a):
    """The array as 2-D panels: (panels, rows, cols) and the panels' labels (the leading indices)."""
    if a.ndim == 0:
        return a.reshape(1, 1, 1), [""]
    if a.ndim == 1:
        return a.reshape(1, 1, -1), [""]
    lead = a.shape[:-2]
    panels = a.reshape((-1,) + a.shape[-2:])
    labels = [str(tuple(int(i) for i in np.unravel_index(k, lead))) for k in range(panels.shape[0])] if lead else [""]
    return panels, labels


#: The meta-parameters that name an output tile's rows and columns in kernel configs (Triton's tutorials, CUTLASS-style
#: and Inductor's names), looked up without regard to case, first match wins.
TILE_ROWS = ("BLOCK_M", "BLOCK_SIZE_M", "BM", "TILE_M", "BLOCK_ROWS", "XBLOCK")
TILE_COLS = ("BLOCK_N", "BLOCK_SIZE_N", "BN", "TILE_N", "BLOCK_COLS", "YBLOCK")


def tiles_of(config, cols=True):
    """(rows, cols) of the output tile a kernel config sets: from a triton.Config (its kwargs) or a dict of
    meta-parameters; None for an axis it does not tile (cols=False: only rows, as for attention, whose BLOCK_N tiles
    the keys, not the output)."""
    from collections.abc import Mapping
    kw = config if isinstance(config, Mapping) else getattr(config, "kwargs", None)
    if not isinstance(kw, Mapping):
        raise TypeError("exactref: plot: tiles must be (rows, cols), a triton.Config or a dict of meta-parameters, "
                        "not %s" % type(config).__name__)
    upper = {str(k).upper(): v for k, v in kw.items()}

    def pick(names):
        for n in names:
            if n in upper:
                v = upper[n]
                if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v <= 0:
                    raise ValueError("exactref: plot: the config's %s is %r; a tile's size must be a positive "
                                     "integer" % (n, v))
                return int(v)
        return None

    return pick(TILE_ROWS), pick(TILE_COLS) if cols else None


def _tiles(tiles):
    """plot's tiles= as (rows or None, cols or None)."""
    if isinstance(tiles, (tuple, list)):
        if len(tiles) != 2 or not all(isinstance(t, (int, np.integer)) and not isinstance(t, bool) and t > 0
                                      for t in tiles):
            raise ValueError("exactref: plot: tiles must be two positive integers (rows, cols), not %r" % (tiles,))
        return int(tiles[0]), int(tiles[1])
    if isinstance(tiles, (str, bytes, int, float)):
        raise ValueError("exactref: plot: tiles must be two positive integers (rows, cols), not %r" % (tiles,))
    t = tiles_of(tiles)
    if t == (None, None):
        kw = tiles if isinstance(tiles, dict) else tiles.kwargs
        raise ValueError("exactref: plot: the config names no output tile (looked for %s or %s among its "
                         "meta-parameters %s)" % ("/".join(TILE_ROWS), "/".join(TILE_COLS), sorted(map(str, kw))))
    return t


def plot(result, path=None, tiles=None, title=None, max_panels=16):
    """The figure (matplotlib), saved to path when given."""
    try:
        import matplotlib
        if path is not None:
            matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
        from matplotlib.colors import BoundaryNorm, ListedColormap
        from matplotlib.patches import Patch
    except ImportError:
        raise ImportError("exactref: Result.plot needs matplotlib: pip install 'exactref[plot]' (or pip install "
                          "matplotlib)") from None
    if tiles is not None:
        tiles = _tiles(tiles)
    try:
        slack = result.slack
    except ValueError:  # a result without sets: classes alone
        slack = None
    panels, labels = _grid(codes(result.classes, slack))
    n = min(panels.shape[0], max_panels)
    cols = int(np.ceil(np.sqrt(n)))
    rows = int(np.ceil(n / cols))
    fig, axes = plt.subplots(rows, cols, squeeze=False, figsize=(min(4 * cols, 16), min(3.2 * rows, 12) + 0.8))
    cmap = ListedColormap(COLORS)
    norm = BoundaryNorm(np.arange(len(CODES) + 1) - 0.5, len(CODES))
    for k, ax in enumerate(axes.flat):
        if k >= n:
            ax.axis("off")
            continue
        img = panels[k]
        ax.imshow(img, cmap=cmap, norm=norm, interpolation="nearest", aspect="auto")
        ax.set_title(labels[k], fontsize=8)
        ax.tick_params(labelsize=7)
        if tiles is not None:
            for y in np.arange(tiles[0], img.shape[0], tiles[0]) if tiles[0] else ():
                ax.axhline(y - 0.5, color="k", linewidth=0.4)
            for x in np.arange(tiles[1], img.shape[1], tiles[1]) if tiles[1] else ():
                ax.axvline(x - 0.5, color="k", linewidth=0.4)
    present = sorted(set(np.unique(panels[:n]).tolist()))
    fig.legend(handles=[Patch(color=COLORS[c], label=CODES[c]) for c in present], loc="lower center",
               ncol=min(len(present), 4), fontsize=8, frameon=False)
    counts = ", ".join("%s %d" % kv for kv in result.counts.items() if kv[1])
    more = "" if panels.shape[0] <= max_panels else " (the first %d of %d panels)" % (max_panels, panels.shape[0])
    fig.suptitle((title + "\n" if title else "") + counts + more, fontsize=9)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig
