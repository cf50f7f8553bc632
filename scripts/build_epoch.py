"""Check or confirm the build epoch (torch_buildmatrix/builder/epoch.py) against the build code of every runner.

    python scripts/build_epoch.py --check     the lint check (`nox -s lint`): fails while the build code's hash
                                              differs from the one confirmed for the epoch, saying what to do
    python scripts/build_epoch.py             re-confirm: the change does not alter builds (`nox -s build-epoch`)
    python scripts/build_epoch.py --bump      bump: the change alters what builds make (`nox -s build-epoch -- --bump`)

The hash is of the code, not the text (buildcode.code_hash): reformatting, comments and docstrings leave it alone."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from torch_buildmatrix.builder import epoch  # noqa: E402
from torch_buildmatrix.builder.buildcode import ENGINE_MODULES  # noqa: E402
from torch_buildmatrix.builder.runners.docker import DockerRunner  # noqa: E402
from torch_buildmatrix.builder.runners.local import LocalRunner  # noqa: E402

PACKAGE_DIR = REPO / "torch_buildmatrix"
ROOTS = (*ENGINE_MODULES, *LocalRunner.build_modules, *DockerRunner.build_modules)  # every runner's build code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="fail when the build code is not the confirmed one")
    mode.add_argument("--bump", action="store_true", help="start a new epoch: every build and cell is rebuilt")
    args = parser.parse_args()
    current = epoch.build_code_hash(ROOTS, PACKAGE_DIR)
    if args.check:
        problem = epoch.confirm_problem(current)
        print(problem or f"build epoch {epoch.BUILD_EPOCH}: the build code is the confirmed one ({current})")
        return 1 if problem else 0
    now = epoch.confirm(current, bump=args.bump, package_dir=PACKAGE_DIR)
    what = "bumped to" if args.bump else "re-confirmed"
    print(
        f"build epoch {what} {now} for build code {current}: commit torch_buildmatrix/{epoch.EPOCH_FILE} with the "
        "change"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
