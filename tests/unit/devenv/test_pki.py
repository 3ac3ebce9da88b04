import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kpo_devenv.pki import generate_pki


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_every_cert_is_signed_by_the_ca(tmp_path: Path) -> None:
    pki = generate_pki(tmp_path)
    ca = _cert(pki.ca.cert)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    for pair in (pki.serving, pki.admin, pki.client("kcm", "system:kube-controller-manager")):
        cert = _cert(pair.cert)
        cert.verify_directly_issued_by(ca)
        assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca


def test_serving_cert_covers_loopback_and_service_names(tmp_path: Path) -> None:
    pki = generate_pki(tmp_path, service_ip="10.0.0.1")
    san = (
        _cert(pki.serving.cert)
        .extensions.get_extension_for_class(x509.SubjectAlternativeName)
        .value
    )
    assert ipaddress.ip_address("127.0.0.1") in san.get_values_for_type(x509.IPAddress)
    assert ipaddress.ip_address("10.0.0.1") in san.get_values_for_type(x509.IPAddress)
    assert "kubernetes.default.svc" in san.get_values_for_type(x509.DNSName)
    usage = _cert(pki.serving.cert).extensions.get_extension_for_class(x509.ExtendedKeyUsage)
    assert ExtendedKeyUsageOID.SERVER_AUTH in usage.value


def test_admin_cert_is_a_system_masters_client(tmp_path: Path) -> None:
    pki = generate_pki(tmp_path)
    admin = _cert(pki.admin.cert)
    orgs = [a.value for a in admin.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    assert orgs == ["system:masters"]
    usage = admin.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.CLIENT_AUTH in usage


def test_service_account_keys_match_and_private_keys_are_private(tmp_path: Path) -> None:
    pki = generate_pki(tmp_path)
    private = serialization.load_pem_private_key(pki.service_account_key.read_bytes(), None)
    public = serialization.load_pem_public_key(pki.service_account_pub.read_bytes())
    assert isinstance(private, ec.EllipticCurvePrivateKey)
    assert private.public_key().public_numbers() == public.public_numbers()  # type: ignore[union-attr]
    for key in (pki.ca.key, pki.serving.key, pki.admin.key, pki.service_account_key):
        assert key.stat().st_mode & 0o077 == 0
