"""The adopters' guide's concrete claims (commands, files, wheel names, output) held against a real run of its worked
example: each sits in a marked block, `<!-- checked: NAME -->` ... `<!-- /checked -->`, and CHECKS says how the run
must bear it out. tests/integration/test_third_party.py makes the run; tests/unit/test_guide_claims.py keeps every
block known to CHECKS and every check's block in the guide."""

from __future__ import annotations

import re
import shlex
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

GUIDE = Path(__file__).parents[1] / "docs" / "guide" / "use-buildmatrix.md"

OPEN = re.compile(r"^\s*<!-- checked: ([a-z0-9-]+) -->$")
CLOSE = "<!-- /checked -->"
MARK = re.compile(r"<!--\s*/?\s*checked\b")
FENCE = re.compile(r"^```[a-z]*\n(.*?)^```$", re.M | re.S)

# Where the guide writes a value the run chooses, in `angle brackets`: the site's address and the run's ids.
SITE = "https://example.invalid/scatter"


class GuideError(ValueError):
    """The guide's marks are malformed: a block unclosed, nested, repeated or a mark not on a line of its own."""


@dataclass(frozen=True)
class Claim:
    name: str
    line: int  # of its opening mark, 1-based
    text: str  # between the marks

    def code(self) -> str:
        """The fenced code block the claim holds (exactly one)."""
        blocks = FENCE.findall(self.text)
        if len(blocks) != 1:
            raise GuideError(
                f"{GUIDE.name}:{self.line}: checked block {self.name!r} holds {len(blocks)} code blocks, not 1"
            )
        return str(blocks[0])

    def code_lines(self) -> list[str]:
        """The code block's lines, less blank lines, comment lines and `  # comments` after a value."""
        lines = []
        for line in self.code().splitlines():
            kept = re.sub(r"\s+#\s.*$", "", line).rstrip()
            if kept and not kept.lstrip().startswith("#"):
                lines.append(kept)
        return lines


def claims(text: str) -> dict[str, Claim]:
    """Every marked block of a guide, by name."""
    found: dict[str, Claim] = {}
    current: tuple[str, int, list[str]] | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        opening = OPEN.match(line)
        if opening:
            if current is not None:
                raise GuideError(f"{GUIDE.name}:{number}: block {opening[1]!r} opens inside block {current[0]!r}")
            if opening[1] in found:
                raise GuideError(f"{GUIDE.name}:{number}: block {opening[1]!r} is marked twice")
            current = (opening[1], number, [])
        elif line.strip() == CLOSE:
            if current is None:
                raise GuideError(f"{GUIDE.name}:{number}: {CLOSE} closes no block")
            name, start, body = current
            found[name] = Claim(name, start, textwrap.dedent("\n".join(body)) + "\n")
            current = None
        elif MARK.search(line):
            raise GuideError(f"{GUIDE.name}:{number}: a checked mark must be a line of its own: {line.strip()!r}")
        elif current is not None:
            current[2].append(line)
    if current is not None:
        raise GuideError(f"{GUIDE.name}:{current[1]}: block {current[0]!r} is never closed")
    return found


@dataclass
class Run:
    """What the worked example's run used and produced."""

    project: Path  # holds matrix.yaml, the sdist, wheels/ and docs/ after the run
    cell: str  # the cell's id
    build: str  # its build's id
    stdout: str  # of `torch-buildmatrix build`
    metadata: str  # the wheel's METADATA
    built_files: list[str]  # under wheels/ after `torch-buildmatrix build`, relative to the project
    used: dict[str, str] = field(default_factory=dict)  # block name -> the text the run took from it


def used(claim: Claim, run: Run) -> list[str]:
    """A block the run took its input from (the download, the matrix, the build command): it ran what it says."""
    if run.used.get(claim.name) != claim.code():
        return [f"the run did not use block {claim.name!r} as the guide gives it"]
    return []


def in_order(claim: Claim, produced: str, what: str) -> list[str]:
    """Each of the block's lines is a line of what was produced, in the block's order (an excerpt)."""
    lines = produced.splitlines()
    at = 0
    for wanted in claim.code().splitlines():
        try:
            at = lines.index(wanted, at) + 1
        except ValueError:
            return [f"{claim.name}: {wanted!r} is not (in this order) in {what}"]
    return []


def progress(claim: Claim, run: Run) -> list[str]:
    return in_order(claim, run.stdout, "what `torch-buildmatrix build` printed")


def metadata(claim: Claim, run: Run) -> list[str]:
    return in_order(claim, run.metadata, "the wheel's METADATA")


def files(claim: Claim, run: Run) -> list[str]:
    """The block lists every file `torch-buildmatrix build` left under wheels/, no more."""
    made = sorted(run.built_files)
    said = sorted(claim.code_lines())
    if made != said:
        return [f"{claim.name}: the guide lists {said}, the run left {made}"]
    return []


def layout(claim: Claim, run: Run) -> list[str]:
    """Every path the block names (`wheels/...` with <placeholders>) is where the run put that file or folder."""
    values = {"<minor>": "2.13", "<cell id>": run.cell, "<build id>": run.build}
    paths = re.findall(r"`(wheels/[^`]*)`", claim.text)
    if not paths:
        return [f"{claim.name}: names no wheels/ path"]
    problems = []
    for path in paths:
        real = path
        for placeholder, value in values.items():
            real = real.replace(placeholder, value)
        if "<" in real or not (run.project / real).exists():
            problems.append(f"{claim.name}: the run left nothing at `{path}` ({real})")
    return problems


def install(claim: Claim, run: Run) -> list[str]:
    """The block's commands are the install commands docs/compatibility.md gives, no more, with <site> the site."""
    page = (run.project / "docs" / "compatibility.md").read_text()
    given = sorted(line for line in page.splitlines() if re.match(r"(uv )?pip install ", line))
    said = sorted(line.replace("<site>", SITE) for line in claim.code_lines())
    if given != said:
        return [f"{claim.name}: the guide gives {said}, compatibility.md gives {given}"]
    return []


Check = Callable[[Claim, Run], list[str]]

CHECKS: dict[str, Check] = {
    "scatter-download": used,
    "scatter-matrix": used,
    "scatter-build": used,
    "scatter-progress": progress,
    "scatter-files": files,
    "scatter-metadata": metadata,
    "scatter-install": install,
    "layout": layout,
}


def check(text: str, run: Run) -> list[str]:
    """What the guide says that the run does not bear out (empty when it all holds)."""
    found = claims(text)
    problems = [
        f"block {name!r} is marked in the guide but nothing checks it" for name in sorted(set(found) - set(CHECKS))
    ]
    problems += [f"check {name!r} has no block in the guide" for name in sorted(set(CHECKS) - set(found))]
    for name, claim in found.items():
        if name in CHECKS:
            problems += CHECKS[name](claim, run)
    return problems


def command(claim: Claim, program: str) -> tuple[dict[str, str], list[str]]:
    """The variables and arguments of the block's one `[VAR=value ...] program ...` line (what the test runs)."""
    found = []
    for line in claim.code_lines():
        words = shlex.split(line)
        assigned = {}
        while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
            name, _, value = words.pop(0).partition("=")
            assigned[name] = value
        if words and words[0] == program:
            found.append((assigned, words[1:]))
    if len(found) != 1:
        raise GuideError(f"{GUIDE.name}:{claim.line}: block {claim.name!r} has {len(found)} `{program}` lines, not 1")
    return found[0]
