"The exported library stands alone: build a wheel, install it into a fresh venv, import every module."
import os, subprocess, sys, sysconfig, venv
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]


def exported_modules():
    from attribkit._modidx import d
    return sorted(d["syms"])


def test_wheel_installs_and_imports_without_notebooks(tmp_path):
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(ROOT)],
                   check=True, capture_output=True)
    wheel, = wheels.glob("attribkit-*.whl")
    env_dir = tmp_path / "fresh"
    venv.create(env_dir, with_pip=False)
    py = env_dir / "bin" / "python"
    site = Path(subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    # the fresh venv sees torch & co. (not attribkit) through a path entry; the wheel goes into its own site-packages
    (site / "_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
                   check=True, capture_output=True)
    mods = exported_modules()
    code = ("import importlib, attribkit, pathlib; "
            f"assert pathlib.Path(attribkit.__file__).is_relative_to({str(site)!r}), attribkit.__file__; "
            f"[importlib.import_module(m) for m in {mods!r}]; print('ok', len({mods!r}))")
    workdir = tmp_path / "elsewhere"; workdir.mkdir()
    out = subprocess.run([py, "-c", code], cwd=workdir, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert not (site / "nbs").exists()
    assert out.stdout.startswith("ok")
    # the repro notebooks ship inside the package: list them, copy them, run one from a folder outside the repository
    cli = [py, "-c", "import sys; from attribkit.reproduce import main; sys.exit(main())"]
    listed = subprocess.run(cli + ["--list"], cwd=workdir, capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    assert "mask_table2_mia" in listed.stdout and "    data_root = None" in listed.stdout
    copied = subprocess.run(cli + ["--copy-notebooks", "mine"], cwd=workdir, capture_output=True, text=True)
    assert copied.returncode == 0, copied.stderr
    assert len(list((workdir / "mine").glob("*.ipynb"))) == len(list((ROOT / "nbs" / "repro").glob("*.ipynb"))) >= 24
    run = subprocess.run(cli + ["--scale", "smoke", "--only", "dga_fig9_grid", "--out", "out", "--device", "cpu"],
                         cwd=workdir, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert run.returncode == 0, run.stdout + run.stderr
    assert (workdir / "out" / "dga_fig9_grid.json").exists() and (workdir / "out" / "figures" / "dga_fig9_grid.png").exists()
