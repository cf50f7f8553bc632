"""Runs inside a builder container, one command per step of the Docker runner: a build's environment and its wheel
(built, then repaired), an SDK's wheel, a cell's clean environment and its smoke suite; stdlib only, Python 3.9+.

Package data of buildmatrix (buildmatrix/docker/data/), mounted read-only at /buildmatrix/cell.py by the Docker runner;
results go to the host through /out. It runs on the image's Pythons (3.9 and later), hence os.path rather than pathlib
idioms that need newer releases.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

TORCH_FACTS = (
    "import json, sys, torch; print(json.dumps({'version': torch.__version__, "
    "'cuda': torch.version.cuda, 'cxx11_abi': bool(torch._C._GLIBCXX_USE_CXX11_ABI), "
    "'python': '%d.%d.%d' % sys.version_info[:3]}))"
)


def run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    print("+ " + " ".join(command), flush=True)
    return subprocess.run(command, check=True, text=True, **kwargs)  # type: ignore[call-overload, no-any-return]


def defined_symbols(libraries: list[str]) -> list[str]:
    names: set[str] = set()
    for library in libraries:
        out = subprocess.run(["nm", "-D", "--defined-only", library], capture_output=True, text=True, check=False)
        for line in out.stdout.splitlines():
            fields = line.split()
            if len(fields) >= 2:
                names.add(fields[-1].split("@", 1)[0])
    return sorted(names)


def make_env(python: str, env: str, constraints: str, requirements: list[str]) -> str:
    """A fresh venv of `python` at `env` holding requirements, kept to constraints; returns the venv's interpreter."""
    if os.path.exists(env):
        shutil.rmtree(env)
    if shutil.which("uv"):
        run(["uv", "venv", "--quiet", "--python", python, env])
        inside = os.path.join(env, "bin", "python")
        run(["uv", "pip", "install", "--python", inside, "--constraint", constraints, *requirements])
    else:
        run([python, "-m", "venv", env])
        inside = os.path.join(env, "bin", "python")
        run([inside, "-m", "pip", "install", "--constraint", constraints, *requirements])
    return inside


def build_env(args: argparse.Namespace) -> None:
    """The build's environment (a venv of the build's interpreter: its torch, SDK wheel and build tools); then what
    the host checks the wheel against: torch's facts and the symbols torch's and the SDK's libraries define."""
    python = make_env(args.python, args.env, args.constraints, args.requirements)
    os.makedirs(args.out, exist_ok=True)
    facts = subprocess.run([python, "-c", TORCH_FACTS], check=True, capture_output=True, text=True).stdout.strip()
    with open(os.path.join(args.out, "torch-facts.json"), "w") as handle:
        handle.write(facts.splitlines()[-1] + "\n")
    # The libraries the plugin may link against: torch's and a wheel SDK's (found where they are installed).
    found = subprocess.run(
        [python, "-c", "import os, torch; print(os.path.dirname(torch.__file__))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    libraries = [p for p in glob.glob(os.path.join(found, "lib", "*.so*")) if os.path.isfile(p)]
    site = os.path.dirname(found)
    if args.sdk_package:
        libraries += [
            p
            for p in glob.glob(os.path.join(site, args.sdk_package, "**", "*.so*"), recursive=True)
            if os.path.isfile(p)
        ]
    for directory in args.library_dir:  # a system SDK's, where its image installed it
        libraries += [p for p in glob.glob(os.path.join(directory, "*.so*")) if os.path.isfile(p)]
    with open(os.path.join(args.out, "provided-symbols.txt"), "w") as handle:
        handle.write("\n".join(defined_symbols(libraries)) + "\n")
    print(
        f"torch {json.loads(facts.splitlines()[-1])['version']}; {len(libraries)} libraries' symbols in {args.out}",
        flush=True,
    )


def wheel(args: argparse.Namespace) -> None:
    """Run by the build environment's interpreter: the project's wheel built without isolation (the environment holds
    torch and the build tools), then auditwheel repair, leaving torch's and the SDK's libraries to the installed
    packages. The environment's scripts (ninja) come first on PATH, as they would in the activated venv."""
    bin_dir = os.path.dirname(sys.executable)
    os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
    raw = tempfile.mkdtemp(prefix="wheel-")
    if shutil.which("uv"):
        run(["uv", "build", "--wheel", "--no-build-isolation", "--python", sys.executable, "--out-dir", raw, "."])
    else:
        run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--wheel-dir", raw, "."])
    os.makedirs(args.dest_dir, exist_ok=True)
    built = glob.glob(os.path.join(raw, "*.whl"))
    if len(built) != 1:
        raise SystemExit(f"error: expected one wheel from the build, found {built}")
    if built[0].endswith("-any.whl"):
        shutil.copy2(built[0], args.dest_dir)  # pure Python: nothing to repair, and auditwheel refuses it
        return
    command = ["auditwheel", "repair", "--wheel-dir", args.dest_dir]
    for pattern in args.exclude:
        command += ["--exclude", pattern]
    run([*command, built[0]])
    for repaired in glob.glob(os.path.join(args.dest_dir, "*.whl")):
        subprocess.run(["auditwheel", "show", repaired], check=False)


def sdk_wheel(args: argparse.Namespace) -> None:
    """A wheel SDK's wheel built with this image's compiler and libstdc++ (the host's may be newer than the image's),
    then, when it carries a native library, repaired so its platform tag names the glibc it needs."""
    raw = tempfile.mkdtemp(prefix="sdk-")
    if shutil.which("uv"):
        run(["uv", "build", "--python", sys.executable, "--wheel", "--out-dir", raw, args.source])
    else:
        run([sys.executable, "-m", "build", "--wheel", "--outdir", raw, args.source])
    os.makedirs(args.dest_dir, exist_ok=True)
    for wheel in glob.glob(os.path.join(raw, "*.whl")):
        if wheel.endswith("-any.whl"):
            shutil.copy2(wheel, args.dest_dir)  # pure Python: nothing to repair, and auditwheel refuses it
        else:
            run(["auditwheel", "repair", "--wheel-dir", args.dest_dir, wheel])


def smoke_env(args: argparse.Namespace) -> None:
    """A cell's clean environment: a venv of the cell's interpreter (its image's /opt/python/cpXY-cpXY[t]) holding its
    torch, its build's wheels and the smoke requirements, kept to the cell's constraints; nothing else."""
    make_env(args.python, args.env, args.constraints, args.requirements)


def smoke(args: argparse.Namespace) -> None:
    """Runs the smoke suite and records its exit code; never fails, so the host reads the counts and decides."""
    os.makedirs(os.path.dirname(args.exit_code), exist_ok=True)
    command = [sys.executable, *args.pytest]
    print("+ " + " ".join(command), flush=True)
    code = subprocess.run(command, check=False).returncode
    with open(args.exit_code, "w") as handle:
        handle.write(f"{code}\n")


def main() -> None:
    parser = argparse.ArgumentParser(prog="cell.py")
    sub = parser.add_subparsers(dest="command", required=True)
    env = sub.add_parser("build-env")
    env.add_argument("--python", required=True, help="the build's interpreter in this image")
    env.add_argument("--env", required=True, help="where the environment is made")
    env.add_argument("--constraints", required=True)
    env.add_argument("--out", required=True)
    env.add_argument("--sdk-package", default="", help="a wheel SDK's package: its libraries count as provided")
    env.add_argument(
        "--library-dir", action="append", default=[], help="a system SDK's library directory: counts as provided"
    )
    env.add_argument("requirements", nargs="+")
    make = sub.add_parser("wheel")
    make.add_argument("dest_dir")
    make.add_argument("--exclude", action="append", default=[])
    build = sub.add_parser("sdk-wheel")
    build.add_argument("source")
    build.add_argument("dest_dir")
    cell_env = sub.add_parser("smoke-env")
    cell_env.add_argument("--python", required=True, help="the cell's interpreter in this image")
    cell_env.add_argument("--env", required=True, help="where the environment is made")
    cell_env.add_argument("--constraints", required=True)
    cell_env.add_argument("requirements", nargs="+")
    test = sub.add_parser("smoke")
    test.add_argument("--exit-code", required=True)
    test.add_argument("pytest", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    if args.command == "smoke" and args.pytest[:1] == ["--"]:
        args.pytest = args.pytest[1:]
    commands = {
        "build-env": build_env,
        "wheel": wheel,
        "sdk-wheel": sdk_wheel,
        "smoke-env": smoke_env,
        "smoke": smoke,
    }
    commands[args.command](args)


if __name__ == "__main__":
    main()
