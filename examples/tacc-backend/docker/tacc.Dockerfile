# The tacc toolkit on top of torch-buildmatrix's builder image: built from sdk/ into a Debian package with dpkg-deb, then
# installed with dpkg, as a user installs a vendor's toolkit. torch-buildmatrix passes BUILDER (the builder image made for
# this image's base and Pythons) and SDK_VERSION (the toolkit version matrix.yaml says this image provides).
ARG BUILDER
FROM ${BUILDER}
ARG SDK_VERSION
COPY sdk /tmp/tacc-sdk
RUN set -e; \
    test -n "$SDK_VERSION" || { echo "error: SDK_VERSION is not set: name this image in sdk.versions" >&2; exit 1; }; \
    /tmp/tacc-sdk/build-deb.sh "$SDK_VERSION" /tmp/tacc-debs; \
    dpkg -i /tmp/tacc-debs/tacc-toolkit_*.deb; \
    rm -rf /tmp/tacc-sdk /tmp/tacc-debs; \
    test -e /opt/tacc/lib/libtacc.so
