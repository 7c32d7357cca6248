"""`--internal-tls`: a certificate authority of the job's own, made when the job starts.

The coordinator makes one self-signed certificate (and key) per job; it is both the authority and the
certificate every endpoint (control port, data ports) serves. Clients trust that certificate alone, so
only a holder of the job's key can serve a connection the job accepts. Host names are not checked:
endpoints are addressed by IP (pod IPs, loopback) and the key, not a name, identifies the job. The
handshake still runs inside TLS, so a connection is authenticated by the job secret either way.
"""

from __future__ import annotations

import datetime
import os
import ssl
import tempfile
from pathlib import Path

from sluice.transport.secret import TlsMaterial


class TlsUnavailable(RuntimeError):
    """`--internal-tls` needs the `cryptography` package (`pip install 'sluice[tls]'`)."""


def generate_job_ca(job_id: str, valid_days: int = 3650) -> TlsMaterial:
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError as err:
        raise TlsUnavailable(
            "--internal-tls needs the 'cryptography' package: pip install 'sluice[tls]'"
        ) from err
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"sluice job {job_id[:48]}")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=valid_days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(key, hashes.SHA256())
    )
    return TlsMaterial(
        certificate.public_bytes(serialization.Encoding.PEM).decode(),
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode(),
    )


def server_context(material: TlsMaterial) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    # The ssl module loads a key only from a file: a private directory that lives for one call.
    with tempfile.TemporaryDirectory(prefix="sluice-tls-") as folder:
        os.chmod(folder, 0o700)
        cert, key = Path(folder) / "cert.pem", Path(folder) / "key.pem"
        cert.write_text(material.certificate_pem)
        key.touch(mode=0o600)
        key.write_text(material.key_pem)
        context.load_cert_chain(cert, key)
    return context


def client_context(material: TlsMaterial) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = False
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(cadata=material.certificate_pem)
    return context
