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


# ---- the inside of the shape: read from the source (AST), so that a lookup planted anywhere in the paper layer fails ----
PAPER_SOURCES = sorted(p for p in (ROOT / "attribkit" / "papers").rglob("*.py") if p.name not in ("experiment.py", "zoo.py"))
CLAIM_TEXT = ("claim", "detail")   # a claim's words and its measurement note: shown, never searched


def text_lookups(src: str) -> list[str]:
    "Where `src` reads a claim's text fields: `x['claim']`/`x['detail']` (indexing, then `in`, `startswith`, … on it), `x.get('claim'/'detail')`."
    found = []
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value in CLAIM_TEXT:
            if isinstance(node.ctx, ast.Load):
                found.append(f"line {node.lineno}: [{node.slice.value!r}]")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args
              and isinstance(node.args[0], ast.Constant) and node.args[0].value in CLAIM_TEXT):
            found.append(f"line {node.lineno}: .get({node.args[0].value!r})")
    return found


def test_the_text_lookup_check_catches_planted_lookups():
    "The check below fails on the lookups it forbids (planted here) and passes the ways claims are meant to be read."
    assert text_lookups('ok = any(c["detail"].startswith("control") for c in claims)')
    assert text_lookups('why = c.get("claim")')
    assert text_lookups('hit = "at chance" in c["detail"]')
    assert not text_lookups('gated = {k for c in claims for k in c["gated_by"]}; why = c["reasons"]; d = dict(detail="x")')


@pytest.mark.parametrize("path", PAPER_SOURCES + [ROOT / "attribkit" / "claims.py"], ids=lambda p: p.relative_to(ROOT).as_posix())
def test_claims_are_linked_by_fields_not_text(path):
    "No code of the paper layer or of attribkit.claims reads a claim's words or detail: links travel as fields (key, gated_by, reasons)."
    assert not text_lookups(path.read_text(encoding="utf-8")), f"{path.name} reads claim text: {text_lookups(path.read_text(encoding='utf-8'))}"


def _scale_tests(src: str) -> list[int]:
    "Lines where `src` compares a scale (`scale`, `x.scale`) with ==, !=, in or not in."
    out = []
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any((isinstance(s, ast.Name) and s.id == "scale") or (isinstance(s, ast.Attribute) and s.attr == "scale") for s in sides):
                out.append(node.lineno)
    return out


def test_scale_lives_in_the_budget():
    "No paper module and no repro notebook chooses behaviour by the scale's name: scale is a budget row, its knobs the behaviour."
    for p in PAPER_SOURCES:
        assert not _scale_tests(p.read_text(encoding="utf-8")), f"{p.relative_to(ROOT)} compares the scale at lines {_scale_tests(p.read_text(encoding='utf-8'))}"
    for nb in REPRO:
        for code in _code_cells(nb):
            code = "\n".join(l for l in code.splitlines() if not l.lstrip().startswith(("%", "!")))
            assert not _scale_tests(code), f"{nb.name} compares the scale"


def _functions(tree) -> list:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def test_no_dispatch_on_the_notebook_name_and_the_run_unchanged():
    "No paper module looks anything up by the notebook's name (a renamed copy runs), and none assigns into the `Run` it is given."
    for p in PAPER_SOURCES:
        tree = ast.parse(p.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            sl = node.slice if isinstance(node, ast.Subscript) else None
            if isinstance(sl, ast.Attribute) and sl.attr == "name" and (
                    (isinstance(sl.value, ast.Name) and sl.value.id == "run") or (isinstance(sl.value, ast.Attribute) and sl.value.attr == "run")):
                pytest.fail(f"{p.relative_to(ROOT)}:{node.lineno} looks up by the notebook's name (`run.name`)")
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
            for t in targets:
                base = t
                while isinstance(base, (ast.Attribute, ast.Subscript)): base = base.value
                if isinstance(base, ast.Name) and base.id == "run" and base is not t:
                    pytest.fail(f"{p.relative_to(ROOT)}:{node.lineno} changes the run")
        assert "NOTEBOOK_CLAIMS" not in p.read_text(encoding="utf-8")


def test_functions_are_short():
    "No function of the paper layer is longer than 65 lines (measure, table and claims are separate functions)."
    long = [f"{p.relative_to(ROOT)}:{f.lineno} {f.name} ({f.end_lineno - f.lineno + 1} lines)"
            for p in PAPER_SOURCES for f in _functions(ast.parse(p.read_text(encoding="utf-8"))) if f.end_lineno - f.lineno + 1 > 65]
    assert not long, long


def test_rules_are_one_dict_defined_once():
    "Each paper's diagnosis RULES is one dict, assigned once at module level and never changed later."
    for prefix, mod in MODULES.items():
        assert isinstance(mod.RULES, dict) and mod.RULES, prefix
    for p in PAPER_SOURCES:
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Assign, ast.AugAssign)):
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                    if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == "RULES":
                        pytest.fail(f"{p.relative_to(ROOT)}:{node.lineno} changes RULES after defining it")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("update", "setdefault") \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "RULES":
                pytest.fail(f"{p.relative_to(ROOT)}:{node.lineno} changes RULES after defining it")


@pytest.mark.parametrize("prefix", sorted(PAPERS))
def test_setups_steps_and_figures_have_one_shape(prefix):
    "Each paper's setups subclass `experiment.Setup`; each step it declares (`STEPS`) returns a `Result`; each figure function (`FIGURES`) returns a Figure (or a gallery's parts) and never writes into what it is given."
    mod = MODULES[prefix]
    setups = [v for v in vars(mod).values() if inspect.isclass(v) and v.__name__.endswith("Setup") and v is not experiment.Setup]
    assert setups, f"{prefix}: no Setup class"
    for cls in setups:
        assert issubclass(cls, experiment.Setup), f"{prefix}: {cls.__name__} does not subclass attribkit.papers.experiment.Setup"
    assert mod.STEPS and mod.FIGURES, f"{prefix}: declare STEPS and FIGURES"
    for fn in mod.STEPS:
        assert inspect.signature(fn).return_annotation in ("Result", experiment.Result), f"{prefix}: step {fn.__name__} does not return a Result"
    for fn in mod.FIGURES:
        assert inspect.signature(fn).return_annotation in ("Figure", "list[Figure]"), f"{prefix}: {fn.__name__} does not return a Figure"
        tree = ast.parse(inspect.getsource(fn).strip())
        params = {a.arg for a in tree.body[0].args.args + tree.body[0].args.kwonlyargs}
        for node in ast.walk(tree):
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AugAssign) else []):
                base = t
                while isinstance(base, (ast.Attribute, ast.Subscript)): base = base.value
                assert not (isinstance(base, ast.Name) and base.id in params and base is not t), \
                    f"{prefix}: {fn.__name__} writes into its argument {base.id} (line {node.lineno})"


def test_repro_markdown_names_only_what_exists():
    "Every name a repro notebook's prose puts in backticks as a parameter (`name` or `name=…`) exists in the notebook's code, its paper's budget knobs or the library; and the prose states no seed count (the budget and `describe()` print them)."
    names = set()
    for p in (ROOT / "attribkit").rglob("*.py"):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Name): names.add(node.id)
            elif isinstance(node, ast.arg): names.add(node.arg)
            elif isinstance(node, ast.Attribute): names.add(node.attr)
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)): names.add(node.name)
            elif isinstance(node, ast.keyword) and node.arg: names.add(node.arg)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier(): names.add(node.value)
    knobs = {k for mod in MODULES.values() for row in mod.BUDGETS.values() for k in row}
    for nb in REPRO:
        cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
        code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        prose = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
        here = names | knobs | set(re.findall(r"[A-Za-z_]\w*", code))
        for name in re.findall(r"`([a-z][a-z0-9]*_[a-z0-9_]*)(?:=[^`]*)?`", prose):
            assert name in here, f"{nb.name}: the prose names `{name}`, which exists nowhere"
        stated = re.findall(r"\b(\d+|two|three|four|five|six|seven|eight|nine|ten) (seeds|models per|teachers)\b", prose, re.I)
        assert not stated, f"{nb.name}: the prose states seed counts {stated}; print them from the budget instead"
