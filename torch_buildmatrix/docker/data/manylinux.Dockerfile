# Builder image from a registry manylinux base (e.g. quay.io/pypa/manylinux_2_28_x86_64): it already has /opt/python/*
# and auditwheel; add the host's CA bundle and uv.
ARG BASE
FROM ${BASE}
ARG PYTHONS
ARG PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_DEFAULT_TIMEOUT UV_INDEX_URL UV_EXTRA_INDEX_URL UV_DEFAULT_INDEX UV_INDEX UV_HTTP_TIMEOUT

COPY ca-certificates.crt /usr/local/share/buildmatrix/ca-certificates.crt
ENV SSL_CERT_FILE=/usr/local/share/buildmatrix/ca-certificates.crt \
    PIP_CERT=/usr/local/share/buildmatrix/ca-certificates.crt \
    REQUESTS_CA_BUNDLE=/usr/local/share/buildmatrix/ca-certificates.crt \
    UV_NATIVE_TLS=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore

RUN set -e; \
    for v in $PYTHONS; do \
      tag="cp$(echo "$v" | tr -d .)"; \
      test -x "/opt/python/$tag-$tag/bin/python" || { echo "error: the base has no /opt/python/$tag-$tag for Python $v" >&2; exit 1; }; \
      "/opt/python/$tag-$tag/bin/pip" install -q --no-cache-dir build virtualenv; \
    done; \
    command -v uv >/dev/null || /opt/python/cp312-cp312/bin/pip install -q --no-cache-dir uv
