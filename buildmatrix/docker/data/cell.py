"""Runs inside a builder container for cibuildwheel's hooks (before_build, repair), to build an SDK's wheel, and to
make a cell's clean environment and run its smoke suite there; stdlib only, Python 3.9+.

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


def install(requirements: list[str]) -> None:
    """Into the interpreter running this script (the cell's /opt/python/cpXY-cpXY), with uv when the image has it."""
    if shutil.which("uv"):
        run(["uv", "pip", "install", "--python", sys.executable, *requirements])
    else:
        run([sys.executable, "-m", "pip", "install", *requirements])


def defined_symbols(libraries: list[str]) -> list[str]:
    names: set[str] = set()
    for library in libraries:
        out = subprocess.run(["nm", "-D", "--defined-only", library], capture_output=True, text=True, check=False)
        for line in out.stdout.splitlines():
            fields = line.split()
            if len(fields) >= 2:
                names.add(fields[-1].split("@", 1)[0])
    return sorted(names)


def before_build(args: argparse.Namespace) -> None:
    """The build environment: the cell's torch, SDK wheel and build tools; then what the host checks against."""
    install(args.requirements)
    os.makedirs(args.out, exist_ok=True)
    facts = subprocess.run(
        [sys.executable, "-c", TORCH_FACTS], check=True, capture_output=True, text=True
    ).stdout.strip()
    with open(os.path.join(args.out, "torch-facts.json"), "w") as handle:
        handle.write(facts.splitlines()[-1] + "\n")
    # The libraries the plugin may link against: torch's and a wheel SDK's (found where they are installed).
    found = subprocess.run(
        [sys.executable, "-c", "import os, torch; print(os.path.dirname(torch.__file__))"],
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


def repair(args: argparse.Namespace) -> None:
    """auditwheel repair, leaving torch's and the SDK's libraries to the installed packages."""
    command = ["auditwheel", "repair", "--wheel-dir", args.dest_dir]
    for pattern in args.exclude:
        command += ["--exclude", pattern]
    run([*command, args.wheel])
    for wheel in glob.glob(os.path.join(args.dest_dir, "*.whl")):
        subprocess.run(["auditwheel", "show", wheel], check=False)


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
    if os.path.exists(args.env):
        shutil.rmtree(args.env)
    if shutil.which("uv"):
        run(["uv", "venv", "--quiet", "--python", args.python, args.env])
        python = os.path.join(args.env, "bin", "python")
        run(["uv", "pip", "install", "--python", python, "--constraint", args.constraints, *args.requirements])
    else:
        run([args.python, "-m", "venv", args.env])
        python = os.path.join(args.env, "bin", "python")
        run([python, "-m", "pip", "install", "--constraint", args.constraints, *args.requirements])


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
    before = sub.add_parser("before-build")
    before.add_argument("--out", required=True)
    before.add_argument("--sdk-package", default="", help="a wheel SDK's package: its libraries count as provided")
    before.add_argument(
        "--library-dir", action="append", default=[], help="a system SDK's library directory: counts as provided"
    )
    before.add_argument("requirements", nargs="+")
    fix = sub.add_parser("repair")
    fix.add_argument("wheel")
    fix.add_argument("dest_dir")
    fix.add_argument("--exclude", action="append", default=[])
    build = sub.add_parser("sdk-wheel")
    build.add_argument("source")
    build.add_argument("dest_dir")
    env = sub.add_parser("smoke-env")
    env.add_argument("--python", required=True, help="the cell's interpreter in this image")
    env.add_argument("--env", required=True, help="where the environment is made")
    env.add_argument("--constraints", required=True)
    env.add_argument("requirements", nargs="+")
    test = sub.add_parser("smoke")
    test.add_argument("--exit-code", required=True)
    test.add_argument("pytest", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    if args.command == "smoke" and args.pytest[:1] == ["--"]:
        args.pytest = args.pytest[1:]
    commands = {
        "before-build": before_build,
        "repair": repair,
        "sdk-wheel": sdk_wheel,
        "smoke-env": smoke_env,
        "smoke": smoke,
    }
    commands[args.command](args)


if __name__ == "__main__":
    main()
