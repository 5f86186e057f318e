"""The package's layers: _ffi is the only module that imports ctypes; the user API (_api, re-exported by __init__)
sits on it, and testing on the user API, with no import through importlib to get round a cycle; the public
namespace is what __all__ lists."""
import ast
import os

import exactref as er

PKG = os.path.dirname(er.__file__)


def _imports(path):
    tree = ast.parse(open(path).read())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out


def test_only_the_ffi_module_imports_ctypes():
    files = sorted(f for f in os.listdir(PKG) if f.endswith(".py"))
    assert "_ffi.py" in files and "_api.py" in files
    users = [f for f in files if "ctypes" in _imports(os.path.join(PKG, f))]
    assert users == ["_ffi.py"], users
    assert "import_module(" not in open(os.path.join(PKG, "testing.py")).read()


def test_public_namespace_is_all():
    """dir(exactref) is __all__, but for the submodules imported on demand (exactref.torch, the pytest plugin),
    which Python sets on the package once imported."""
    import sys
    on_demand = {n for n in dir(er) if not n.startswith("_") and sys.modules.get("exactref." + n) is getattr(er, n)}
    on_demand -= set(er.__all__)
    assert on_demand <= {"torch", "pytest_plugin"}, on_demand
    public = {n for n in dir(er) if not n.startswith("_")} - on_demand
    assert public == set(er.__all__), public ^ set(er.__all__)


def test_docstrings_come_from_the_library_tables():
    from exactref import _ffi

    names = [name for name, _ in _ffi.standard_options()]
    assert len(names) == 31 and names[0] == "compute"
    for name, values in _ffi.standard_options():
        assert "%s=: %s" % (name, values) in er.Reference.covers.__doc__
        assert "%s=: %s" % (name, values) in er.AttentionReference.covers.__doc__
    assert set(_ffi.OPS) >= {"matmul", "softmax", "layernorm", "attention", "quantize"}
    flat = {fn: " ".join(fn.__doc__.split()) for fn in (er.softmax, er.matmul, er.max, er.layer_norm)}
    assert "softmax takes exp_ulps=, div=," in flat[er.softmax]
    assert "rsqrt_ulps" not in flat[er.softmax].split("takes")[-1]
    assert "matmul takes mma:<arch>, compute=tf32, depth=." in flat[er.matmul]
    assert "max takes none." in flat[er.max]
    assert "layernorm takes " + ", ".join(_ffi.op_options("layernorm")) + "." in flat[er.layer_norm]


def test_version_matches_the_library_and_the_package():
    """exactref.__version__ is the library's er_version, and the package's metadata says the same."""
    import re
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    meta = open(os.path.join(root, "pyproject.toml")).read()
    assert er.__version__ == er.version() == re.search(r'^version = "([^"]+)"', meta, re.M).group(1)
