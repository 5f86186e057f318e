"""The `exactref` command (also `python -m exactref`):

    exactref check FILE --op OP --inputs A[,B...] --output Y[,Z...] [--standard S] [--option KEY=VALUE ...]
    exactref show RECORD.json
    exactref report RECORD.json [-o REPORT.html]
    exactref --version

`check` loads the named arrays from FILE (a numpy .npz; a torch .pt holding a dict of tensors, where torch is
installed; a .safetensors file, where the safetensors package is), builds `exactref.OP(*inputs)` and prints the
verdict of covers(outputs) with its report: exit 0 when every element passes, 1 when one does not. `show` prints a
record that exactref.testing.check wrote, a line per case; `report` writes it as one self-contained HTML page. A
bad argument or file exits 2 with a message, without a traceback.
"""
import argparse
import base64
import html
import json
import os
import sys

# the ops whose reference takes arrays alone, in order (their other arguments keep their defaults)
OPS = ("matmul", "sum", "mean", "max", "softmax", "log_softmax", "softmax_backward", "log_softmax_backward",
       "attention", "attention_backward", "exp", "exp2", "log", "tanh", "sigmoid", "erf", "rsqrt", "relu", "gelu",
       "silu", "tensor")


class _Refused(Exception):
    """A bad argument or file: its message, exit status 2."""


def _load(path, names):
    """The arrays of `names` from the file at `path`, as numpy arrays (torch tensors through exactref's own
    conversion)."""
    if not os.path.isfile(path):
        raise _Refused("no such file: %s" % path)
    ext = os.path.splitext(path)[1].lower()
    if ext == ".npz":
        import numpy as np
        try:
            z = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise _Refused("%s is not a readable .npz file (%s)" % (path, e))
        have = list(z.files)
        get = z.__getitem__
    elif ext in (".pt", ".pth"):
        try:
            import torch
        except ImportError:
            raise _Refused("%s is a torch file, and torch is not installed" % path)
        try:
            z = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as e:  # torch raises many kinds for a bad file
            raise _Refused("%s is not a readable torch file (%s: %s)" % (path, type(e).__name__, e))
        if not isinstance(z, dict):
            raise _Refused("%s holds a %s; exactref reads a dict of named tensors" % (path, type(z).__name__))
        have = list(z)
        get = z.__getitem__
    elif ext == ".safetensors":
        try:
            from safetensors.numpy import load_file
        except ImportError:
            raise _Refused("%s is a safetensors file, and the safetensors package is not installed" % path)
        try:
            z = load_file(path)
        except Exception as e:
            raise _Refused("%s is not a readable safetensors file (%s: %s)" % (path, type(e).__name__, e))
        have = list(z)
        get = z.__getitem__
    else:
        raise _Refused("%s: expected a .npz, .pt or .safetensors file" % path)
    missing = [n for n in names if n not in have]
    if missing:
        raise _Refused("%s holds no array named %s (it holds: %s)" % (path, ", ".join(missing),
                                                                       ", ".join(sorted(have)) or "nothing"))
    return [get(n) for n in names]


def _names(text, what):
    names = [n.strip() for n in text.split(",")] if text else []
    if not names or not all(names):
        raise _Refused("--%s: expected array names separated by commas, got %r" % (what, text))
    return names


def _options(items):
    out = {}
    for it in items or ():
        key, sep, value = it.partition("=")
        if not sep or not key or not value:
            raise _Refused("--option: expected KEY=VALUE (such as compute=fp32), got %r" % it)
        out[key] = value
    return out


def cmd_check(a):
    import exactref as er
    if a.op not in OPS:
        raise _Refused("--op %s: expected one of %s" % (a.op, ", ".join(OPS)))
    ins, outs = _names(a.inputs, "inputs"), _names(a.output, "output")
    arrays = _load(a.file, ins + outs)
    x, y = arrays[:len(ins)], arrays[len(ins):]
    try:
        ref = getattr(er, a.op)(*x)
        n_out = len(getattr(ref, "OUTPUTS", ("out",)))
        if len(y) > n_out:
            raise _Refused("--output: %s has %d output%s (%s); %d given" % (a.op, n_out, "" if n_out == 1 else "s",
                                                                           ", ".join(ref.OUTPUTS), len(y)))
        res = ref.covers(y[0] if n_out == 1 else tuple(y) + (None,) * (n_out - len(y)), a.standard,
                         **_options(a.option))
    except (TypeError, ValueError, NotImplementedError) as e:  # exactref's refusals (its errors derive from these)
        raise _Refused(str(e))
    print(res)
    return 0 if res.all() else 1


def _record(path):
    if not os.path.isfile(path):
        raise _Refused("no such file: %s" % path)
    try:
        with open(path) as f:
            r = json.load(f)
    except (OSError, ValueError) as e:
        raise _Refused("%s is not a JSON record (%s)" % (path, e))
    if not isinstance(r, dict) or not isinstance(r.get("cases"), list) or "kernel" not in r:
        raise _Refused("%s is not a record of exactref.testing.check (no kernel and cases)" % path)
    return r


def _case_text(c):
    shape = "x".join(str(d) for d in c.get("shape", ()))
    where = "%s %s %s%s" % (shape, c.get("dtype", "?"), c.get("family", "?"),
                            "" if c.get("layout", "contiguous") == "contiguous" else " " + c["layout"])
    if c.get("verdict") == "error":
        return where, "raised: " + str(c.get("error", ""))
    counts = c.get("counts") or {}
    what = ", ".join("%s %d" % kv for kv in sorted(counts.items()) if kv[1]) if counts else c.get("error", "")
    if "config" in c:
        what += "; config " + c["config"]
    return where, what


def _std_text(s):
    return s if isinstance(s, str) else json.dumps(s) if s is not None else "the op's default"


def cmd_show(a):
    r = _record(a.record)
    n, bad = r.get("n_cases", len(r["cases"])), r.get("n_failed", 0)
    print("%s  %s  op %s, standard %s, tier %s, %s" % ("PASS" if r.get("passed") else "FAIL", r["kernel"], r.get("op"),
                                                      _std_text(r.get("standard")), r.get("tier"), r.get("device")))
    print("%d of %d cases %s (library %s, %s)" % (bad or n, n, "failed" if bad else "passed", r.get("library_version"),
                                                  r.get("timestamp")))
    for c in r["cases"]:
        where, what = _case_text(c)
        print("  %-5s %-40s %s" % (c.get("verdict", "?"), where, what))
    m = r.get("minimal_failing_case")
    if m:
        print("minimal failing case: %s" % _case_text(m)[0])
        print("reproduce: %s" % m.get("reproduce", ""))
    return 0


_CSS = ("body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
        "padding:2px 8px;text-align:left}tr.FAIL td,tr.error td{background:#fdd}tr.pass td{background:#efe}"
        "pre{background:#f6f6f6;padding:8px;overflow-x:auto}")


def _picture(record, case):
    """The case's picture (Result.plot, drawn by check() beside its record) as an <img> holding the PNG itself, or ""
    where there is none."""
    name = case.get("picture")
    if not isinstance(name, str) or os.path.basename(name) != name:
        return ""
    path = os.path.join(os.path.dirname(os.path.abspath(record)), name)
    try:
        with open(path, "rb") as f:
            data = base64.b64encode(f.read()).decode("ascii")
    except OSError:
        return "<p>(picture %s not found)</p>" % html.escape(name)
    return '<p><img alt="the classes of case %s" src="data:image/png;base64,%s"></p>' % (html.escape(name), data)


def cmd_report(a):
    r = _record(a.record)
    e = html.escape
    rows, details = [], []
    for i, c in enumerate(r["cases"]):
        where, what = _case_text(c)
        v = c.get("verdict", "?")
        std = _std_text(c["standard"] if "standard" in c else r.get("standard"))
        rows.append('<tr class="%s"><td>%d</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>'
                    % (e(v), i, e(v), e(where), e(std), e(what)))
        if v != "pass" and (c.get("report") or c.get("error")):
            details.append('<h3 id="case%d">case %d: %s</h3>%s<pre>%s</pre><p>reproduce: <code>%s</code></p>'
                           % (i, i, e(where), _picture(a.record, c), e(c.get("report") or c.get("error")),
                              e(c.get("reproduce", ""))))
    n, bad = r.get("n_cases", len(r["cases"])), r.get("n_failed", 0)
    kernel = e(str(r["kernel"]))
    head = ('<!DOCTYPE html><html><head><meta charset="utf-8"><title>exactref: %s</title><style>%s</style></head>'
            % (kernel, _CSS))
    summary = ("<h1>%s %s</h1><p>op %s, standard %s, tier %s, %s; library %s, %s</p><p>%d of %d cases %s</p>"
               % ("PASS" if r.get("passed") else "FAIL", kernel, e(str(r.get("op"))), e(_std_text(r.get("standard"))),
                  e(str(r.get("tier"))), e(str(r.get("device"))), e(str(r.get("library_version"))),
                  e(str(r.get("timestamp"))), bad or n, n, "failed" if bad else "passed"))
    table = ("<table><tr><th>case</th><th>verdict</th><th>shape, dtype, family</th><th>standard</th>"
             "<th>classes</th></tr>%s</table>" % "".join(rows))
    out = a.output or os.path.splitext(a.record)[0] + ".html"
    try:
        with open(out, "w") as f:
            f.write(head + "<body>" + summary + table + "".join(details) + "</body></html>\n")
    except OSError as ex:
        raise _Refused("cannot write %s (%s)" % (out, ex))
    print("wrote %s" % out)
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(prog="exactref", description="Check kernel outputs against exact references, and read "
                                "the records of exactref.testing.check.")
    p.add_argument("--version", action="store_true", help="print the package's and the library's versions")
    sub = p.add_subparsers(dest="command")
    c = sub.add_parser("check", help="check saved outputs against an op's reference")
    c.add_argument("file", help="a .npz, .pt or .safetensors file holding the inputs and outputs")
    c.add_argument("--op", required=True, help="the op (%s)" % ", ".join(OPS))
    c.add_argument("--inputs", required=True, help="the inputs' array names, in the op's order, comma-separated")
    c.add_argument("--output", required=True, help="the output's array name (several, comma-separated, for an op "
                   "with several outputs)")
    c.add_argument("--standard", default="any_order", help="the standard (default any_order)")
    c.add_argument("--option", action="append", metavar="KEY=VALUE", help="a standard option (repeatable)")
    s = sub.add_parser("show", help="print a check record, a line per case")
    s.add_argument("record")
    r = sub.add_parser("report", help="write a check record as one HTML page")
    r.add_argument("record")
    r.add_argument("-o", "--output", help="the page's path (default: the record's, .html)")
    a = p.parse_args(argv)
    try:
        if a.version:
            import exactref as er
            print("exactref %s (libexactref %s)" % (er.__version__, er.version()))
            return 0
        if a.command is None:
            p.print_usage(sys.stderr)
            print("exactref: a command is needed: check, show or report", file=sys.stderr)
            return 2
        return {"check": cmd_check, "show": cmd_show, "report": cmd_report}[a.command](a)
    except _Refused as e:
        print("exactref: %s" % e, file=sys.stderr)
        return 2
    except ImportError as e:  # the library could not be loaded: its own message says what to do
        print("exactref: %s" % e, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
