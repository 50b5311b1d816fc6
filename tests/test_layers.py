"""textnb's own modules import one another without a circle.

The graph is drawn from the source with ``ast``: every ``import`` and ``from ... import`` a
module runs when it is loaded (at module level, including under ``if``/``try``). Left out:
those under ``if TYPE_CHECKING:``, which never run, and, in the first test, imports inside
functions and methods, which are how a module stays lazy (a heavy dependency, or a module
reached only at run time) and run after both modules are loaded. The second test counts
those too, each as an edge to the module it names only.

An edge goes to the deepest textnb module the import names, so ``from textnb.engines
import dask`` is an edge to ``textnb.engines.dask``, and ``from textnb import errors`` to
``textnb.errors``; a package's ``__init__`` counts as a module of its own, and importing a
module imports the packages around it first, so ``from textnb.engines.workers import ...``
is an edge to ``textnb.engines`` too (unless the importer is inside that package).
"""

import ast
from pathlib import Path

import textnb

PACKAGE_DIR = Path(textnb.__file__).parent


def _module_name(path):
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _is_type_checking(test):
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"
            or isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _module_level_imports(tree, all_imports=False):
    """The import statements a module runs when it is loaded (not those inside defs)."""
    pending = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            if all_imports:
                pending.extend(ast.iter_child_nodes(node))
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            pending.extend(node.orelse)
        else:
            pending.extend(ast.iter_child_nodes(node))


def import_graph(all_imports=False, packages=True):
    """{module: set of textnb modules it imports at module level}; with ``all_imports``,
    the imports inside functions too; without ``packages``, no edge to the packages
    around an imported module (only the module the import names)."""
    paths = sorted(PACKAGE_DIR.rglob("*.py"))
    modules = {_module_name(p): p for p in paths}
    # compiled extensions (textnb._c._speedups) are modules that import nothing of ours
    extensions = {_module_name(p.with_name(p.name.split(".")[0] + ".py"))
                  for p in PACKAGE_DIR.rglob("*.so")}
    graph = {name: set() for name in extensions - set(modules)}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for node in _module_level_imports(ast.parse(path.read_text(), str(path)),
                                          all_imports):
            if isinstance(node, ast.Import):
                candidates = [alias.name for alias in node.names]
            else:
                if node.level:
                    base = package.split(".")
                    base = base[:len(base) - (node.level - 1)]
                    base = ".".join(base + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                candidates = [f"{base}.{alias.name}" for alias in node.names] + [base]
            for candidate in candidates:
                # the deepest textnb module the import names
                while candidate and candidate not in modules and candidate not in graph:
                    candidate = candidate.rpartition(".")[0]
                if candidate and candidate != name:
                    targets.add(candidate)
                    package_of = candidate.rpartition(".")[0] if packages else ""
                    while package_of and not (name + ".").startswith(package_of + "."):
                        targets.add(package_of)
                        package_of = package_of.rpartition(".")[0]
                    if not isinstance(node, ast.Import):
                        break
        graph[name] = targets
    return graph


def find_cycle(graph):
    """One import circle as a list of modules (first == last), or None."""
    state = {}
    stack = []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == "open":
                return stack[stack.index(target):] + [target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_textnb_modules_import_one_another_without_a_circle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_no_circle_either_through_the_imports_inside_functions():
    """A lazy import postpones a dependency; it does not turn one round. Counted as issue
    36 counted them (each import's own module, imports inside functions included), which
    found 3 circles in the flat package of the time. (Adding the packages around each
    module leaves one loop of two lazy imports: ``spamfilter`` imports
    ``engines.parallel_tokenize`` in ``SpamFilter.parallel``, and the ``engines``
    package's ``make_engine`` imports ``engines.local`` when called, which uses
    ``spamfilter``; importing any of them runs none of the others.)
    """
    cycle = find_cycle(import_graph(all_imports=True, packages=False))
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_the_circle_finder_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    cycle = find_cycle(graph)
    assert cycle[0] == cycle[-1] and set(cycle) == {"a", "b", "c"}
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_graph_sees_textnb_imports():
    graph = import_graph()
    assert "textnb.spamfilter" in graph
    assert graph["textnb.__main__"]


# The folders (and the few modules everything shares) in the order of the flow, bytes ->
# message -> tokens -> counts -> model -> decision, then what is built on it: each imports
# from its own layer or one listed before it. A new module goes into one of them.
LAYERS = [
    "textnb",             # __init__, the public face: imports nothing when loaded
    "textnb._c",          # the per-token loops, in C and in Python; imports none of its callers
    "textnb.errors",
    "textnb.labels",
    "textnb.mail",        # bytes -> message
    "textnb.config",
    "textnb.text",        # message -> tokens
    "textnb.features",    # tokens -> counts
    "textnb.models",      # counts -> model
    "textnb.decision",    # model -> decision
    "textnb.spamfilter",  # all of it in one object, SpamFilter
    "textnb.modelfile",   # the model file and its lifecycle
    "textnb.engines",
    "textnb.evaluation",
    "textnb.delivery",
    "textnb.pmml",
    "textnb.review",      # the review page, on the delivery path's recorder and scorer
    "textnb.commands",    # every command as a function, the daemons included
    "textnb.cli",
    "textnb.__main__",
]

# The imports that point back up, each inside a function (run when called, never on
# import), and why.
UPWARD = {
    # FilterConfig.validate checks model.event_model against the registry of event models
    ("textnb.config", "textnb.models.naive_bayes"),
    # SpamFilter.parallel(jobs) tokenises in the engines' process pool
    ("textnb.spamfilter", "textnb.engines.parallel_tokenize"),
}


def _layer(module):
    for index, layer in enumerate(LAYERS):
        if module == layer or (layer != "textnb" and module.startswith(layer + ".")):
            return index
    raise AssertionError(f"{module} is in no layer: add its folder to LAYERS")


def test_every_module_is_in_a_layer():
    for module in import_graph():
        _layer(module)
    top = {p.name for p in PACKAGE_DIR.iterdir() if not p.name.startswith(("__pycache__", "."))
           and (p.suffix == ".py" or (p / "__init__.py").exists())}
    assert len(top) <= 20, sorted(top)


def test_imports_point_down_the_layers():
    """Imports go to the same layer or a lower one; the exceptions in UPWARD are lazy."""
    lazy = import_graph(all_imports=True, packages=False)
    eager = import_graph(packages=False)
    upward = {(module, target) for module, targets in lazy.items() for target in targets
              if _layer(target) > _layer(module)}
    assert upward <= UPWARD, sorted(upward - UPWARD)
    assert not any(target in eager[module] for module, target in UPWARD)
