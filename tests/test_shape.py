"The paper layer has one experiment shape: the same skeleton in every paper module, claims found by key, notebooks that show the protocol."
import ast, importlib, inspect, json, re, statistics
from pathlib import Path
import pytest
from attribkit.papers import PAPERS, experiment

ROOT = Path(__file__).resolve().parents[1]
MODULES = {prefix: importlib.import_module(f"attribkit.papers.{name}") for prefix, name in PAPERS.items()}
REPRO = sorted((ROOT / "nbs" / "repro").glob("*.ipynb"))

def _code_cells(path: Path) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(path.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code"]

@pytest.mark.parametrize("prefix", sorted(PAPERS))
def test_paper_module_has_the_skeleton(prefix):
    "Each paper: one BUDGETS table with the dry-run row, `setup(run)`, declared weight files, a small __all__."
    mod = MODULES[prefix]
    assert set(experiment.BUDGET_ROWS) <= set(mod.BUDGETS), f"{mod.__name__}.BUDGETS lacks rows"
    assert list(inspect.signature(mod.setup).parameters)[0] == "run", f"{mod.__name__}.setup must take the run first"
    assert not hasattr(mod, "write_fake_weights"), f"{mod.__name__} writes its own fake weights; declare WEIGHT_FILES"
    assert all(isinstance(f, experiment.WeightFile) for f in getattr(mod, "WEIGHT_FILES", []))
    assert len(mod.__all__) <= 50, f"{mod.__name__} exports {len(mod.__all__)} names"

@pytest.mark.parametrize("prefix", sorted(PAPERS))
def test_no_claim_found_by_its_wording(prefix):
    "No paper module reads a claim's text (`c['claim']`), splits it, or keeps a chance margin of its own."
    src = Path(MODULES[prefix].__file__).read_text(encoding="utf-8")
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value == "claim":
            pytest.fail(f"{prefix}: line {node.lineno} reads a claim's wording")
    assert not re.search(r"def at_chance|chance\s*\+\s*\d|<\s*0\.2\b", src), f"{prefix} has a chance rule of its own"

def test_weight_files_are_declared_once_each():
    "The dry run writes every declared path once: declarations of one path agree (the shared torchvision files included)."
    from attribkit.papers import weight_files
    by_path = {}
    for f in weight_files():
        assert by_path.setdefault(f.path, f) == f, f"{f.path} declared twice with different contents"
    assert "weights/vgg16.pth" in by_path

def test_repro_notebooks_show_the_protocol():
    "Every repro notebook starts a run and saves a Result; the median notebook has ≤ 40 code lines."
    lines = []
    for nb in REPRO:
        code = _code_cells(nb)
        body = "\n".join(code[1:])
        assert "start(" in body and ".save(" in body, f"{nb.name}: no start(...) / result.save()"
        lines.append(sum(1 for c in code[1:] for l in c.splitlines() if l.strip() and not l.strip().startswith("#")))
    assert statistics.median(lines) <= 40, f"median {statistics.median(lines)} code lines"
