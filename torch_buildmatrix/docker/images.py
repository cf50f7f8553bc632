"""Builder images for the Docker runner: registry-free Debian bases (debootstrap) and content-hashed builder tags."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from torch_buildmatrix.docker import oci
from torch_buildmatrix.docker.arch import Architecture, machine_architecture
from torch_buildmatrix.errors import StepFailed
from torch_buildmatrix.model.matrix import BuildImage
from torch_buildmatrix.util.fingerprint import tree_hash
from torch_buildmatrix.util.paths import inside, name_problem
from torch_buildmatrix.util.process import run_captured, run_logged
from torch_buildmatrix.util.redact import redact, secret_values

log = logging.getLogger(__name__)

IMAGE_LABEL = "org.buildmatrix.image"  # every builder image says which matrix image it is; checked on use
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEBOOTSTRAP_SCRIPTS = Path("/usr/share/debootstrap/scripts")
# Host settings a build inside the image needs too: proxies, and package indexes reachable over the network.
PASSED_ENV = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "UV_INDEX_URL",
    "UV_EXTRA_INDEX_URL",
    "UV_DEFAULT_INDEX",
    "UV_INDEX",
    "PIP_DEFAULT_TIMEOUT",
    "UV_HTTP_TIMEOUT",
)


@dataclass(frozen=True)
class ImagePlan:
    """What to build for one matrix image, and the tag its content hash gives it."""

    image: BuildImage
    dockerfile: Path
    base_reference: str  # buildmatrix-base:<suite> (made here) or the registry reference as given
    build_args: dict[str, str]
    tag: str  # the image cells run in: the layer's when the image has one, else the builder's
    context: Path | None = None  # the project's context for its own dockerfile (None: the package's recipe)
    layer: LayerPlan | None = None
    builder_tag: str = ""  # the builder image under the layer ("" : tag itself)


@dataclass(frozen=True)
class LayerPlan:
    """The project's Dockerfile applied on the builder image (matrix.yaml images.<name>.layer)."""

    dockerfile: Path
    context: Path
    build_args: dict[str, str]


def passed_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The host's proxy and index settings worth passing on; file:// locations do not exist inside a container."""
    return {key: value for key, value in environ.items() if key in PASSED_ENV and value and "file:" not in value}


# The package's own image recipes and the in-container helper: package data, so an installed torch-buildmatrix builds
# images in any project, with no Docker files of the project's own.
DATA_DIR = Path(__file__).resolve().parent / "data"
CELL_HELPER = DATA_DIR / "cell.py"
BASE_REPOSITORY = "buildmatrix-base"  # debootstrapped Debian bases: buildmatrix-base:<suite>
BUILDER_REPOSITORY = "buildmatrix-builder"  # builder images: buildmatrix-builder:<image name>-<content hash>


def base_reference(image: BuildImage) -> str:
    return f"{BASE_REPOSITORY}:{image.suite}" if image.suite else image.base


def plan_image(image: BuildImage, ca_bundle: Path, environ: Mapping[str, str], directory: Path = DATA_DIR) -> ImagePlan:
    """Pure but for reading files: the tag is a hash of the Dockerfile, the base, the Pythons, the CA bundle and the
    passed env. `directory` holds the recipes (the package's own by default)."""
    own = image.dockerfile
    dockerfile = own or directory / ("debian.Dockerfile" if image.suite else "manylinux.Dockerfile")
    base = base_reference(image)
    args = {"BASE": base, "PYTHONS": " ".join(str(v) for v in image.python), **passed_env(environ)}
    context = (image.context or own.parent) if own else None
    if own:
        args.update(image.build_args)
    digest = hashlib.sha256()
    digest.update(dockerfile.read_bytes() if dockerfile.is_file() else b"missing")
    digest.update(ca_bundle.read_bytes() if ca_bundle.is_file() else b"no-ca")
    if context is not None:
        digest.update(tree_hash(context).encode())
    for key, value in sorted(args.items()):
        digest.update(f"\0{key}={value}".encode())
    name = re.sub(r"[^a-z0-9_.-]", "-", image.name.lower())
    tag = f"{BUILDER_REPOSITORY}:{name}-{digest.hexdigest()[:12]}"
    if image.layer is None:
        return ImagePlan(image, dockerfile, base, args, tag, context)
    layer = LayerPlan(image.layer, image.context or image.layer.parent, {"BUILDER": tag, **dict(image.build_args)})
    layered = hashlib.sha256(tag.encode())
    layered.update(layer.dockerfile.read_bytes() if layer.dockerfile.is_file() else b"missing")
    layered.update(tree_hash(layer.context).encode())
    for key, value in sorted(layer.build_args.items()):
        layered.update(f"\0{key}={value}".encode())
    return ImagePlan(
        image, dockerfile, base, args, f"{tag}-{layered.hexdigest()[:12]}", context, layer, builder_tag=tag
    )


def debian_mirror(sources_dir: Path = Path("/etc/apt")) -> str:
    """The Debian mirror this machine's apt uses (sources.list or deb822 .sources), else deb.debian.org."""
    files = [
        sources_dir / "sources.list",
        *sorted((sources_dir / "sources.list.d").glob("*.list")),
        *sorted((sources_dir / "sources.list.d").glob("*.sources")),
    ]
    for file in files:
        try:
            text = file.read_text()
        except OSError:
            continue
        for raw in text.splitlines():
            line = raw.strip()
            match = re.match(r"deb\s+(?:\[[^]]*\]\s+)?(\S+)", line) or re.match(r"URIs:\s*(\S+)", line)
            if match and match.group(1).rstrip("/").endswith("/debian"):
                return match.group(1).rstrip("/")
    return DEFAULT_MIRROR


def debootstrap_command(
    suite: str, rootfs: Path, mirror: str, scripts: Path = DEBOOTSTRAP_SCRIPTS
) -> list[str | os.PathLike[str]]:
    """debootstrap's command line for suite; a suite newer than this debootstrap (Debian 12's knows trixie, not forky)
    is made with sid's script, which every Debian suite since wheezy links to."""
    command: list[str | os.PathLike[str]] = ["debootstrap", "--variant=minbase", suite, rootfs, mirror]
    if not (scripts / suite).exists() and (scripts / "sid").is_file():
        command.append(scripts / "sid")
    return command


class ImageBuilder:
    """Makes each plan's image at most once per process (threads share it); an existing one is reused if it verifies."""

    def __init__(
        self, cache_dir: Path, ca_bundle: Path = HOST_CA_BUNDLE, architecture: Architecture | None = None
    ) -> None:
        """architecture: the platform images are made for (default: this machine's; never another, emulated)."""
        self.cache_dir = cache_dir
        self.ca_bundle = ca_bundle
        self.architecture = architecture or machine_architecture()
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self._forced: set[str] = set()  # tags rebuilt by --force in this run

    def _lock(self, key: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    def ensure(self, plan: ImagePlan, log_file: Path, force: bool = False) -> str:
        """The tag cells run in: the builder image (its base and itself made when the engine lacks them), and the
        project's layer on top of it when the image has one; raises StepFailed('image').

        An existing image is verified by its labels (it must say it is this plan's image); a damaged one, or with
        `force` (once per run), is removed and built again.
        """
        builder = plan.builder_tag or plan.tag
        self._ensure(builder, plan, log_file, force, lambda: self._make_builder(plan, builder, log_file))
        if plan.layer is not None:
            self._ensure(plan.tag, plan, log_file, force, lambda: self._make_layer(plan, log_file))
        return plan.tag

    def _ensure(self, tag: str, plan: ImagePlan, log_file: Path, force: bool, make: Callable[[], None]) -> None:
        with self._lock(tag):
            labels = oci.image_labels(tag)
            rebuild = force and tag not in self._forced
            if force:
                self._forced.add(tag)
            if labels is not None and not rebuild and labels.get(IMAGE_LABEL) == plan.image.name:
                _note(log_file, f"image {tag} exists; not rebuilt")
                return
            if labels is not None:
                why = "--force" if rebuild else f"its labels do not name image '{plan.image.name}' ({labels})"
                _note(log_file, f"removing image {tag} ({why}); building it again")
                oci.remove_image(tag)
            started = time.monotonic()
            make()
            _note(log_file, f"built {tag} in {time.monotonic() - started:.0f} s")

    def _build(
        self, plan: ImagePlan, context: Path, dockerfile: Path, *, tag: str, args: dict[str, str], log: Path
    ) -> None:
        if not dockerfile.is_file():
            raise StepFailed("image", f"{dockerfile} does not exist")
        try:
            oci.build_image(
                context,
                dockerfile,
                tag,
                args,
                step="image",
                log_file=log,
                platform=self.architecture.platform,
                labels={IMAGE_LABEL: plan.image.name, "org.buildmatrix.base": plan.image.base},
            )
        except StepFailed as exc:
            raise StepFailed(
                "image",
                f"building image '{plan.image.name}' (base {plan.image.base}) from {dockerfile.name} failed: "
                f"{_last_error(exc.log_tail)}",
                exc.log_tail,
            ) from None

    def _make_builder(self, plan: ImagePlan, tag: str, log_file: Path) -> None:
        if plan.image.suite:
            self._debootstrap_base(plan.image.suite, plan.base_reference, log_file)
        if plan.context is not None:  # the project's own recipe, in its own context
            self._build(plan, plan.context, plan.dockerfile, tag=tag, args=plan.build_args, log=log_file)
            return
        context = self.cache_dir / "image-context" / tag.replace(":", "-")
        if context.exists():
            shutil.rmtree(context)
        context.mkdir(parents=True)
        shutil.copy2(self.ca_bundle, context / "ca-certificates.crt")
        try:
            self._build(plan, context, plan.dockerfile, tag=tag, args=plan.build_args, log=log_file)
        finally:
            shutil.rmtree(context, ignore_errors=True)

    def _make_layer(self, plan: ImagePlan, log_file: Path) -> None:
        assert plan.layer is not None
        layer = plan.layer
        self._build(plan, layer.context, layer.dockerfile, tag=plan.tag, args=layer.build_args, log=log_file)

    def _debootstrap_base(self, suite: str, reference: str, log_file: Path) -> None:
        try:  # matrix.yaml refuses such a suite already; this directory is deleted below, so check again here
            problem = name_problem(suite)
            if problem:
                raise ValueError(f"{suite!r} {problem}")
            rootfs = inside(self.cache_dir / "debootstrap", suite)
        except ValueError as exc:
            raise StepFailed("image", f"debootstrap suite {exc}: it would lead outside {self.cache_dir}") from None
        with self._lock(reference):
            if oci.image_exists(reference):
                return
            if shutil.which("debootstrap") is None:
                raise StepFailed(
                    "image",
                    f"making {reference} needs debootstrap; run `torch-buildmatrix engine` "
                    "(or `apt-get install -y debootstrap`) as root",
                )
            if os.geteuid() != 0:
                raise StepFailed(
                    "image",
                    f"debootstrap of {suite} needs root; run the build as root or `docker import` a {suite} rootfs "
                    f"as {reference}",
                )
            if rootfs.exists():
                shutil.rmtree(rootfs)  # left by an interrupted run
            rootfs.parent.mkdir(parents=True, exist_ok=True)
            mirror = debian_mirror()
            started = time.monotonic()
            try:
                run_logged("image", debootstrap_command(suite, rootfs, mirror), log_file, timeout=1800)
                oci.import_rootfs(rootfs, reference, "image", log_file, platform=self.architecture.platform)
            except StepFailed as exc:
                raise StepFailed(
                    "image",
                    redact(f"debootstrap of '{suite}' from {mirror} failed: {_last_error(exc.log_tail)}"),
                    exc.log_tail,
                ) from None
            finally:
                run_captured(["rm", "-rf", "--one-file-system", rootfs], step="image", timeout=600)
            _note(log_file, f"made {reference} with debootstrap from {mirror} in {time.monotonic() - started:.0f} s")


def _note(log_file: Path, text: str) -> None:
    text = redact(text, secret_values(os.environ))  # a mirror URL may carry credentials; logs are published
    log.info("%s", text)
    with log_file.open("a") as handle:
        handle.write(f"# {text}\n")


def _last_error(tail: str) -> str:
    """The line that says what went wrong: an 'error...'/'E:' line first (docker echoes whole RUN commands, which may
    contain 'error:' themselves), then any line mentioning 'error:', else the last line."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line).strip() for line in tail.splitlines()]
    lines = [line for line in lines if line]
    for line in reversed(lines):
        if line.lower().startswith(("error", "e:")):
            return line
    for line in reversed(lines):
        if "error:" in line.lower() and not line.startswith(("The command", "Step ")):
            return line
    return lines[-1] if lines else "no output"
