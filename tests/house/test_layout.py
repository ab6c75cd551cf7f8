"""Each room of the project keeps to its job, read from every Python file's imports (with ``ast``):

- only pytest imports a test module or a conftest: what tests share lives in tests/support/;
- nothing outside tests/ imports the tests: the tools (scripts/), the build (sitebuild/), how it is
  looked at (sitelook/), the package (attn_ref/), the snippets and the tutorials run without them;
- the build imports nothing that looks at what it built (sitelook/): building needs none of it;
- a name that tests/support/ defines (a function, a class, a constant) is defined in no other file
  under tests/: one home per helper. A fixture may share a helper's name, and so may a shape's
  one-letter dimension (B, T, C);
- a helper (a function, a class or a lower-case name, private ones included) is defined in one file
  under tests/ only: two copies of a reference can drift, and a test then passes against the wrong
  one. Tests and fixtures may share names across modules, and so may a module's upper-case
  settings (its tolerances, its number of examples).

A few names mean another thing in each of their files, and are listed below with what they mean.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

from sitelook.project import ROOT

OUTSIDE_TESTS = ["attn_ref", "docs", "scripts", "sitebuild", "sitelook", "snippets"]
REFERENCE, PRINTED = "tests/support/reference.py", "tests/support/printed.py"
WORST_CASE, BLOCK = "tests/support/worst_case_rounding.py", "tests/support/transformer_block_reference.py"
# One name, another thing in each of these files.
SAME_NAME_OTHER_THING = {
    # A step in float64 (reference), and the same step with how far float32 may land from it, as a
    # `Rounded` (worst_case_rounding) or a (value, bound) pair at any unit roundoff (the block's); and
    # a reader's solution that the check command reads as a file (attention_solutions).
    "attention": {REFERENCE, WORST_CASE, BLOCK, "tests/support/attention_solutions.py"},
    "linear": {REFERENCE, WORST_CASE, BLOCK},
    "softmax": {REFERENCE, WORST_CASE},
    "multihead_attention": {REFERENCE, WORST_CASE},
    "layer_norm": {REFERENCE, BLOCK},
    "gelu": {REFERENCE, BLOCK},
    # A number printed in full; a float32 input, held exactly.
    "exact": {PRINTED, WORST_CASE},
    # Within float32 attention's bounds, nan matching nan; within the gradients' bounds, with a
    # relative 1e-9 of slack.
    "assert_within": {"tests/support/float32_attention_bounds.py", "tests/attn_ref/test_backward.py"},
    # The boxes of the transformer block's diagram, top to bottom; of the whole model's, row by row.
    "box_texts": {
        "tests/snippets/transformer_block/test_diagram.py",
        "tests/snippets/transformer_block/test_model.py",
    },
    # Each property test's draws: the delta rule's shapes and chunks; the sparse masks' blocks.
    "cases": {"tests/attn_ref/compression/test_delta_rule.py", "tests/attn_ref/test_sparse.py"},
    # A head's width in each module's worked example.
    "d_k": {
        "tests/snippets/mental_model/test_one_query.py",
        "tests/snippets/transformer_block/test_sentence_write.py",
        "tests/tutorials/test_scaled_dot_product_step_by_step.py",
    },
    # The text field of each model playground: the induction page's tokens, the text page's text.
    "field": {"tests/browser/test_playground_induction.py", "tests/browser/test_playground_text.py"},
    # KIVI's quantizer in float64 (codes, scales, zeros); and read back in the input's own dtype,
    # operation by operation, as the tutorial's float32 computes it.
    "quantize_np": {
        "tests/attn_ref/compression/test_compression.py",
        "tests/tutorials/test_cache_compression.py",
    },
    # Each transformer-block snippet's own result, computed exactly with its float32 bound.
    "reference": {
        "tests/snippets/transformer_block/test_layer_norm.py",
        "tests/snippets/transformer_block/test_sentence_write.py",
        "tests/snippets/transformer_block/test_vs_pytorch.py",
    },
}


def python_files(folder: Path) -> list[Path]:
    return sorted(path for path in folder.rglob("*.py") if "node_modules" not in path.parts)


def module_name(path: Path, root: Path) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts)


def imported(path: Path, root: Path) -> set[str]:
    """Every module ``path`` imports, and every name it imports from one (which may be a module:
    ``from tests.support import reference``), as dotted names."""
    own = module_name(path, root)
    package = own if path.name == "__init__.py" else own.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""  # from . and from ..
            module = ".".join(filter(None, [base, node.module]))
            found |= {module} | {f"{module}.{alias.name}" for alias in node.names}
    return found


def within(name: str, module: str) -> bool:
    return name == module or name.startswith(module + ".")


def defined(path: Path) -> set[str]:
    """The public names ``path`` defines at its top level: functions, classes and constants, not
    fixtures, nor one-letter dimensions."""
    names = set()
    for node in ast.parse(path.read_text(), filename=str(path)).body:
        if isinstance(node, ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.FunctionDef):
            if not any("fixture" in ast.unparse(decorator) for decorator in node.decorator_list):
                names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {
                name.id for target in targets for name in ast.walk(target) if isinstance(name, ast.Name)
            }
    return {name for name in names if not name.startswith("_") and len(name) > 1}


def helpers(path: Path) -> set[str]:
    """The helpers ``path`` defines at its top level, private ones included: functions (not tests,
    not fixtures), classes, and lower-case names (a strategy, a function made by another); not
    upper-case settings, nor one-letter dimensions."""
    names = set()
    for node in ast.parse(path.read_text(), filename=str(path)).body:
        if isinstance(node, ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.FunctionDef):
            fixture = any("fixture" in ast.unparse(decorator) for decorator in node.decorator_list)
            if not fixture and not node.name.startswith("test_"):
                names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {
                name.id
                for target in targets
                for name in ast.walk(target)
                if isinstance(name, ast.Name) and not name.id.isupper() and name.id != "pytestmark"
            }
    return {name for name in names if len(name.strip("_")) > 1}


def imports_of_test_modules(root: Path) -> list[str]:
    """Every import, under ``root``/tests, of a test module (tests/**/test_*.py) or a conftest."""
    files = python_files(root / "tests")
    tests = {module_name(p, root) for p in files if p.name.startswith("test_") or p.name == "conftest.py"}
    return [
        f"{path.relative_to(root)} imports {name}"
        for path in files
        for name in sorted(imported(path, root))
        if any(within(name, test) for test in tests)
    ]


def imports_of(root: Path, folder: str, package: str = "tests") -> list[str]:
    """Every import of ``package`` (the tests by default) in ``root``/``folder``."""
    return [
        f"{path.relative_to(root)} imports {name}"
        for path in python_files(root / folder)
        for name in sorted(imported(path, root))
        if within(name, package)
    ]


def support_defined_twice(root: Path, other_things: dict[str, set[str]]) -> list[str]:
    """Every name of ``root``/tests/support that another file under ``root``/tests defines too,
    unless ``other_things`` lists those files as another thing of the same name."""
    homes = defaultdict(set)
    for path in python_files(root / "tests"):
        for name in defined(path):
            homes[name].add(path.relative_to(root).as_posix())
    support = {name for path in python_files(root / "tests" / "support") for name in defined(path)}
    return [
        f"{name} is defined in {', '.join(sorted(homes[name]))}"
        for name in sorted(support)
        if len(homes[name]) > 1 and not homes[name] <= other_things.get(name, set())
    ]


def helpers_defined_twice(root: Path, other_things: dict[str, set[str]]) -> list[str]:
    """Every helper that two or more files under ``root``/tests define, unless ``other_things``
    lists those files as another thing of the same name."""
    homes = defaultdict(set)
    for path in python_files(root / "tests"):
        for name in helpers(path):
            homes[name].add(path.relative_to(root).as_posix())
    return [
        f"{name} is defined in {', '.join(sorted(files))}"
        for name, files in sorted(homes.items())
        if len(files) > 1 and not files <= other_things.get(name, set())
    ]


def test_only_pytest_imports_a_test_module_or_a_conftest():
    assert imports_of_test_modules(ROOT) == []


@pytest.mark.parametrize("folder", OUTSIDE_TESTS)
def test_nothing_outside_the_tests_imports_them(folder):
    assert imports_of(ROOT, folder) == []


def test_the_build_imports_nothing_that_looks_at_it():
    assert imports_of(ROOT, "sitebuild", "sitelook") == []


def test_a_helper_of_tests_support_has_no_copy_under_tests():
    assert support_defined_twice(ROOT, SAME_NAME_OTHER_THING) == []


def test_a_helper_is_defined_in_one_test_file_only():
    assert helpers_defined_twice(ROOT, SAME_NAME_OTHER_THING) == []


def test_each_check_finds_what_it_looks_for(tmp_path):
    """A small project with one of each violation, written the ways imports can be written."""
    files = {
        "tests/__init__.py": "",
        "tests/conftest.py": "",
        "tests/support/__init__.py": "",
        "tests/support/arrays.py": "def as64(x):\n    return x\n\nEPS = 1.0\n\ndef _private():\n    pass\n",
        "tests/test_a.py": "from tests.test_b import helper\n\ndef as64(x):\n    return x\n",
        "tests/test_b.py": "from . import conftest\n\ndef helper():\n    pass\n\nEPS = 2.0\n",
        "tests/sub/__init__.py": "",
        "tests/sub/test_c.py": "from ..test_a import as64\nfrom tests.support import arrays\n",
        "tests/test_d.py": "import pytest\n\n@pytest.fixture\ndef as64():\n    pass\n\ndef _private():\n    pass\n",
        "tests/sub/test_e.py": "SETTINGS = 1\nstrategy = 2\n\ndef test_one():\n    pass\n\ndef _private():\n    pass\n",
        "tests/sub/test_f.py": "SETTINGS = 2\nstrategy = 3\n\ndef test_one():\n    pass\n",
        "scripts/tool.py": "import tests.support.arrays\n",
        "sitebuild/build.py": "from tests import support\nfrom sitebuild import other\n",
        "sitebuild/pages.py": "from sitelook import budgets\nimport sitelook.project\nimport sitelookalike\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert imports_of_test_modules(tmp_path) == [
        "tests/sub/test_c.py imports tests.test_a",
        "tests/sub/test_c.py imports tests.test_a.as64",
        "tests/test_a.py imports tests.test_b",
        "tests/test_a.py imports tests.test_b.helper",
        "tests/test_b.py imports tests.conftest",
    ]
    assert imports_of(tmp_path, "scripts") == ["scripts/tool.py imports tests.support.arrays"]
    assert imports_of(tmp_path, "sitebuild") == [
        "sitebuild/build.py imports tests",
        "sitebuild/build.py imports tests.support",
    ]
    assert imports_of(tmp_path, "sitebuild", "sitelook") == [
        "sitebuild/pages.py imports sitelook",
        "sitebuild/pages.py imports sitelook.budgets",
        "sitebuild/pages.py imports sitelook.project",
    ]
    assert support_defined_twice(tmp_path, {}) == [
        "EPS is defined in tests/support/arrays.py, tests/test_b.py",
        "as64 is defined in tests/support/arrays.py, tests/test_a.py",
    ]
    assert support_defined_twice(tmp_path, {"as64": {"tests/support/arrays.py", "tests/test_a.py"}}) == [
        "EPS is defined in tests/support/arrays.py, tests/test_b.py"
    ]
    assert helpers_defined_twice(tmp_path, {}) == [
        "_private is defined in tests/sub/test_e.py, tests/support/arrays.py, tests/test_d.py",
        "as64 is defined in tests/support/arrays.py, tests/test_a.py",
        "strategy is defined in tests/sub/test_e.py, tests/sub/test_f.py",
    ]
    allowed = {"strategy": {"tests/sub/test_e.py", "tests/sub/test_f.py"}}
    assert "strategy is defined in tests/sub/test_e.py, tests/sub/test_f.py" not in helpers_defined_twice(
        tmp_path, allowed
    )


def unmirrored_tests(root: Path) -> list[str]:
    """Each test module under tests/attn_ref/, tests/sitebuild/ and tests/sitelook/ that names no module (or
    subpackage) at the same place in the package it mirrors: one file name, one meaning."""
    unmirrored = []
    for package in ("attn_ref", "sitebuild", "sitelook"):
        for test in sorted((root / "tests" / package).rglob("test_*.py")):
            place = root / package / test.parent.relative_to(root / "tests" / package)
            name = test.stem.removeprefix("test_")
            if not ((place / f"{name}.py").is_file() or (place / name).is_dir() or place.name == name):
                unmirrored.append(test.relative_to(root).as_posix())
    return unmirrored


def test_the_tests_of_a_package_mirror_its_modules():
    assert unmirrored_tests(ROOT) == []


def test_an_unmirrored_test_module_is_found(tmp_path):
    for path in ("attn_ref/serving/paged.py", "sitebuild/values.py"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    for path in (
        "attn_ref/serving/test_paged.py",
        "attn_ref/serving/test_serving.py",
        "attn_ref/test_pages.py",
    ):
        (tmp_path / "tests" / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "tests" / path).write_text("")
    (tmp_path / "tests" / "sitebuild").mkdir()
    (tmp_path / "tests" / "sitebuild" / "test_freshness.py").write_text("")
    assert unmirrored_tests(tmp_path) == ["tests/attn_ref/test_pages.py", "tests/sitebuild/test_freshness.py"]
