# Sourced by the Dockerfile's RUN steps that download (pip, uv): when the build was given a CA bundle
# as the secret "ca-bundle" (scripts/build-image.sh passes the machine's own, for networks that reach
# PyPI through a TLS-inspecting proxy), those clients trust it. It is a secret mount, so it never ends
# up in a layer of the image.
if [ -s /run/secrets/ca-bundle ]; then
    export SSL_CERT_FILE=/run/secrets/ca-bundle PIP_CERT=/run/secrets/ca-bundle
fi
