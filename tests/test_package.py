"""The exported library stands alone: the wheel declares what its code imports, and installed the way the README says
(the torch pin, then the wheel, with its dependencies resolved by pip) into a fresh venv that sees nothing else, it
imports every module and `attribkit-reproduce` lists, copies and runs the notebooks from a folder outside the repository."""
import email, os, re, shlex, shutil, subprocess, sys, time, venv, zipfile
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
# what attribkit-reproduce and the report import: the wheel must install them (settings.ini `requirements`)
RUNTIME = ["papermill", "ipykernel", "nbclient", "nbconvert"]


def exported_modules():
    from attribkit._modidx import d
    return sorted(d["syms"])


def readme_torch_pin() -> list[str]:
    "The requirements of the README's `pip install torch==… torchvision==…` line (and the README has the wheel line)."
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    pins = re.findall(r"^pip install (torch==\S+ torchvision==\S+)", text, re.M)
    assert len(pins) == 1, f"README.md should have one line `pip install torch==… torchvision==…`, found {pins}"
    build = re.findall(r"^(pip wheel --no-deps -w dist \.) && pip install dist/attribkit-\*\.whl", text, re.M)
    assert len(build) == 1, "README.md should build and install the wheel with `pip wheel --no-deps -w dist . && pip install dist/attribkit-*.whl`"
    return shlex.split(pins[0])


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    "The wheel `pip wheel --no-deps -w dist .` builds (here with the dev environment's setuptools: no download)."
    out = tmp_path_factory.mktemp("wheels")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out), str(ROOT)],
                   check=True, capture_output=True)
    whl, = out.glob("attribkit-*.whl")
    return whl


def test_wheel_declares_what_it_imports_and_ships_the_notebooks(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta_name, = [n for n in names if n.endswith(".dist-info/METADATA")]
        meta = email.message_from_bytes(z.read(meta_name))
        entry = z.read(meta_name.replace("METADATA", "entry_points.txt")).decode()
    required = {re.split(r"[\s;<>=!~\[(]", r, maxsplit=1)[0].lower() for r in meta.get_all("Requires-Dist")
                if "extra ==" not in r}
    assert set(RUNTIME) <= required, f"the wheel does not require {sorted(set(RUNTIME) - required)}; it requires {sorted(required)}"
    assert "attribkit-reproduce = attribkit.reproduce:main" in entry
    shipped = [n for n in names if n.startswith("attribkit/repro/") and n.endswith(".ipynb")]
    assert len(shipped) == len(list((ROOT / "nbs" / "repro").glob("*.ipynb"))) >= 24
    assert not [n for n in names if n.startswith("nbs/")]


def clean_env(env_dir: Path) -> dict:
    "The environment of a user with only the fresh venv: no PYTHONPATH or user site into the dev checkout, its bin/ first."
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")}
    return {**env, "PATH": f"{env_dir / 'bin'}{os.pathsep}{env.get('PATH', '')}", "VIRTUAL_ENV": str(env_dir),
            "PYTHONNOUSERSITE": "1", "OMP_NUM_THREADS": "1"}


@pytest.mark.slow
def test_wheel_in_a_fresh_venv_runs_attribkit_reproduce(wheel, tmp_path, request):
    "About 2 minutes, most of it pip installing torch into the venv (pip's own cache is used; the venv is removed after)."
    t0 = time.perf_counter()
    torch_pin = readme_torch_pin()
    env_dir = tmp_path / "fresh"
    request.addfinalizer(lambda: shutil.rmtree(env_dir, ignore_errors=True))   # gigabytes of torch: not kept in tmp
    venv.create(env_dir, with_pip=True)
    py, env = env_dir / "bin" / "python", clean_env(env_dir)
    def pip(*args):   # the venv's own pip, with this machine's pip configuration (index, find-links)
        r = subprocess.run([py, "-m", "pip", "install", "-q", *args], capture_output=True, text=True, env=env)
        assert r.returncode == 0, f"pip install {' '.join(map(str, args))} failed:\n{r.stdout}\n{r.stderr}"
    pip(*torch_pin)            # the README: the torch pin first, then the wheel with its dependencies
    pip(str(wheel))
    print(f"fresh venv with torch and the wheel installed in {time.perf_counter() - t0:.0f} s")
    workdir = tmp_path / "elsewhere"; workdir.mkdir()
    def run(*cmd, **kw):
        return subprocess.run([str(c) for c in cmd], cwd=workdir, capture_output=True, text=True, env=env, **kw)
    site = run(py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    mods = exported_modules()
    code = ("import importlib, attribkit, pathlib, torch; "
            f"assert pathlib.Path(attribkit.__file__).is_relative_to({site!r}), attribkit.__file__; "
            f"[importlib.import_module(m) for m in {mods!r}]; "
            "m = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 3)); x = torch.randn(2, 1, 4, 4); "
            "a = attribkit.attribute(m, x, target=[0, 2], method='ig', n_steps=8); assert a.shape == x.shape; "
            f"print('ok', len({mods!r}))")
    out = run(py, "-c", code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok")
    assert not (Path(site) / "nbs").exists()
    cli = env_dir / "bin" / "attribkit-reproduce"   # the installed console script
    listed = run(cli, "--list")
    assert listed.returncode == 0, listed.stderr
    assert "mask_table2_mia" in listed.stdout and "    data_root: Optional[str] = None" in listed.stdout
    copied = run(cli, "--copy-notebooks", "mine")
    assert copied.returncode == 0, copied.stderr
    assert len(list((workdir / "mine").glob("*.ipynb"))) == len(list((ROOT / "nbs" / "repro").glob("*.ipynb"))) >= 24
    smoke = run(cli, "--scale", "smoke", "--only", "merging_lenet", "--out", "out", "--device", "cpu")
    assert smoke.returncode == 0, smoke.stdout + smoke.stderr
    assert "1 notebooks, 0 failed" in smoke.stdout, smoke.stdout
    assert (workdir / "out" / "merging_lenet.json").exists() and (workdir / "out" / "figures" / "merging_lenet.png").exists()
    assert (workdir / "out" / "html" / "merging_lenet.html").exists()       # the report converted the executed notebook
    # the kernel papermill started was this venv's: its `python3` kernelspec lies in the venv and runs `python`, which
    # jupyter_client replaces by the venv's own interpreter (not a kernelspec of another environment)
    kernel = run(py, "-c", "from jupyter_client.kernelspec import KernelSpecManager as K; s = K().get_kernel_spec('python3'); "
                           "print(s.resource_dir); print(s.argv[0])")
    assert kernel.returncode == 0, kernel.stderr
    spec_dir, exe = kernel.stdout.split("\n")[:2]
    assert Path(spec_dir).is_relative_to(env_dir) and exe in ("python", str(py)), kernel.stdout
    # installed without papermill (as with --no-deps): one line and exit 2, not a traceback
    pip_rm = subprocess.run([py, "-m", "pip", "uninstall", "-q", "-y", "papermill"], capture_output=True, text=True, env=env)
    assert pip_rm.returncode == 0, pip_rm.stderr
    missing = run(cli, "--list")
    assert missing.returncode == 2 and "Traceback" not in missing.stderr, missing.stderr
    assert missing.stderr.strip() == "attribkit-reproduce needs papermill and ipykernel: pip install papermill ipykernel"
    print(f"test took {time.perf_counter() - t0:.0f} s")
