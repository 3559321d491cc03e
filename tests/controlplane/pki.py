"""The certificates and keys of one test control plane: a CA, the API server's serving certificate,
client certificates for the admin and for the controller manager and scheduler (the identities
Kubernetes' bootstrap RBAC already binds), and the ServiceAccount token signing key.

ECDSA P-256 throughout: generating a key takes microseconds, where RSA 2048 takes tens of milliseconds
per key on a loaded machine."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Every name and address a client may dial the API server by: loopback for the tests, the in-cluster
# names and the first address of the service range for pods that would resolve `kubernetes.default`.
SERVING_NAMES = ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc")
SERVING_ADDRESSES = ("127.0.0.1", "10.0.0.1")


@dataclass(frozen=True)
class Identity:
    """A client certificate's subject: the user name (CN) and its groups (O)."""

    file_stem: str
    user: str
    groups: tuple[str, ...] = ()


ADMIN = Identity("admin", "asg-reconciler-test-admin", ("system:masters",))
CONTROLLER_MANAGER = Identity("controller-manager", "system:kube-controller-manager")
SCHEDULER = Identity("scheduler", "system:kube-scheduler")


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _name(common_name: str, groups: tuple[str, ...] = ()) -> x509.Name:
    return x509.Name(
        [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
        + [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    )


def _builder(
    subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=7))
    )


@dataclass(frozen=True)
class Pki:
    """Where the files are; `write` makes them."""

    directory: Path

    @property
    def ca(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def serving_cert(self) -> Path:
        return self.directory / "apiserver.crt"

    @property
    def serving_key(self) -> Path:
        return self.directory / "apiserver.key"

    @property
    def service_account_key(self) -> Path:
        return self.directory / "sa.key"

    @property
    def service_account_public(self) -> Path:
        return self.directory / "sa.pub"

    def client_cert(self, who: Identity) -> Path:
        return self.directory / f"{who.file_stem}.crt"

    def client_key(self, who: Identity) -> Path:
        return self.directory / f"{who.file_stem}.key"

    def write(self) -> Pki:
        self.directory.mkdir(parents=True, exist_ok=True)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = _name("asg-reconciler-test-ca")
        ca_cert = (
            _builder(ca_name, ca_name, ca_key)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(ca_key, hashes.SHA256())
        )
        self.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))

        serving_key = ec.generate_private_key(ec.SECP256R1())
        alt_names: list[x509.GeneralName] = [x509.DNSName(n) for n in SERVING_NAMES]
        alt_names += [x509.IPAddress(ipaddress.ip_address(a)) for a in SERVING_ADDRESSES]
        serving = (
            _builder(_name("kube-apiserver"), ca_name, serving_key)
            .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        self.serving_cert.write_bytes(serving.public_bytes(serialization.Encoding.PEM))
        self.serving_key.write_bytes(_pem_key(serving_key))

        for who in (ADMIN, CONTROLLER_MANAGER, SCHEDULER):
            key = ec.generate_private_key(ec.SECP256R1())
            cert = (
                _builder(_name(who.user, who.groups), ca_name, key)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
                .sign(ca_key, hashes.SHA256())
            )
            self.client_cert(who).write_bytes(cert.public_bytes(serialization.Encoding.PEM))
            self.client_key(who).write_bytes(_pem_key(key))

        sa_key = ec.generate_private_key(ec.SECP256R1())
        self.service_account_key.write_bytes(_pem_key(sa_key))
        self.service_account_public.write_bytes(
            sa_key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        return self
