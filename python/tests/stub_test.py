"""ps/_ps.pyi against the built extension ps._ps: the stub cannot rot.

Run by //python:stub_test (python/tests/run_python_test.sh).

pybind11 writes each function's signature as the first line of its
docstring, e.g. `pull(self: ps._ps.Client, min_version: int, out:
Optional[List[numpy.ndarray]] = None) -> List[numpy.ndarray]`, and each
property's as its getter's. The test parses those and the stub (both with
`ast`) and compares, for the module's functions and for every class, its
methods and properties: the same names, the same arguments in the same
order with the same annotations and defaults, and the same return type.
Annotations are compared as text, after two spellings are made one:
pybind11's `ps._ps.Client` is the stub's `Client`, and its `numpy.ndarray`
is the stub's `NDArray[<dtype>]` (pybind11 knows no dtype; the stub says
which the extension takes and returns).
"""

import ast
import os
import re
import unittest
from typing import Dict, List, Optional

import ps._ps as ext

STUB = os.path.join(os.path.dirname(os.path.abspath(ext.__file__)), "_ps.pyi")


class Signature:
    """A function's arguments (name, annotation, default) and return type, as text."""

    def __init__(self, fn: ast.FunctionDef, normalize, method: bool) -> None:
        args = fn.args.args[1:] if method else fn.args.args  # without self
        defaults = [None] * (len(fn.args.args) - len(fn.args.defaults)) + fn.args.defaults
        defaults = defaults[1:] if method else defaults
        self.args = [(a.arg, normalize(a.annotation), ast.unparse(d) if d is not None else None)
                     for a, d in zip(args, defaults)]
        self.returns = normalize(fn.returns)

    def __eq__(self, other) -> bool:
        return (self.args, self.returns) == (other.args, other.returns)

    def __repr__(self) -> str:
        args = ", ".join(f"{n}: {t}" + (f" = {d}" if d is not None else "")
                         for n, t, d in self.args)
        return f"({args}) -> {self.returns}"


def _annotation(node: Optional[ast.expr]) -> str:
    return ast.unparse(node) if node is not None else "<none>"


def from_stub(node: Optional[ast.expr]) -> str:
    return re.sub(r"NDArray\[[^\[\]]*\]", "numpy.ndarray", _annotation(node))


def from_pybind(node: Optional[ast.expr]) -> str:
    return _annotation(node).replace("ps._ps.", "")


def pybind_signature(doc: Optional[str], name: str, method: bool) -> Signature:
    """The Signature in the first line of a pybind11 docstring."""
    line = (doc or "").splitlines()[0] if doc else ""
    if line.startswith("("):  # a property's getter: no name
        line = name + line
    tree = ast.parse(f"def {line}: ...")
    return Signature(tree.body[0], from_pybind, method)


def module_api(module) -> Dict[str, Dict[str, Signature]]:
    """'' -> the module's functions, and class name -> its methods and
    properties, with their signatures."""
    api: Dict[str, Dict[str, Signature]] = {"": {}}
    for name, value in vars(module).items():
        if name.startswith("__"):
            continue
        if isinstance(value, type):
            members = api.setdefault(name, {})
            for m, v in vars(value).items():
                if isinstance(v, property):
                    members[m] = pybind_signature(v.fget.__doc__, m, method=True)
                elif type(v).__name__ == "instancemethod":
                    members[m] = pybind_signature(v.__doc__, m, method=True)
        elif callable(value):
            api[""][name] = pybind_signature(value.__doc__, name, method=False)
    return api


def stub_api(source: str) -> Dict[str, Dict[str, Signature]]:
    """The same from the stub's source."""
    api: Dict[str, Dict[str, Signature]] = {"": {}}
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef):
            api[""][node.name] = Signature(node, from_stub, method=False)
        elif isinstance(node, ast.ClassDef):
            members = api.setdefault(node.name, {})
            for m in node.body:
                if isinstance(m, ast.FunctionDef):
                    members[m.name] = Signature(m, from_stub, method=True)
    return api


def differences(module, stub_source: str) -> List[str]:
    """What differs between the module and the stub, one line each."""
    real, stub = module_api(module), stub_api(stub_source)
    out = []
    for scope in sorted(set(real) | set(stub)):
        where = scope or "the module"
        if scope not in stub:
            out.append(f"class {scope}: in the extension, not in the stub")
            continue
        if scope not in real:
            out.append(f"class {scope}: in the stub, not in the extension")
            continue
        for name in sorted(set(real[scope]) | set(stub[scope])):
            r, s = real[scope].get(name), stub[scope].get(name)
            if r is None:
                out.append(f"{where}: {name} is in the stub, not in the extension")
            elif s is None:
                out.append(f"{where}: {name} is in the extension, not in the stub")
            elif r != s:
                out.append(f"{where}: {name}: extension {r}, stub {s}")
    return out


class StubTest(unittest.TestCase):
    def setUp(self) -> None:
        with open(STUB) as f:
            self.stub = f.read()

    def test_the_stub_states_the_extension_exactly(self) -> None:
        self.assertEqual(differences(ext, self.stub), [])
        # Both sides were read: every class and method the extension has.
        api = module_api(ext)
        self.assertEqual(sorted(api),
                         ["", "Client", "JobMember", "PushPullInProgress",
                          "PushPullRowsInProgress"])
        self.assertIn("pull", api["Client"])
        self.assertIn("version", api["Client"])
        print(f"{sum(len(m) for m in api.values())} functions, methods and properties agree")

    def test_a_stub_that_differs_is_caught(self) -> None:
        changes = [
            ("min_version: int", "min_version: float"),                  # a type
            ("def close(self)", "def shut(self)"),                       # a name
            ("grad: NDArray[float32]) -> None", "grad: NDArray[float32], x: int) -> None"),
            ("out: Optional[List[NDArray[float32]]] = None) -> List[NDArray[float32]]: ...\n"
             "    def push(",
             "out: Optional[List[NDArray[float32]]]) -> List[NDArray[float32]]: ...\n"
             "    def push("),                                           # a default
            ("def num_shards(self) -> int", "def num_shards(self) -> str"),  # a property
        ]
        for old, new in changes:
            self.assertIn(old, self.stub)
            found = differences(ext, self.stub.replace(old, new, 1))
            self.assertNotEqual(found, [], f"{old!r} -> {new!r} was not caught")


if __name__ == "__main__":
    unittest.main(verbosity=2)
